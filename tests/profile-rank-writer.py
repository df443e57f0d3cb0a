#!/usr/bin/env python3
"""profile-rank-writer.py — a job for test-profile-files.py, recorded as a
PyTorch job is but without PyTorch: it writes its ranks' files through
probe/python/pipescope/lib.py where pipescope-cli profile says
(PIPESCOPE_TRACE.rankR; the job id the library takes from PIPESCOPE_JOB_ID).

  profile-rank-writer.py write P [DIR]   ranks 0..P-1, one after the other,
                                         GPipe, 2 micro-batches, 2 steps;
                                         in DIR when given (the job changes
                                         folder before its ranks open)
  profile-rank-writer.py hold PIDFILE    rank 0 of 1, recording until SIGTERM
                                         (then closes its rank); its pid in
                                         PIDFILE once its file is open
  profile-rank-writer.py mesh P D [G0]   a P x D job as processes (issue 27):
                                         P * D processes at once, process
                                         G0 + pp * D + dp being pipeline rank
                                         pp of replica dp, placed on the mesh
                                         (Rank.place), its file .rank<G>
  profile-rank-writer.py pipe P STEPS     a GPipe job of P ranks at once (P
                                         processes), 4 micro-batches, STEPS
                                         steps 40 ms apart, its blocks
                                         written as the steps pass (live),
                                         the last stage slower, and slower
                                         with each step (STEPS at most 160);
                                         with PP_WRITER_HOLD=FILE set, it
                                         ends only once FILE exists
Prints "wrote P ranks" (write, pipe), "wrote N processes" (mesh) on stdout.  A soft file size limit is
lifted first (to the hard one): the test limits profile's merge, not this.
"""

import os
import resource
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pipescope import lib as L  # noqa: E402

M = 2


def open_rank(rank, n_ranks):
    trace = os.environ["PIPESCOPE_TRACE"]
    r, err = L.Rank.open(os.environ.get("PIPESCOPE_JOB", "writer"), rank, n_ranks, trace=f"{trace}.rank{rank}")
    if r is None:
        sys.exit(f"profile-rank-writer: rank {rank}: {err}")
    r.describe("GPipe", "cpu", n_ranks, M, 1, "profile-rank-writer", "profile-rank-writer.py")
    r.plan(rank, [(L.F, rank, m, -1, -1, -1) for m in range(M)] + [(L.B, rank, m, -1, -1, -1) for m in range(M)])
    return r


def record_step(r, rank, step):
    t = r.now()
    r.step(step, 0, t)
    for i, kind in enumerate([L.F] * M + [L.B] * M):
        r.block(kind, rank, i % M, step, t + i * 1000, t + i * 1000 + 900)
    r.step(step, 1, t + 2 * M * 1000)


def write(n_ranks, folder):
    if folder:
        os.chdir(folder)
    for rank in range(n_ranks):
        r = open_rank(rank, n_ranks)
        for step in range(2):
            record_step(r, rank, step)
        err = r.close()
        if err:
            sys.exit(f"profile-rank-writer: rank {rank}: {err}")
    print(f"wrote {n_ranks} ranks", flush=True)


def hold(pidfile):
    r = open_rank(0, 1)

    def stop(signum, frame):
        r.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    record_step(r, 0, 0)
    r.flush()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    # bounded, so that a job nobody stops still ends on its own
    for step in range(1, 600):
        record_step(r, 0, step)
        time.sleep(0.5)
    r.close()


def mesh_one(p, d, g0, i):
    pp, dp = divmod(i, d)
    g = g0 + i
    trace = os.environ["PIPESCOPE_TRACE"]
    r, err = L.Rank.open(os.environ.get("PIPESCOPE_JOB", "writer"), pp, p, trace=f"{trace}.rank{g}")
    if r is None:
        sys.exit(f"profile-rank-writer: process {g}: {err}")
    r.rank_info()
    if not r.place(g, (pp, dp, 0), (p, d, 1)):
        sys.exit(f"profile-rank-writer: process {g}: place refused")
    r.describe("GPipe", "cpu", p, M, 1, "profile-rank-writer", "profile-rank-writer.py")
    r.plan(pp, [(L.F, pp, m, -1, -1, -1) for m in range(M)] + [(L.B, pp, m, -1, -1, -1) for m in range(M)])
    for step in range(2):
        record_step(r, pp, step)
        time.sleep(0.5)   # the collector scans every 100 ms: it sees every process
    err = r.close()
    if err:
        sys.exit(f"profile-rank-writer: process {g}: {err}")


