#!/usr/bin/env python3
"""test-foreign-place.py LIB CLI — a process's place on the job's mesh (issue 27).

pipescope_rank_place (probe/pipescope.h) tells which process of the job a
rank is (its global rank) and where it sits on the mesh (pp, dp, tp, cp,
ep); lib.Rank.place drives it.  This checks:

  1. The PROCESS frame is in the rank's file with every field as given,
     and every frame written after it carries process + 1 in its header
     (trace format 1.4); the RANK frame written before it carries none.
  2. The rank is registered again as "<job>.r<rank>.p<process>", so that
     two processes of one pipeline rank are two entries.
  3. A bad place (a coordinate outside its size, pp not the rank, a
     process the header cannot carry) and a second place are refused
     (False) and recording goes on; a library without the symbol: False.
  4. A place the job's groups do not say (place.Unread, as place_of
     gives it): the PROCESS frame flagged "place not read" (flags 1), dp
     0, said in one line; recording goes on.
No PyTorch needed: lib.py alone, with python3.
"""

import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, spans_of  # noqa: E402

FRAME_RANK, FRAME_PROCESS = 9, 10


def frames(path):
    """(type, process tag, offset, bytes) of every frame of a little-endian file."""
    data = open(path, "rb").read()
    if not (1, 4) <= struct.unpack_from("<HH", data, 12) < (2, 0):
        fail(f"{path}: format {struct.unpack_from('<HH', data, 12)}, not 1.4 or a later 1.x")
    off = struct.unpack_from("<I", data, 16)[0]
    out = []
    while off + 8 <= len(data):
        size, kind, tag = struct.unpack_from("<IHH", data, off)
        if size < 8 or off + size > len(data):
            break
        out.append((kind, tag, off, data[off:off + size]))
        off += size
    return out


