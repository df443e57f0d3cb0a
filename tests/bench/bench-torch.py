#!/usr/bin/env python3
"""bench-torch.py CLI — what recording costs a PyTorch job (issue 14).

A 2-rank CPU gloo job (tests/pytorch/train.py, Schedule1F1B, M=8, 4 linear
layers of width 256 per stage, batch 64; bench-run's P=2, M=8 shape) runs
alternately plain, under `pipescope-cli profile` (the hook) and under
torch.profiler (CPU activities, what users reach for today), ROUNDS times
each.  Per run: the median step time of the last steps (the first WARM
left out, as compile and allocation warm-up); per configuration the median
of the runs.  Prints the ratios against plain (the target: hook < 1.01),
and the bytes a block costs in pipescope's trace against torch.profiler's
Chrome JSON for the same steps.  Needs PIPESCOPE_TORCH_PYTHON.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = int(os.environ.get("BENCH_TORCH_ROUNDS", "3"))
STEPS, WARM = 60, 10


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
    med = {"plain": [], "pipescope": [], "torch.profiler": []}
    sizes = {}
    for rnd in range(ROUNDS):
        for what in med:
            out = os.path.join(tmp, f"{what}-{rnd}")
            cmd = base + ["--out", out]
            if what == "pipescope":
                cmd = [cli, "profile", "--trace", out + ".pptrace", "--"] + cmd
            elif what == "torch.profiler":
                cmd = cmd + ["--profile-trace", out + ".kineto"]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"bench-torch: {what} failed:\n{p.stderr[-2000:]}")
                return 1
            steps = []
            for r in (0, 1):
                steps.append(json.load(open(os.path.join(out, f"rank{r}.json")))["step_s"][WARM:])
            # a step ends when both ranks have: the slower rank's time
            med[what].append(statistics.median(max(a, b) for a, b in zip(*steps)))
            if rnd == 0 and what != "plain":
                if what == "pipescope":
                    sizes[what] = os.path.getsize(out + ".pptrace")
                else:
                    sizes[what] = sum(os.path.getsize(f"{out}.kineto.rank{r}.json") for r in (0, 1))
    plain = statistics.median(med["plain"])
    print(f"bench-torch: 1F1B, 2 ranks, M=8, {STEPS} steps ({WARM} warm-up left out), "
          f"{ROUNDS} alternating rounds, medians")
    for what, v in med.items():
        m = statistics.median(v)
        print(f"  {what:15s} step {m * 1e3:8.3f} ms   ratio {m / plain:.4f}   runs "
              + " ".join(f"{x * 1e3:.3f}" for x in v))
    blocks = 2 * 8 * 2 * STEPS   # F and B of 8 micro-batches on 2 ranks a step
    for what, n in sizes.items():
        print(f"  {what:15s} {n:10d} bytes for {STEPS} steps, {n / blocks:8.1f} bytes a block "
              f"(everything it holds, over the {blocks} blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
