#!/usr/bin/env python3
"""bench-why CLI — does the partition "what to change" proposes run as fast
as it predicts?  Issue 16's acceptance: a 1F1B run of the bundled runtime
with a deliberately unbalanced partition (P = 4, --partition 5,1,1,1) gets a
balanced partition proposed, with a predicted step time that a run with it
then confirms within 10%.

For each case, RUNS times, alternately:
  (1) the unbalanced run, with a trace; `info` on it gives the proposal
      ("what to change: --partition X (now Y): predicted step Z ms") and
      the simulator's step for the run itself ("the plan now W ms");
  (2) a run with the proposed partition, with a trace; its measured step
      from `export --format why` (step_length: the whole step, its first
      work start to its last work end, the optimizer step OPT included
      since issue 36, the median over the analysed steps).
The two sides differ by the optimizer step: the simulator's step is a
plan's blocks, first to last, and plans no OPT, while the whole step holds
the last rank's OPT (a few ms a step here, which no partition changes).
run's own "mean step time" also holds the step's bookkeeping.
Prints, per case, the medians and measured/predicted for the proposal, and
the same ratio for the unbalanced run against its own plan.

With a core per rank the simulator runs each rank as fast as when it was
measured.  With more ranks than this process may use cores, a balanced run
computes on every rank at once and the ranks share the cores: `run` says so
in the trace ("4 rank threads on 2 cores") and the proposal is simulated
with the running blocks sharing the cores (pp_simulate_shared), which the
table marks.  The 4-rank case is the acceptance; the 2-rank case is the
same claim with a core per rank on a 2-core machine.

Exits non-zero only if a run fails or prints no number.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

SHAPE = ["-s", "1F1B", "-m", "8", "--layers", "8", "--width", "256", "--batch", "64",
         "--steps", "60", "--no-live"]
CASES = [(2, "7,1"), (4, "5,1,1,1")]
RUNS = int(os.environ.get("PIPESCOPE_BENCH_WHY_RUNS", "3"))


def run(cli, args):
    r = subprocess.run([cli] + args, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench-why: {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return r.stdout


def measured_step(cli, trace, tmp):
    """The trace's mean step, first block to last, in ms (the why export)."""
    path = os.path.join(tmp, "why.json")
    run(cli, ["export", trace, "--format", "why", "-o", path])
    with open(path) as f:
        return 1000.0 * float(json.load(f)["step_length"])


def main():
    cli = sys.argv[1]
    cores = len(os.sched_getaffinity(0))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "unbalanced.pptrace")
        for p, partition in CASES:
            base = SHAPE + ["-p", str(p)]
            pred, meas, plan_now, meas_now, proposed, shared = [], [], [], [], None, None
            for _ in range(RUNS):
                run(cli, ["run"] + base + ["--partition", partition, "--trace", trace])
                meas_now.append(measured_step(cli, trace, tmp))
                info = run(cli, ["info", trace])
                m = re.search(r"what to change: --partition ([0-9,]+) \(now [0-9,]+\): "
                              r"predicted step ([0-9.]+) ms \(the plan now ([0-9.]+) ms;", info)
                if m is None:
                    sys.exit(f"bench-why: info proposed no partition for {partition}:\n"
                             + "\n".join(l for l in info.splitlines() if "change" in l))
                proposed = m.group(1)
                sh = re.search(r"the ranks sharing ([0-9]+) cores", info)
                shared = int(sh.group(1)) if sh else None
                pred.append(float(m.group(2)))
                plan_now.append(float(m.group(3)))
                run(cli, ["run"] + base + ["--partition", proposed, "--trace", trace])
                meas.append(measured_step(cli, trace, tmp))
            rows.append((p, partition, proposed, statistics.median(pred), statistics.median(meas),
                         statistics.median(plan_now), statistics.median(meas_now), shared))

    print(f"bench-why: 1F1B, M=8, 8 blocks, width 256, batch 64, 60 steps; medians of {RUNS}; "
          f"{cores} cores here")
    print(f"{'P':>2} {'from':>9} {'proposed':>9} {'predicted':>10} {'measured':>9} {'ratio':>6}"
          f"   {'plan now':>9} {'measured':>9} {'ratio':>6}")
    for p, partition, proposed, pr, me, pn, mn, shared in rows:
        mark = ""
        if shared:
            mark = f"   (simulated with the {p} ranks sharing {shared} cores)"
        elif p > cores:
            mark = f"   (P={p} > {cores} cores, simulated with a core each: not a confirmation)"
        print(f"{p:>2} {partition:>9} {proposed:>9} {pr:>8.1f}ms {me:>7.1f}ms {me / pr:>6.3f}"
              f"   {pn:>7.1f}ms {mn:>7.1f}ms {mn / pn:>6.3f}{mark}")
    print("ratio: measured / predicted; within 10% means 0.90 to 1.10")


if __name__ == "__main__":
    main()
