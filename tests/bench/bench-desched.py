#!/usr/bin/env python3
"""bench-desched — does "descheduled" in runtime's parts tell a rank kept off
its CPU from one that was not (issue 29)?

Two shapes of the bundled runtime (1F1B, M = 8, 12 steps), RUNS times each,
alternately:
  over: 4 ranks with one core between them (taskset to the first usable
        core): whenever a rank's input arrives, its core is running another
        rank's block, so its idle gaps hold run-queue delay;
  own:  2 ranks on 2 cores, each pinned to its own (--pin): a rank woken in
        a gap finds its core free; what delay is left is other load.
For each run, the share of the ranks' idle time that `export --format why`
charges to descheduled (the sum over ranks of idle[r].runtime_parts.
descheduled over the sum of idle[r].idle).  Prints both medians and their
ratio (target: own below a quarter of over).  It is a benchmark, not a test:
the share of the core-per-rank run is the machine's other load, which no
test can bound (CI's parallel tests once gave it 0.31).

Exits non-zero only if a run fails or prints no number.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

RUNS = int(os.environ.get("PIPESCOPE_BENCH_DESCHED_RUNS", "5"))
SHAPE = ["-s", "1f1b", "-m", "8", "--steps", "12", "--no-live"]


def cores(n):
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < n:
        sys.exit(f"bench-desched: needs {n} usable cores, has {len(usable)}")
    return ",".join(str(c) for c in usable[:n])


def share(cli, trace, ranks, n_cores, pin):
    args = ["taskset", "-c", cores(n_cores), cli, "run", "-p", str(ranks)] + SHAPE + ["--trace", trace]
    if pin:
        args.append("--pin")
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench-desched: {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    r = subprocess.run([cli, "export", trace, "--format", "why", "-o", "-"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench-desched: export failed: {r.stderr.strip()[-300:]}")
    why = json.loads(r.stdout)
    idle = sum(x["idle"] for x in why["idle"])
    desched = sum(x.get("runtime_parts", {}).get("descheduled", 0) for x in why["idle"])
    if idle <= 0:
        sys.exit("bench-desched: a run with no idle time")
    return desched / idle


def main():
    cli = sys.argv[1]
    over, own = [], []
    with tempfile.TemporaryDirectory(prefix="bench-desched-") as d:
        t = os.path.join(d, "t.pptrace")
        for _ in range(RUNS):
            over.append(share(cli, t, 4, 1, False))
            own.append(share(cli, t, 2, 2, True))
    mo, mw = statistics.median(over), statistics.median(own)
    print(f"descheduled share of idle time, median of {RUNS} runs")
    print(f"  4 ranks on 1 core    {mo:.4f}   (runs: {' '.join(f'{x:.3f}' for x in over)})")
    print(f"  2 ranks, own cores   {mw:.4f}   (runs: {' '.join(f'{x:.3f}' for x in own)})")
    print(f"  own / over           {mw / mo if mo > 0 else float('nan'):.3f}   (target < 0.25)")


if __name__ == "__main__":
    main()
