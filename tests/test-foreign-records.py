#!/usr/bin/env python3
"""test-foreign-records.py LIB CLI — many records in one call (issue 14).

The Python hook queues blocks, transfers and waits and hands them to
libpipescope-probe.so with one pipescope_records call (probe/pipescope.h),
because a ctypes call a record cost more than the recording.  This checks
that nothing is lost or changed on the way:

  1. The C call: a batch of every kind it takes (a step marker too) lands
     in the trace with each field as given (the CSV export has no peer
     column: not checked); what it does not take (OVERLAP_F_B, an unknown
     kind, a stage past int, negative bytes, an end before its start, a
     marker of a negative step) is refused and counted in its return
     value, and the rest of the batch still lands.  The data-parallel
     kinds (UNSHARD, ..., format 1.5) keep their bytes.
  2. Through lib.Rank: records queued before a step's end marker are in the
     trace before that marker (the marker follows its spans).
  3. Two threads recording at once: every record of both is in the trace,
     none twice.
  4. More records than one hand-over holds, and a record that is not an
     integer (refused, counted in dropped()); after close a record costs
     nothing and goes nowhere.
  5. A plan with FSDP's actions (format 1.5) is taken and written with the
     trace's action kinds; a kind no plan holds is refused.
No PyTorch needed: lib.py alone, with python3.
"""

import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, spans_of  # noqa: E402 (tests/ is the script's folder, on sys.path)


def spans_before_marker(path, step, phase):
    """How many spans the file holds before the marker of step's phase
    (probe/pp-trace-format.h: frames after the header's offset; SPANS
    frames of 40-byte slots, flag 2 at byte 39 an extension; STEP_MARKER
    with step at 20, phase at 24); None when there is no such marker."""
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 16)[0]
    seen = 0
    while off + 8 <= len(data):
        size, kind = struct.unpack_from("<IH", data, off)
        if size < 8 or off + size > len(data):
            break
        if kind == 3:
            for slot in range(off + 8, off + size - 39, 40):
                if not data[slot + 39] & 2:
                    seen += 1
        elif kind == 5 and struct.unpack_from("<iI", data, off + 20) == (step, phase):
            return seen
        off += size
    return None


