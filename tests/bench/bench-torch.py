#!/usr/bin/env python3
"""bench-torch.py CLI — what recording costs a PyTorch job (issue 14).

A 2-rank CPU gloo job (tests/pytorch/train.py, Schedule1F1B, M=8, 4 linear
layers of width 256 per stage, batch 64; bench-run's P=2, M=8 shape).

Cost, in paired steps (as bench-run measures the probe): in one process,
every other step is recorded (PIPESCOPE_BENCH_ALTERNATE: the hook passes
the others through untouched; torch.profiler, CPU activities, the tool
users reach for today, on a wait=1/active=1 schedule), so each recorded
step has an unrecorded neighbour under the same load.  A step's time is
the slower rank's; the cost is the median over pairs of recorded /
unrecorded, over ROUNDS runs each.  Target for the hook: < 1.01.

Size: bytes a block in pipescope's trace against torch.profiler's Chrome
JSON, each recording every step of one run.  Needs PIPESCOPE_TORCH_PYTHON.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = int(os.environ.get("BENCH_TORCH_ROUNDS", "3"))
STEPS, WARM = 80, 10


def step_times(out):
    ranks = [json.load(open(os.path.join(out, f"rank{r}.json")))["step_s"] for r in (0, 1)]
    return [max(a, b) for a, b in zip(*ranks)]


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py:
        print("bench-torch: skipped: PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test sets it)")
        return 77
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    tmp = tempfile.mkdtemp(prefix="pp-bench-torch-")
    env["XDG_RUNTIME_DIR"] = tmp
    os.chmod(tmp, 0o700)
    base = [torchrun, "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "..", "pytorch", "train.py"),
            "--schedule", "Schedule1F1B", "--microbatches", "8", "--layers", "4", "--width", "256",
            "--batch", "64", "--steps", str(STEPS)]

    def run(cmd, extra_env, what):
        p = subprocess.run(cmd, env=dict(env, **extra_env), capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"bench-torch: {what} failed:\n{p.stderr[-2000:]}")

    # the hook alone: its environment as profile sets it, no collector
    lib = os.environ.get("PIPESCOPE_LIB") or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(cli))),
                                                          "probe", "libpipescope-probe.so")
    pkg = os.path.normpath(os.path.join(HERE, "..", "..", "probe", "python"))
    hook_env = {"PYTHONPATH": os.path.join(pkg, "pipescope", "_autoload"), "PIPESCOPE_PYTHON": pkg,
                "PIPESCOPE_LIB": lib, "PIPESCOPE_JOB": "bench-torch"}
    paired = {"pipescope": [], "hook alone": [], "torch.profiler": []}
    for rnd in range(ROUNDS):
        for what in paired:
            out = os.path.join(tmp, f"pair-{what}-{rnd}")
            cmd = base + ["--out", out]
            extra = {"PIPESCOPE_BENCH_ALTERNATE": "1"}
            if what == "pipescope":
                cmd = [cli, "profile", "--trace", out + ".pptrace", "--"] + cmd
                on_even = True    # the hook records steps 0, 2, 4, ...
            elif what == "hook alone":
                extra.update(hook_env, PIPESCOPE_TRACE=out + ".pptrace")
                on_even = True
            else:
                cmd = cmd + ["--profile-trace", out + ".kineto"]
                on_even = False   # the profiler's wait=1, active=1: steps 1, 3, 5, ...
            run(cmd, extra, what)
            t = step_times(out)
            ratios = []
            for k in range(WARM - WARM % 2, STEPS - 1, 2):
                rec, plain = (t[k], t[k + 1]) if on_even else (t[k + 1], t[k])
                ratios.append(rec / plain)
            paired[what].append(statistics.median(ratios))

    sizes = {}
    out = os.path.join(tmp, "size-pipescope")
    run([cli, "profile", "--trace", out + ".pptrace", "--"] + base + ["--out", out], {}, "pipescope")
    sizes["pipescope"] = os.path.getsize(out + ".pptrace")
    out = os.path.join(tmp, "size-profiler")
    run(base + ["--out", out, "--profile-trace", out + ".kineto"], {}, "torch.profiler")
    sizes["torch.profiler"] = sum(os.path.getsize(f"{out}.kineto.rank{r}.json") for r in (0, 1))

    print(f"bench-torch: 1F1B, 2 ranks, M=8, {STEPS} steps ({WARM} warm-up left out), "
          f"every other step recorded, {ROUNDS} runs each")
    for what, v in paired.items():
        print(f"  {what:15s} recorded/unrecorded step time, median of pairs: {statistics.median(v):.4f}"
              f"   runs " + " ".join(f"{x:.4f}" for x in v))
    blocks = 2 * 8 * 2 * STEPS   # F and B of 8 micro-batches on 2 ranks a step
    for what, n in sizes.items():
        print(f"  {what:15s} {n:10d} bytes for {STEPS} steps, {n / blocks:8.1f} bytes a block "
              f"(everything the file holds, over the {blocks} blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
