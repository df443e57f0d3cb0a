#!/usr/bin/env python3
"""bench-mpi CLI — ranks as MPI processes against ranks as threads, at
bench-run's shape (1F1B, P = 2, M = 8, 8 blocks, width 256, batch 64).

  (1) step time over MPI / step time over the local transport, medians of
      5 runs each of 60 steps, taken alternately (target <= 1.15);
  (2) samples/s of P = 2 processes against P = 2 threads; bench-run's (2)
      gives one rank without a pipeline on the same network, for the
      processes-against-one-rank ratio (target >= 1.5x);
  (3) the collector (rank 0 serving every rank's records live): spans a
      second it merges, and rank 0's step time live against --no-live.

Each run's own report is parsed ("mean step time X ms, Y samples/s", over
its last 30 steps).  Prints a table; exits non-zero only if a run fails.
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
    local, over_mpi, live, col = [], [], [], []
    live_shape = [a for a in SHAPE if a != "--no-live"]
    for _ in range(RUNS):
        local.append(measure([cli, "run", "-s", "1F1B", "-p", "2"] + SHAPE))
        over_mpi.append(measure([mpirun, "--oversubscribe", "-np", "2", cli, "run", "-s", "1F1B"] + SHAPE))
        live.append(measure([mpirun, "--oversubscribe", "-np", "2", cli, "run", "-s", "1F1B"] + live_shape,
                            col))
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    print(f"{'':28s} {'step ms':>9s} {'samples/s':>10s}")
    print(f"{'threads (local), P=2':28s} {med(local, 0):9.2f} {med(local, 1):10.0f}")
    print(f"{'processes (mpi), P=2':28s} {med(over_mpi, 0):9.2f} {med(over_mpi, 1):10.0f}")
    print(f"{'processes live (collector)':28s} {med(live, 0):9.2f} {med(live, 1):10.0f}")
    print(f"mpi / local step time: {med(over_mpi, 0) / med(local, 0):.3f} (target <= 1.15)")
    print(f"mpi P=2 / threads P=2 samples/s: {med(over_mpi, 1) / med(local, 1):.3f}")
    if col:
        rate = statistics.median(n / (ms / 1e3) for n, ms in col if ms > 0)
        print(f"collector: {rate:.0f} spans/s merged on rank 0 (median of {len(col)}); "
              f"rank 0's step time live / --no-live: {med(live, 0) / med(over_mpi, 0):.3f}")


if __name__ == "__main__":
    main()
