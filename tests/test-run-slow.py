#!/usr/bin/env python3
"""test-run-slow.py CLI MPI_FOUND — the bundled runtime makes a straggler on
purpose (issue 38): `run --slow RANK:FACTOR` stretches pipeline rank RANK's
compute FACTOR times.

  1. threads: with --slow 1:4 the Why analysis names stage 1 the slowest,
     with --slow 0:4 stage 0 (an order, both ways: neither stage is slow
     by itself); the description's command line says --slow;
  2. under mpirun (one process a rank; skipped without MPI or mpirun): the
     merged trace names the slowed stage the slowest, both ways;
  3. --slow of a rank the job lacks, a factor below 1 or above 100, or no
     factor: one line, exit 2.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pp_tap import fail, ok  # noqa: E402

CLI, MPI_FOUND = sys.argv[1], sys.argv[2] == "true"
SHAPE = ["-s", "1F1B", "-m", "4", "--steps", "4", "--no-live", "--backend", "cpu", "--layers", "4"]


def run(args, check=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=240)
    if check and p.returncode != 0:
        fail(f"{' '.join(map(str, args))}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def slowest(trace):
    w = json.loads(run([CLI, "export", trace, "--format", "why", "-o", "-"]).stdout)
    return w["what_to_change"]["slowest_stage"]


n = 0
with tempfile.TemporaryDirectory() as tmp:
    for rank in (1, 0):
        trace = os.path.join(tmp, f"t{rank}.pptrace")
        run([CLI, "run", "-p", "2", *SHAPE, "--slow", f"{rank}:4", "--trace", trace])
        if slowest(trace) != rank:
            fail(f"threads, --slow {rank}:4: the slowest stage is {slowest(trace)}")
        info = run([CLI, "info", trace]).stdout
        if f"--slow {rank}:4" not in info:
            fail("the description's command line lacks --slow")
    ok("threads: --slow 1:4 makes stage 1 the slowest, --slow 0:4 stage 0")

    mpirun = shutil.which("mpirun")
    if MPI_FOUND and mpirun is not None:
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        os.environ["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        for rank in (1, 0):
            trace = os.path.join(tmp, f"m{rank}.pptrace")
            run([mpirun, "--oversubscribe", "-np", "2", CLI, "run", *SHAPE, "--slow", f"{rank}:4",
                 "--trace", trace])
            merged = os.path.join(tmp, f"m{rank}-all.pptrace")
            run([CLI, "merge", "-o", merged, os.path.join(tmp, f"m{rank}.rank0.pptrace"),
                 os.path.join(tmp, f"m{rank}.rank1.pptrace")])
            if slowest(merged) != rank:
                fail(f"mpirun, --slow {rank}:4: the slowest stage is {slowest(merged)}")
        ok("mpirun: the slowed stage is the slowest, both ways")
    else:
        ok("# SKIP mpirun: " + ("this build has no MPI" if not MPI_FOUND else "no mpirun on PATH"))

    for bad in ("2:3", "1:0.5", "1:101", "1", "x:2"):
        p = run([CLI, "run", "-p", "2", *SHAPE, "--slow", bad], check=False)
        if p.returncode != 2 or len(p.stderr.strip().splitlines()) != 1 or "--slow" not in p.stderr:
            fail(f"--slow {bad}: exit {p.returncode}: {p.stderr!r}")
    ok("a bad --slow: one line, exit 2")
print("1..3")