PIPE_M = 4
PIPE_STEP_NS = 40_000_000


def pipe_times(p, step):
    """GPipe's blocks of a step, (rank, kind, mb, t0, t1) in ns from the
    step's start: F = 1 ms, B = 2 F; the last rank's F 1.5 ms and 0.4 %
    slower each step, so that no two steps are alike and the plan's bubble
    moves with the steps timed (a step stays under PIPE_STEP_NS up to step
    160)."""
    f = [(1.5 * (1.0 + 0.004 * step) if r == p - 1 else 1.0) * 1e6 for r in range(p)]
    end = {}
    out = []
    for r in range(p):
        t = 0.0
        for m in range(PIPE_M):
            t0 = max(t, end.get((r - 1, "F", m), 0.0))
            t = t0 + f[r]
            end[(r, "F", m)] = t
            out.append((r, L.F, m, t0, t))
    for r in reversed(range(p)):
        t = max(end[(r, "F", m)] for m in range(PIPE_M))
        for m in range(PIPE_M):
            t0 = max(t, end.get((r + 1, "B", m), 0.0))
            t = t0 + 2 * f[r]
            end[(r, "B", m)] = t
            out.append((r, L.B, m, t0, t))
    return out


def pipe_one(p, steps, base, rank):
    trace = os.environ["PIPESCOPE_TRACE"]
    r, err = L.Rank.open(os.environ.get("PIPESCOPE_JOB", "writer"), rank, p, trace=f"{trace}.rank{rank}")
    if r is None:
        sys.exit(f"profile-rank-writer: rank {rank}: {err}")
    r.describe("GPipe", "cpu", p, PIPE_M, 1, "profile-rank-writer", "profile-rank-writer.py pipe")
    r.plan(rank, [(L.F, rank, m, -1, -1, -1) for m in range(PIPE_M)]
           + [(L.B, rank, m, -1, -1, -1) for m in range(PIPE_M)])
    for step in range(steps):
        t = base + step * PIPE_STEP_NS
        r.step(step, 0, t)
        last = t
        for (q, kind, m, t0, t1) in pipe_times(p, step):
            if q == rank:
                r.block(kind, rank, m, step, t + int(t0), t + int(t1))
                last = t + int(t1)
        r.step(step, 1, last)
        r.flush()
        # the next step's blocks once it has passed: a live stream
        wait = (t + PIPE_STEP_NS - time.monotonic_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
    err = r.close()
    if err:
        sys.exit(f"profile-rank-writer: rank {rank}: {err}")


def pipe(p, steps):
    base = time.monotonic_ns() + 300_000_000
    procs = [subprocess.Popen([sys.executable, __file__, "pipe-one", str(p), str(steps), str(base), str(i)])
             for i in range(p)]
    if any(x.wait() != 0 for x in procs):
        sys.exit("profile-rank-writer: a rank of the pipe failed")
    # A test that watches the job live holds the job's end until its viewer
    # is attached (PP_WRITER_HOLD: a file the test makes then), so the
    # viewer never finds the job gone however slow the machine; bounded,
    # so that a job nobody releases still ends.
    hold_file = os.environ.get("PP_WRITER_HOLD")
    end = time.monotonic() + 300
    while hold_file and not os.path.exists(hold_file) and time.monotonic() < end:
        time.sleep(0.05)
    print(f"wrote {p} ranks", flush=True)


def mesh(p, d, g0):
    procs = [subprocess.Popen([sys.executable, __file__, "mesh-one", str(p), str(d), str(g0), str(i)])
             for i in range(p * d)]
    if any(x.wait() != 0 for x in procs):
        sys.exit("profile-rank-writer: a process of the mesh failed")
    print(f"wrote {p * d} processes", flush=True)


if __name__ == "__main__":
    # a file size limit meant for profile (test-profile-files.py puts one
    # on it with prlimit) is not the job's: its own files are written whole
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    if sys.argv[1] == "write":
        write(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "mesh":
        mesh(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    elif sys.argv[1] == "pipe":
        pipe(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "pipe-one":
        pipe_one(*(int(x) for x in sys.argv[2:6]))
    elif sys.argv[1] == "mesh-one":
        mesh_one(*(int(x) for x in sys.argv[2:6]))
    else:
        hold(sys.argv[2])
