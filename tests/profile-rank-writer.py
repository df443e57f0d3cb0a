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
Prints "wrote P ranks" (write) on stdout.  A soft file size limit is
lifted first (to the hard one): the test limits profile's merge, not this.
"""

import os
import resource
import signal
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


if __name__ == "__main__":
    # a file size limit meant for profile (test-profile-files.py puts one
    # on it with prlimit) is not the job's: its own files are written whole
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    if sys.argv[1] == "write":
        write(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        hold(sys.argv[2])
