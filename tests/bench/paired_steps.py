"""paired_steps.py — what recording costs a framework's job, in paired steps
(bench-megatron, bench-deepspeed; bench-torch measures PyTorch's its own way).

The job runs under `pipescope-cli profile` with PIPESCOPE_BENCH_ALTERNATE set:
the hook records every other step and passes the others through untouched,
so each recorded step has an unrecorded neighbour under the same load.  The
job writes DIR/process<G>.json with `step_s` and `cpu_s` (wall and main
thread CPU seconds a step).  A step's time is the slower process's; the
cost is the median over pairs of recorded / unrecorded, the median of
`rounds` runs.  Target: < 1.01.
"""

import json
import os
import statistics
import subprocess
import tempfile

STEPS, WARM = 40, 6


def pairs(out, key, world):
    ranks = [json.load(open(os.path.join(out, f"process{g}.json")))[key] for g in range(world)]
    t = [max(x) for x in zip(*ranks)][WARM:]
    # the hook counts calls from 1: odd calls (index 0, 2, ...) recorded
    return [t[i] / t[i + 1] for i in range(0 if WARM % 2 == 0 else 1, len(t) - 1, 2)]


def measure(name, cli, py, script, args, what, rounds, world=2, env_extra=None):
    """Runs script under profile `rounds` times and prints the medians;
    returns the exit status (1 where a run failed)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PIPESCOPE_BENCH_ALTERNATE="1",
               **(env_extra or {}))
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    wall, cpu, step_ms = [], [], []
    with tempfile.TemporaryDirectory(prefix=f"pp-{name}-") as tmp:
        env["XDG_RUNTIME_DIR"] = tmp
        for i in range(rounds):
            out = os.path.join(tmp, f"out{i}")
            cmd = [cli, "profile", "--trace", os.path.join(tmp, f"t{i}.pptrace"), "--",
                   torchrun, "--standalone", "--nproc-per-node", str(world), script] + args + [
                   "--steps", str(STEPS), "--out", out]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if p.returncode != 0 or "not recording" in p.stderr:
                print(f"{name}: the run failed:\n{p.stderr[-2000:]}")
                return 1
            wall.append(statistics.median(pairs(out, "step_s", world)))
            cpu.append(statistics.median(pairs(out, "cpu_s", world)))
            r0 = json.load(open(os.path.join(out, "process0.json")))["step_s"][WARM:]
            step_ms.append(statistics.median(r0[1::2]) * 1e3)
    print(f"{name}: {what}, unrecorded step {statistics.median(step_ms):.1f} ms")
    print(f"  recorded / unrecorded step, wall (median of {rounds} runs): {statistics.median(wall):.4f} "
          f"(runs {', '.join(f'{x:.4f}' for x in wall)})")
    print(f"  recorded / unrecorded step, main thread CPU: {statistics.median(cpu):.4f} "
          f"(runs {', '.join(f'{x:.4f}' for x in cpu)})")
    return 0
