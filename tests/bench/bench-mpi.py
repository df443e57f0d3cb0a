#!/usr/bin/env python3
"""bench-mpi CLI — ranks as MPI processes against ranks as threads and
against one worker, at bench-run's shape (1F1B, P = 2, M = 8, 8 blocks,
width 256, batch 64), every number measured in this one run.

  (1) step time over MPI / step time over the local transport (target
      <= 1.15);
  (2) samples/s of P = 2 processes against one worker computing the whole
      network (target >= 1.5x).  `run` takes no P = 1 (every schedule needs
      2 ranks), so the one worker is GPipe's 2 rank threads confined to one
      CPU (taskset): one core computes every block of the step, the 8
      forwards and 8 backwards of both stages, as bench-run's one rank
      does; the waits cost nothing (a rank waiting for the other sleeps);
  (3) the collector (rank 0 serving every rank's records live): spans a
      second it merges, and rank 0's step time live against --no-live.

Each kind of run 5 times, taken in turns (threads, processes, processes
live, one worker, and again), 60 steps each; a run's own report is parsed
("mean step time X ms, Y samples/s", over its last 30 steps) and the table
gives medians.  Prints the load average first: other busy processes on the
machine (it may have only 2 cores) distort every number.  Exits non-zero
only if a run fails.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys

SHAPE = ["-m", "8", "--layers", "8", "--width", "256", "--batch", "64", "--steps", "60", "--no-live"]
RUNS = 5


def measure(args, collector=None):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    m = re.search(r"mean step time ([0-9.]+) ms, ([0-9]+) samples/s", r.stdout)
    if r.returncode != 0 or m is None:
        sys.exit(f"bench-mpi: {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    if collector is not None:
        c = re.search(r"collector: ([0-9]+) spans of [0-9]+ other ranks \(([0-9.]+) MiB\) served live, ([0-9.]+) ms", r.stdout)
        if c is not None:
            collector.append((int(c.group(1)), float(c.group(3))))
    return float(m.group(1)), float(m.group(2))


def main():
    cli = sys.argv[1]
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("bench-mpi: no mpirun on PATH; nothing measured")
        return
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    cpus = sorted(os.sched_getaffinity(0))
    taskset = shutil.which("taskset")
    try:
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
    except OSError:
        load = "?"
    print(f"load average at start: {load}, {len(cpus)} CPUs (other busy processes distort every number below)")
    print(f"bench-mpi: 1F1B, P=2, M=8, 8 blocks, width 256, batch 64; {RUNS} runs of each kind in turns, "
          f"medians of each run's last 30 of 60 steps\n")
    local, over_mpi, live, one, col = [], [], [], [], []
    live_shape = [a for a in SHAPE if a != "--no-live"]
    for _ in range(RUNS):
        local.append(measure([cli, "run", "-s", "1F1B", "-p", "2"] + SHAPE))
        over_mpi.append(measure([mpirun, "--oversubscribe", "-np", "2", cli, "run", "-s", "1F1B"] + SHAPE))
        live.append(measure([mpirun, "--oversubscribe", "-np", "2", cli, "run", "-s", "1F1B"] + live_shape,
                            col))
        if taskset is not None:
            one.append(measure([taskset, "-c", str(cpus[0]), cli, "run", "-s", "GPipe", "-p", "2"] + SHAPE))
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    print(f"{'':34s} {'step ms':>9s} {'samples/s':>10s}")
    print(f"{'threads (local), P=2':34s} {med(local, 0):9.2f} {med(local, 1):10.0f}")
    print(f"{'processes (mpi), P=2':34s} {med(over_mpi, 0):9.2f} {med(over_mpi, 1):10.0f}")
    print(f"{'processes live (collector), P=2':34s} {med(live, 0):9.2f} {med(live, 1):10.0f}")
    if one:
        print(f"{'one worker (1 CPU, no pipeline)':34s} {med(one, 0):9.2f} {med(one, 1):10.0f}")
    r1 = med(over_mpi, 0) / med(local, 0)
    print(f"\n(1) mpi / local step time: {r1:.3f} (target <= 1.15: {'ok' if r1 <= 1.15 else 'MISS'})")
    if one:
        r2 = med(over_mpi, 1) / med(one, 1)
        print(f"(2) mpi P=2 / one worker samples/s: {r2:.2f}x (target >= 1.5x: {'ok' if r2 >= 1.5 else 'MISS'})")
    else:
        print("(2) no taskset on PATH: the one-worker run was not measured")
    print(f"    (mpi P=2 / threads P=2 samples/s: {med(over_mpi, 1) / med(local, 1):.3f})")
    if col:
        rate = statistics.median(n / (ms / 1e3) for n, ms in col if ms > 0)
        print(f"(3) collector: {rate:.0f} spans/s merged on rank 0 (median of {len(col)} runs, "
              f"{statistics.median(n for n, _ in col):.0f} spans of rank 1 a run); "
              f"rank 0's step time live / --no-live: {med(live, 0) / med(over_mpi, 0):.3f}")


if __name__ == "__main__":
    main()
