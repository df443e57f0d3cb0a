#!/usr/bin/env python3
"""bench-megatron.py CLI — what recording costs a megatron-core job (issue 28).

The 2-process CPU gloo job of tests/pytorch/megatron-train.py (1F1B, pp 2,
M 8, 8 layers of width 256, sequence 64, micro-batch 2) under
`pipescope-cli profile`, measured as bench-torch measures a PyTorch job: in
paired steps, every other step recorded (PIPESCOPE_BENCH_ALTERNATE: the
hook passes the others through untouched), so each recorded step has an
unrecorded neighbour under the same load.  A step's time is the slower
process's; the cost is the median over pairs of recorded / unrecorded, the
median of ROUNDS runs; likewise the main thread's CPU time a step
(time.thread_time, less sensitive to a busy machine).  Target: < 1.01.
Needs PIPESCOPE_TORCH_PYTHON with megatron-core; else exits 77.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = int(os.environ.get("BENCH_MEGATRON_ROUNDS", "3"))
STEPS, WARM = 40, 6


def pairs(out, key):
    ranks = [json.load(open(os.path.join(out, f"process{g}.json")))[key] for g in (0, 1)]
    t = [max(a, b) for a, b in zip(*ranks)][WARM:]
    # the hook counts calls from 1: odd calls (index 0, 2, ...) recorded
    return [t[i] / t[i + 1] for i in range(0 if WARM % 2 == 0 else 1, len(t) - 1, 2)]


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or subprocess.run([py, "-c", "import megatron.core"], capture_output=True).returncode:
        print("bench-megatron: skipped: PIPESCOPE_TORCH_PYTHON with megatron-core is not set (./dev.sh test)")
        return 77
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PIPESCOPE_BENCH_ALTERNATE="1")
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    wall, cpu, step_ms = [], [], []
    with tempfile.TemporaryDirectory(prefix="pp-bench-meg-") as tmp:
        env["XDG_RUNTIME_DIR"] = tmp
        for i in range(ROUNDS):
            out = os.path.join(tmp, f"out{i}")
            cmd = [cli, "profile", "--trace", os.path.join(tmp, f"t{i}.pptrace"), "--",
                   torchrun, "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "..", "pytorch",
                                                                                   "megatron-train.py"),
                   "--pp", "2", "--microbatches", "8", "--layers", "8", "--hidden", "256", "--seq", "64",
                   "--steps", str(STEPS), "--out", out]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if p.returncode != 0 or "not recording" in p.stderr:
                print(f"bench-megatron: the run failed:\n{p.stderr[-2000:]}")
                return 1
            wall.append(statistics.median(pairs(out, "step_s")))
            cpu.append(statistics.median(pairs(out, "cpu_s")))
            r0 = json.load(open(os.path.join(out, "process0.json")))["step_s"][WARM:]
            step_ms.append(statistics.median(r0[1::2]) * 1e3)
    print(f"bench-megatron: 2 processes, 1F1B pp 2 M 8, unrecorded step {statistics.median(step_ms):.1f} ms")
    print(f"  recorded / unrecorded step, wall (median of {ROUNDS} runs): {statistics.median(wall):.4f} "
          f"(runs {', '.join(f'{x:.4f}' for x in wall)})")
    print(f"  recorded / unrecorded step, main thread CPU: {statistics.median(cpu):.4f} "
          f"(runs {', '.join(f'{x:.4f}' for x in cpu)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
