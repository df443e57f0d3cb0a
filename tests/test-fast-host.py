#!/usr/bin/env python3
"""test-fast-host.py LIB CLI FAST — what the hook records between blocks
(issue 29), with stand-ins for PyTorch (no PyTorch needed).

  1. The compiled wrappers in a step (fast.sched): one HOST_SCHEDULE span
     in each stretch between two wrapped calls and at the step's two ends,
     none overlapping a recorded block, transfer, wait or host span; a
     host wrapper (role host) records its kind around the call, its result
     and exception untouched; one of a kind not a host kind is refused.
     A step run on another thread (fast.sched from there: a job that
     starts a thread a step) gets no HOST_SCHEDULE span, as its wrapped
     calls cut none: never one over the whole step with its blocks inside
     (issue 40, finding 5).
  2. At each block's edges (fast.edges_open on this thread) the run-queue
     delay (where the kernel has schedstat) and the wrappers' own time as
     counters, each non-decreasing, each only when it changed; a block run
     on another thread gets no sample.
  3. The GC callback (host.Host): a collection on the training thread is
     one GC span inside the collect() call, stream 0; one on another
     thread is one GC span inside that call, its stream that thread's
     native id (format 1.8); paused, none; after close the callback is
     out of gc.callbacks.
FAST "none": skipped (no python3 headers at build time).
"""

import atexit
import gc
import os
import shutil
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, raw_trace, spans_of  # noqa: E402

HOST_KINDS = ("GC", "HOST_SCHEDULE", "HOST_LOSS", "HOST_DATA", "HOST_ZERO_GRAD")


class Stage:
    def __init__(self, index):
        self.stage_index = index


class Op:
    def __init__(self, peer):
        self.peer, self.tensor = peer, None


class Rec:
    """The parts of core.Recorder host.Host reads."""

    def __init__(self, rank, fast):
        self.rank, self.fast, self.compiled_blocks, self.failed = rank, fast, True, False
        self.failures = []

    def current_step(self):
        return 0

    def fail(self, what, exc):
        self.failures.append((what, exc))


