#!/usr/bin/env python3
"""test-run-stuck CLI MPI_FOUND — the bundled runtime stuck on purpose
(`run --hang RANK`, issue 37's test 5; docs/stuck.md) is diagnosed: the
hung rank is the root and the others wait for it.

  1. threads: `run -p 4 --hang 2 --trace T` (no MPI).  `info` on T while it
     runs is polled until its diagnosis names the root (no time is waited
     for); then SIGINT stops the run cleanly (exit 0, "stopped after 1
     step"), and `info` on the kept trace prints the same line: process 2 in
     F of step 1 "in run --hang", processes 0, 1, 3 waiting for it (1 and 3
     in a WAIT from 2).  A run that ends normally prints no diagnosis (each
     rank's last frame says it closed).
  2. MPI (skipped without MPI in the build or without mpirun): `profile
     --hang-after 5 -- mpirun -np 4 pipescope-cli run --hang 2` prints the
     same diagnosis, ends the job and exits 3; the trace is kept and `info`
     on it prints the same line.

Every job is bounded: one that outlives its bound is killed (its process
group) and the case fails.  TAP output.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CLI = sys.argv[1]
MPI_FOUND = len(sys.argv) > 2 and sys.argv[2] == "true"
SHAPE = ["-s", "1F1B", "-m", "4", "--layers", "8", "--width", "32"]
BOUND_S = 240     # the most any job here may take before it is killed
n = 0
failures = 0


def check(ok, what):
    global n, failures
    n += 1
    print(("ok" if ok else "not ok") + f" {n} - {what}", flush=True)
    if not ok:
        failures += 1


def stuck_line(text):
    """The diagnosis line, its duration taken out ("for 3 s" -> "for N s")."""
    for line in text.splitlines():
        if line.startswith("stuck: "):
            return re.sub(r" for \d+ s", " for N s", line)
    return None


def names_root(line):
    return (line is not None and line.startswith("stuck: process 2 (pp 2) in F mb 0 of step 1 for N s, in run --hang;")
            and "processes 0, 1, 3 wait for it" in line and "1 and 3 in WAIT mb 0 from 2" in line)


def info(path):
    r = subprocess.run([CLI, "info", path], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return p.communicate()


def threads(tmp):
    path = os.path.join(tmp, "threads.pptrace")
    job = subprocess.Popen([CLI, "run", *SHAPE, "-p", "4", "--steps", "1000", "--hang", "2", "--no-live",
                            "--backend", "cpu", "--trace", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen, deadline = None, time.monotonic() + BOUND_S
    while job.poll() is None and time.monotonic() < deadline:
        if os.path.exists(path):
            rc, out = info(path)
            seen = stuck_line(out) if rc == 0 else None
            if names_root(seen):
                break
        time.sleep(0.5)
    check(names_root(seen), f"threads: info on the running trace names rank 2 the root, 0, 1, 3 waiting ({seen})")
    job.send_signal(signal.SIGINT)
    try:
        out, err = job.communicate(timeout=BOUND_S)
        ended = True
    except subprocess.TimeoutExpired:
        out, err = kill_group(job)
        ended = False
    check(ended and job.returncode == 0 and "stopped after 1 step" in out,
          f"threads: SIGINT stops the hung run cleanly (exit {job.returncode})")
    check("--hang: pipeline rank 2 sleeps in its forward of micro-batch 0 of step 1" in err,
          "threads: run says where --hang stopped the rank")
    rc, text = info(path)
    kept = stuck_line(text)
    check(rc == 0 and names_root(kept) and kept == seen,
          f"threads: info on the kept trace prints the same diagnosis ({kept})")

    done = os.path.join(tmp, "done.pptrace")
    r = subprocess.run([CLI, "run", *SHAPE, "-p", "4", "--steps", "2", "--no-live", "--backend", "cpu",
                        "--trace", done], capture_output=True, text=True, timeout=BOUND_S)
    rc, text = info(done)
    check(r.returncode == 0 and rc == 0 and "step " in text and stuck_line(text) is None,
          "threads: a run that ended prints no diagnosis (every rank's last frame says it closed)")


def mpi(tmp):
    mpirun = shutil.which("mpirun")
    if not MPI_FOUND or mpirun is None:
        for what in ("exits 3", "the diagnosis", "the trace kept", "info's line"):
            check(True, "# SKIP mpi: " + ("this build has no MPI" if not MPI_FOUND else "no mpirun on PATH"))
        return
    # as root OpenMPI refuses to start unless told; two cores run four ranks
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    path = os.path.join(tmp, "mpi.pptrace")
    job = subprocess.Popen([CLI, "profile", "--hang-after", "5", "--trace", path, "--",
                            mpirun, "--oversubscribe", "-np", "4", CLI, "run", *SHAPE, "--steps", "1000000",
                            "--backend", "cpu", "--hang", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           cwd=tmp)
    try:
        out, err = job.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        out, err = kill_group(job)
    check(job.returncode == 3, f"mpi: profile --hang-after ends the stuck job and exits 3 ({job.returncode})")
    said = stuck_line(err)
    check(names_root(said), f"mpi: profile names rank 2 the root, 0, 1, 3 waiting ({said})")
    check(os.path.exists(path), "mpi: the trace is kept")
    rc, text = info(path) if os.path.exists(path) else (1, "")
    kept = stuck_line(text)
    check(rc == 0 and kept == said, f"mpi: info on the trace prints the same diagnosis ({kept})")


def main():
    tmp = tempfile.mkdtemp(prefix="pp-test-run-stuck-")
    try:
        threads(tmp)
        mpi(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{n}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
