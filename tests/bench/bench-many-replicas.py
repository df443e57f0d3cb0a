#!/usr/bin/env python3
"""bench-many-replicas SYNTH CLI — issue 40, finding 2: a trace of 11,000
one-process replicas (InterleavedZeroBubble, P 2, M 8192, V 4; 3 MB,
pp-synth-hostile-mesh many), read by

  info; export --format why (which refuses: no whole step); render (fold)
  and render --replicas all.

Prints, for each, the median over RUNS runs of the wall time, of the CPU
time (user + system) and the largest resident set.  Before the fix, info
took 167 s of CPU and export why about as long (the schedule was built
once a replica, the bubble over replicas built a view a replica).

Exits non-zero only if a command does not do what the test checks (exit
status)."""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("PIPESCOPE_BENCH_MANY_RUNS", "5"))


def timed(argv, want_rc):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, timeout=600)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != want_rc:
        sys.exit(f"bench-many-replicas: {' '.join(argv)}: exit {r.returncode}: {r.stderr[-300:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss


def main():
    synth, cli = sys.argv[1:3]
    tmp = tempfile.mkdtemp(prefix="pp-bench-many-")
    try:
        trace = os.path.join(tmp, "many.pptrace")
        subprocess.run([synth, "many", trace], check=True)
        print(f"trace: 11,000 one-process replicas, {os.path.getsize(trace) / 1e6:.1f} MB; median of {RUNS} runs")
        for name, args, rc in (("info", ["info", trace], 0),
                               ("export why", ["export", trace, "--format", "why", "-o", os.path.join(tmp, "w.json")], 1),
                               ("render fold", ["render", trace, "-o", os.path.join(tmp, "f.png")], 0),
                               ("render all", ["render", trace, "-o", os.path.join(tmp, "a.png"), "--replicas", "all"], 0)):
            got = [timed([cli] + args, rc) for _ in range(RUNS)]
            print(f"{name:12s} wall {statistics.median(g[0] for g in got):7.2f} s  "
                  f"cpu {statistics.median(g[1] for g in got):7.2f} s  (max RSS of the runs so far "
                  f"{max(g[2] for g in got) / 1024:.0f} MB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