def main():
    libpath, cli, fast_path = sys.argv[1], sys.argv[2], sys.argv[3]
    if fast_path == "none":
        print("1..0 # SKIP the build has no _pipescope_fast (no python3 headers): the hook records in Python")
        return 0
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-fast-host-")
    atexit.register(shutil.rmtree, tmp, True)
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp
    from pipescope import host as H
    from pipescope import lib as L
    raw = L.load()
    fast = raw.pipescope_fast if raw is not None else None
    if fast is None:
        fail(f"lib.py did not load {fast_path} beside {libpath}")
    print("1..3")
    trace = os.path.join(tmp, "host.pptrace")
    r, err = L.Rank.open("fast-host", 0, 2, trace=trace)
    if r is None or r.fast is not fast:
        fail(f"open: {err or 'the rank did not take the fast path'}")
    fast.set_fail(lambda what, exc: fail(f"the fast path failed: {what}: {exc}"))

    def orig(name, result=None):
        def fn(*args, **kwargs):
            if isinstance(result, Exception):
                raise result
            return result if result is not None else name
        fn.__name__ = name
        return fn

    def wrap(role, fn, params, kind=-1):
        return fast.wrap(role, fn, fn, params, kind)

    Stage.forward_one_chunk = wrap("forward", orig("fwd"), ((0, "self"), (1, "fwd_chunk_id")))
    Stage.get_fwd_send_ops = wrap("get_ops", orig("ops", [Op(1)]), ((0, "self"), (1, "fwd_chunk_id")), L.SEND_F)
    batch_p2p = wrap("batch_p2p", orig("p2p", [object()]), ((0, "p2p_ops"),))
    wait = wrap("wait", orig("wait"), ((0, "work"),))
    loss = wrap("host", orig("loss"), ((-1, None, None),), L.SPAN_HOST_LOSS)
    boom = RuntimeError("the loss's own error")
    bad_loss = wrap("host", orig("loss", boom), ((-1, None, None),), L.SPAN_HOST_LOSS)
    try:
        wrap("host", orig("x"), ((-1, None, None),), L.F)
        fail("a host wrapper of kind F was made")
    except ValueError:
        pass

    # 1 and 2: a step of wrapped calls
    has_delay = fast.edges_open()
    fast.set_on(1)
    r.step(0, 0, r.now())
    fast.sched(r.now())
    s = Stage(0)
    s.forward_one_chunk(0)
    wait(batch_p2p(s.get_fwd_send_ops(0)))
    if loss() != "loss":
        fail("a host wrapper changed the result")
    try:
        bad_loss()
        fail("a host call's exception did not come through")
    except RuntimeError as e:
        if e is not boom:
            fail(f"another exception came through: {e!r}")
    sum(i * i for i in range(200000))   # the schedule's own code, long enough for a delay to move
    s.forward_one_chunk(1)
    other = threading.Thread(target=s.forward_one_chunk, args=(2,))
    other.start()
    other.join()
    fast.sched(-r.now())
    r.step(0, 1, r.now())

    # a step on a thread of its own, as a job that starts one a step
    def step_there():
        r.step(1, 0, r.now())
        fast.sched(r.now())
        s.forward_one_chunk(3)
        sum(i * i for i in range(20000))
        s.forward_one_chunk(4)
        fast.sched(-r.now())
        r.step(1, 1, r.now())
    there = threading.Thread(target=step_there)
    there.start()
    there.join()
    fast.set_on(0)

    # 3. the GC callback, on this thread
    rec = Rec(r, fast)
    host = H.Host(rec)
    fast.set_on(1)
    t0 = r.now()
    gc.collect()
    t1 = r.now()
    theirs = []

    def collect_there():
        a = r.now()
        gc.collect()
        theirs.append((a, r.now(), threading.get_native_id()))
    t = threading.Thread(target=collect_there)
    t.start()
    t.join()
    host.set_paused(True)
    gc.collect()
    host.set_paused(False)
    host.close()
    if host.on_gc is not None or any(getattr(cb, "__qualname__", "").startswith("Host.") for cb in gc.callbacks):
        fail("the GC callback is still in gc.callbacks after close")
    gc.collect()
    fast.set_on(0)
    r.close()

    rows = sorted(spans_of(cli, trace, tmp), key=lambda x: (int(x["start_ns"]), int(x["end_ns"])))
    sched = [x for x in rows if x["kind"] == "HOST_SCHEDULE"]
    rest = [x for x in rows if x["kind"] not in ("HOST_SCHEDULE", "GC")]
    kinds = [x["kind"] for x in rest]
    # F 0, SEND_F, WAIT (charged to F 1), HOST_LOSS (the failed call: none), F 1, F 2; F 3 and 4
    if kinds.count("HOST_LOSS") != 1 or kinds.count("F") != 5 or "SEND_F" not in kinds or "WAIT" not in kinds:
        fail(f"the step's spans: {kinds}")
    for a in sched:
        for b in rest:
            if b["kind"] == "F" and b["microbatch"] == "2":
                continue   # another thread's, while this one waited in join()
            if int(a["start_ns"]) < int(b["end_ns"]) and int(b["start_ns"]) < int(a["end_ns"]):
                fail(f"HOST_SCHEDULE {a['start_ns']}..{a['end_ns']} overlaps {b['kind']} {b['start_ns']}..{b['end_ns']}")
    # the wrapped calls on the training thread in the step: F 0, get_ops,
    # batch_p2p, wait, loss, the failed loss, F 1 (F 2 runs on another
    # thread: not the schedule's); 7 calls, 8 stretches of Python around them
    if len(sched) != 8:
        fail(f"{len(sched)} HOST_SCHEDULE spans for the 8 stretches around 7 wrapped calls")
    ok(f"a step: {len(sched)} HOST_SCHEDULE spans between its wrapped calls, none overlapping a recorded span; "
       "a host call recorded with its kind, its result and exception untouched; a step on another thread none")

    _, counters = raw_trace(trace)
    for kind, name in ((L.COUNTER_RUN_DELAY_NS, "RUN_DELAY_NS"), (L.COUNTER_PROBE_SELF_NS, "PROBE_SELF_NS"),
                       (L.COUNTER_ON_CPU_NS, "ON_CPU_NS")):
        vals = [v for rr, k, t, v in sorted(counters, key=lambda c: c[2]) if k == kind]
        if kind != L.COUNTER_PROBE_SELF_NS and not has_delay:
            if vals:
                fail(f"{name} samples without schedstat")
            continue
        # two blocks on this thread, two edges each: at most 4 samples
        if not 1 <= len(vals) <= 4 or any(b <= a for a, b in zip(vals, vals[1:])):
            fail(f"{name}: {vals} (two blocks' edges: 1 to 4 samples, each larger than the last)")
    ok("block edges: run-queue delay and time on a CPU" + ("" if has_delay else " (no schedstat here: none)")
       + " and the wrappers' own time, increasing, only when changed; none from another thread's block")

    spans = raw_trace(trace, streams=True)[0]
    gcs = [(s, e) for rr, k, st, s, e, sm in spans if k == L.SPAN_GC and sm == 0]
    if len(gcs) != 1:
        fail(f"{len(gcs)} GC spans for one collection on the training thread: {gcs}")
    if not t0 <= gcs[0][0] <= gcs[0][1] <= t1:
        fail(f"the GC span {gcs[0]} is not inside the collect() call {t0}..{t1}")
    others = [(s, e, sm) for rr, k, st, s, e, sm in spans if k == L.SPAN_GC and sm != 0]
    (a, b, tid), = theirs
    if len(others) != 1 or (others[0][2] & H.THREAD_MASK) != tid or not a <= others[0][0] <= others[0][1] <= b:
        fail(f"another thread's collect() {a}..{b} on thread {tid}: GC spans {others} (one inside it, "
             f"its stream the thread)")
    if rec.failures:
        fail(f"the GC callback failed: {rec.failures}")
    ok("GC: a collection on the training thread is one span (stream 0), another thread's one span marked "
       "with that thread; a paused one and one after close are none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