def main():
    libpath, cli = sys.argv[1], sys.argv[2]
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-records-")
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp   # a private registry
    from pipescope import lib as L
    raw = L.load()
    if raw is None:
        fail(f"load: {L.last_error}")
    if not raw.pipescope_has_records:
        fail("the library has no pipescope_records")
    print("1..5")

    # 1. the C call itself
    trace = os.path.join(tmp, "c.pptrace")
    r, err = L.Rank.open("records-c", 0, 2, trace=trace)
    if r is None:
        fail(f"open: {err}")
    t = raw.pipescope_now_ns()
    good = [
        (L.STEP_BEGIN, -1, -1, 0, t, t, -1, 0),
        (L.F, 0, 3, 0, t + 100, t + 200, -1, 0),
        (L.SEND_F, 0, 3, 0, t + 200, t + 210, 1, 65536),
        (L.WAIT, 0, 4, 0, t + 210, t + 300, 1, 0),
        (L.B, 0, 3, 1, t + 300, t + 500, -1, 0),
        (L.RECV_B, 0, 3, 1, t + 290, t + 295, 1, 4096),
        (L.OPT, -1, -1, 1, t + 500, t + 600, -1, 0),
        # data-parallel communication (format 1.5): its bytes kept
        (L.SPAN_UNSHARD, 0, -1, 0, t + 50, t + 90, -1, 1 << 20),
        (L.SPAN_RESHARD, 0, -1, 1, t + 600, t + 610, -1, 0),
        (L.SPAN_REDUCE_GRAD, 0, -1, 1, t + 610, t + 700, -1, 3 << 20),
        (L.SPAN_WAIT_REDUCE_GRAD, 0, -1, 1, t + 700, t + 720, -1, 0),
    ]
    bad = [
        (L.OVERLAP_F_B, 0, 1, 0, t, t + 1, -1, 0),
        (99, 0, 1, 0, t, t + 1, -1, 0),
        (L.F, 1 << 40, 1, 0, t, t + 1, -1, 0),
        (L.SEND_F, 0, 1, 0, t, t + 1, 1, -5),
        (L.F, 0, 1, 0, t + 10, t + 5, -1, 0),
        (L.STEP_END, -1, -1, -3, t, t, -1, 0),
    ]
    batch = [good[0], bad[0], good[1], bad[1], good[2], bad[2], good[3], bad[3], good[4], bad[4], good[5],
             bad[5]] + good[6:]
    arr = (ctypes.c_int64 * (8 * len(batch)))(*[x for rec in batch for x in rec])
    refused = raw.pipescope_records(r._h, len(batch), ctypes.addressof(arr))
    if refused != len(bad):
        fail(f"pipescope_records refused {refused} of a batch with {len(bad)} it cannot take")
    if raw.pipescope_records(None, 3, ctypes.addressof(arr)) != 3:
        fail("a NULL rank must refuse every record")
    r.close()
    if spans_before_marker(trace, 0, 0) is None:
        fail("the batch's step marker is not in the trace")
    if spans_before_marker(trace, -3, 1) is not None:
        fail("a marker of step -3 is in the trace")
    good = good[1:]   # the spans
    rows = spans_of(cli, trace, tmp)
    kinds = {L.F: "F", L.B: "B", L.SEND_F: "SEND_F", L.RECV_B: "RECV_B", L.WAIT: "WAIT", L.OPT: "OPT",
             L.SPAN_UNSHARD: "UNSHARD", L.SPAN_RESHARD: "RESHARD", L.SPAN_REDUCE_GRAD: "REDUCE_GRAD",
             L.SPAN_WAIT_REDUCE_GRAD: "WAIT_REDUCE_GRAD"}
    if len(rows) != len(good):
        fail(f"{len(rows)} spans in the trace, {len(good)} recorded:\n{rows}")
    t0 = min(int(x["start_ns"]) for x in rows)
    got = sorted((x["kind"], int(x["stage"]), int(x["microbatch"]), int(x["step"]),
                  int(x["start_ns"]) - t0, int(x["end_ns"]) - t0, int(x["bytes"]))
                 for x in rows)
    base = min(rec[4] for rec in good)
    want = sorted((kinds[k], s, m, st, a - base, b - base, nb) for k, s, m, st, a, b, p, nb in good)
    if got != want:
        fail(f"the trace's spans differ from the batch:\n got  {got}\n want {want}")
    ok("pipescope_records: every kind it takes, field for field; what it cannot take refused and counted")

    # 2. a step's marker after its spans
    trace = os.path.join(tmp, "order.pptrace")
    r, err = L.Rank.open("records-order", 0, 1, trace=trace)
    t = r.now()
    r.step(0, 0, t)
    for mb in range(4):
        r.block(L.F, 0, mb, 0, t + 10 * mb, t + 10 * mb + 5)
    r.step(0, 1, t + 100)
    # a span straight to the library, and time for the drain's pass: the
    # pass writes the spans it has, then the markers; had the four blocks
    # stayed queued here, the marker would go out after only this one
    raw.pipescope_block(r._h, L.F, 0, 0, 1, t + 200, t + 205)
    time.sleep(0.3)
    r.close()
    p = subprocess.run([cli, "info", trace], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"info: {p.stderr}")
    rows = spans_of(cli, trace, tmp)
    if len(rows) != 5:
        fail(f"{len(rows)} spans, 5 recorded")
    # in the file (the order a live viewer gets them): step 0's end marker
    # after its four blocks, before step 1's
    before = spans_before_marker(trace, 0, 1)
    if before is None or before < 4:
        fail(f"step 0's end marker follows {before} spans in the file, not its 4")
    ok("a step's end marker follows the spans queued before it")

    # 3. two threads at once
    trace = os.path.join(tmp, "threads.pptrace")
    r, err = L.Rank.open("records-threads", 0, 1, trace=trace)
    per = 5000
    t = r.now()

    def work(stage):
        for i in range(per):
            r.block(L.F, stage, i, i // 100, t + i, t + i + 1)

    th = [threading.Thread(target=work, args=(s,)) for s in (0, 1)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    dropped = r.dropped()
    r.close()
    rows = spans_of(cli, trace, tmp)
    seen = sorted((int(x["stage"]), int(x["microbatch"])) for x in rows)
    want = sorted((s, i) for s in (0, 1) for i in range(per))
    if dropped == 0 and seen != want:
        fail(f"two threads: {len(seen)} spans, {2 * per} recorded, "
             f"{len(set(seen))} distinct")
    if dropped and len(seen) + dropped != 2 * per:
        fail(f"two threads: {len(seen)} in the trace + {dropped} dropped != {2 * per}")
    ok(f"two threads recording at once: {len(seen)} spans in the trace, {dropped} dropped, none twice")

    # 4. past one hand-over's capacity; a record that is not an integer
    trace = os.path.join(tmp, "many.pptrace")
    r, err = L.Rank.open("records-many", 0, 1, trace=trace)
    k = 3 * L.Rank._CAPACITY + 7
    t = r.now()
    for i in range(k):
        r.transfer(L.SEND_F, 0, i, 1, i, 0, t, t)   # same time: no flush by age
    r.block(L.F, 0, None, 0, t, t + 1)              # not an integer: refused
    if r.dropped() != 1:
        fail(f"dropped() = {r.dropped()} after one record that is not an integer")
    r.close()
    before = len(r._q) if r._q is not None else 0
    r.block(L.F, 0, 1, 0, t, t + 1)                  # after close: nowhere
    if r._q is not None or before:
        fail("records queue after close")
    rows = spans_of(cli, trace, tmp)
    got = sorted(int(x["bytes"]) for x in rows)
    if got != list(range(k)):
        fail(f"{len(got)} transfers in the trace, {k} recorded")
    ok(f"{k} records past a hand-over's {L.Rank._CAPACITY}: all in the trace; one not an integer "
       "refused and counted; nothing after close")

    # 5. a plan with FSDP's actions (PyTorch's pipeline_order_with_comms):
    # given in the API's kinds, written as the trace's action kinds 10..13
    trace = os.path.join(tmp, "plan.pptrace")
    r, err = L.Rank.open("records-plan", 0, 1, trace=trace)
    plan = [(L.ACT_UNSHARD, 0, -1), (L.F, 0, 0), (L.B, 0, 0), (L.ACT_REDUCE_GRAD, 0, -1),
            (L.ACT_WAIT_REDUCE_GRAD, 0, -1), (L.ACT_RESHARD, 0, -1)]
    flat = [x for k, st, mb in plan for x in (k, st, mb, -1, -1, -1)]
    arr = (ctypes.c_int32 * len(flat))(*flat)
    if raw.pipescope_plan(r._h, 0, len(plan), arr) != 0:
        fail("pipescope_plan refused a plan with FSDP's actions")
    kernel = (ctypes.c_int32 * 6)(10, 0, 0, -1, -1, -1)   # KERNEL: no plan's kind
    if raw.pipescope_plan(r._h, 0, 1, kernel) != -1:
        fail("pipescope_plan took a KERNEL action")
    r.close()
    data = open(trace, "rb").read()
    off = struct.unpack_from("<I", data, 16)[0]
    kinds_in = None
    while off + 8 <= len(data):
        size, kind = struct.unpack_from("<IH", data, off)
        if size < 8 or off + size > len(data):
            break
        if kind == 2:   # PLAN: actions of 40 bytes from byte 24, kind then stage, micro-batch
            kinds_in = [struct.unpack_from("<iii", data, a)
                        for a in range(off + 24, off + size - 39, 40)]
        off += size
    want = [(10, 0, -1), (0, 0, 0), (1, 0, 0), (12, 0, -1), (13, 0, -1), (11, 0, -1)]
    if kinds_in != want:
        fail(f"the PLAN frame holds {kinds_in}, not {want}")
    ok("a plan with UNSHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD, RESHARD: written as action kinds 10..13; "
       "a KERNEL refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