def main():
    libpath, cli = sys.argv[1], sys.argv[2]
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-place-")
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp   # a private registry
    from pipescope import lib as L
    if L.load() is None:
        fail(f"load: {L.last_error}")
    print("1..4")

    # 1. the frame and the tags: process 3 is pp 1, dp 1 of a 2 x 2 mesh
    trace = os.path.join(tmp, "p3.pptrace")
    r, err = L.Rank.open("place-job", 1, 2, trace=trace)
    if r is None:
        fail(f"open: {err}")
    r.rank_info("node-7")
    if not r.place(3, (1, 1, 0), (2, 2, 1)):
        fail("place(3, (1, 1, 0), (2, 2, 1)) was refused")
    t = r.now()
    for mb in range(3):
        r.block(L.F, 1, mb, 0, t + 10 * mb, t + 10 * mb + 5)
    r.step(0, 1, t + 100)

    # 2. registered as itself while it runs
    entry = os.path.join(tmp, "pipescope", f"{os.getpid()}.job")
    lines = open(entry).read().splitlines() if os.path.exists(entry) else []
    if "name=place-job.r1.p3" not in [x.replace(" ", "") for x in lines]:
        fail(f"the registry entry {entry} does not name place-job.r1.p3:\n" + "\n".join(lines))

    # 3. refused: a second place, and places that are not places
    if r.place(3, (1, 1, 0), (2, 2, 1)):
        fail("a second place was taken")
    other, err = L.Rank.open("place-job", 0, 2, trace=os.path.join(tmp, "bad.pptrace"))
    for process, coord, size in [(0, (0, 2, 0), (2, 2, 1)), (0, (1, 0, 0), (2, 2, 1)),
                                 (65535, (0, 0, 0), (2, 2, 1)), (-1, (0, 0, 0), (2, 2, 1)),
                                 (0, (0, 0, 0), (2, 0, 1))]:
        if other.place(process, coord, size):
            fail(f"place({process}, {coord}, {size}) was taken")
    other.block(L.F, 0, 0, 0, t, t + 5)
    other.close()
    if len(spans_of(cli, os.path.join(tmp, "bad.pptrace"), tmp)) != 1:
        fail("a rank whose place was refused did not go on recording")
    if [f for f in frames(os.path.join(tmp, "bad.pptrace")) if f[0] == FRAME_PROCESS or f[1] != 0]:
        fail("a refused place left a PROCESS frame or a tag")
    lacking = L.Rank.__new__(L.Rank)
    lacking._lib, lacking._h = object(), None
    if lacking.place(0, (0,), (1,)):
        fail("place() with a library lacking pipescope_rank_place said True")
    r.close()

    fs = frames(trace)
    proc = [f for f in fs if f[0] == FRAME_PROCESS]
    if len(proc) != 1:
        fail(f"{len(proc)} PROCESS frames in the trace, not 1")
    body = proc[0][3]
    process, rank = struct.unpack_from("<ii", body, 8)
    coord = struct.unpack_from("<5i", body, 16)
    size = struct.unpack_from("<5i", body, 36)
    pid = struct.unpack_from("<i", body, 56)[0]
    host = body[64:128].split(b"\0")[0].decode()
    if (process, rank, coord, size, pid) != (3, 1, (1, 1, 0, 0, 0), (2, 2, 1, 1, 1), os.getpid()):
        fail(f"PROCESS frame says {(process, rank, coord, size, pid)}")
    if host != os.uname().nodename[:63]:
        fail(f"PROCESS frame's host {host!r}")
    at = fs.index(proc[0])
    before, after = fs[:at], fs[at + 1:]
    if not any(f[0] == FRAME_RANK and f[1] == 0 for f in before):
        fail("the RANK frame written before the place is not there untagged")
    untagged = [f[:3] for f in after if f[1] != 4]
    if not after or untagged:
        fail(f"frames after the PROCESS frame without process 3's tag (4): {untagged}")
    if len(spans_of(cli, trace, tmp)) != 3:
        fail("the placed rank's 3 blocks are not in its trace")
    ok("PROCESS frame whole; every later frame tagged with process 3")
    ok("registered as place-job.r1.p3")
    ok("bad places and a second place refused; recording goes on; no symbol: False")

    # 4. a place not read: process 2 of pipeline rank 0, flagged
    from pipescope import place as PL
    coord, size = PL.unread(2, [0, 2], 4, "the pipeline's process groups are not laid out regularly")
    un_path = os.path.join(tmp, "unread.pptrace")
    un, err = L.Rank.open("place-job", 1, 2, trace=un_path)
    if un is None:
        fail(f"open: {err}")
    r_fd, w_fd = os.pipe()
    saved = os.dup(2)
    os.dup2(w_fd, 2)
    try:
        took = un.place(2, coord, size)
    finally:
        os.dup2(saved, 2)
        os.close(w_fd)
        os.close(saved)
    said = os.read(r_fd, 65536).decode()
    os.close(r_fd)
    un.block(L.F, 1, 0, 0, t, t + 5)
    un.close()
    proc = [f for f in frames(un_path) if f[0] == FRAME_PROCESS]
    if not took or len(proc) != 1:
        fail(f"an unread place: took {took}, {len(proc)} PROCESS frames")
    body = proc[0][3]
    got = (struct.unpack_from("<ii", body, 8), struct.unpack_from("<5i", body, 16),
           struct.unpack_from("<5i", body, 36), struct.unpack_from("<I", body, 60)[0])
    if got != ((2, 1), (1, 0, 0, 0, 0), (2, 1, 1, 1, 1), 1):
        fail(f"the PROCESS frame of an unread place says {got}")
    if said.count("\n") != 1 or "place was not read (the pipeline's process groups are not laid out " \
            "regularly): recorded as process 2" not in said:
        fail(f"an unread place said: {said!r}")
    ok("a place not read: PROCESS frame flagged, dp 0, said in one line")


if __name__ == "__main__":
    main()
