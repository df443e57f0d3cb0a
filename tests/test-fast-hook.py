#!/usr/bin/env python3
"""test-fast-hook.py LIB CLI FAST — the hook's hot path in C (issue 14).

probe/python/pipescope-fast.c wraps the calls the PyTorch hook times (a
stage's forward, backward and weight chunks, its get_*_ops, _batch_p2p,
_wait_batch_p2p) and records them without a Python frame.  This checks,
with stand-ins for PyTorch's objects (no PyTorch needed):

  1. Every wrapper runs the wrapped call exactly once with the arguments it
     was given, returns its very result, and lets its exception through
     untouched (nothing recorded for a call that raised); as a class's
     attribute it binds as a method; __name__ and __wrapped__ are the
     wrapped function's.
  2. What lands in the trace, field for field: F, B and I (full_backward
     by keyword, by position, by default), W; a transfer a P2P op with its
     kind, stage, micro-batch and bytes; a wait charged to the block after
     it; step markers after the spans before them.
  3. Switched off (a CUDA job) each wrapper calls its fallback, which then
     runs the call; in a paused step each runs the call and nothing else
     (nothing recorded: the trace's list below); a schedule's profiler
     label goes to the fallback only for an overlapped pair; a failure of the module's own (a
     micro-batch that is not an integer) reports once, switches recording
     off, and the call's result still comes back.
  4. Blocks gathered for an overlapped pair and for the observed plan go
     to the lists given, not the trace; after close nothing is recorded.
FAST is the built module's path, or "none" (then skipped: no python3
headers at build time, so the hook records in Python).
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, spans_of  # noqa: E402 (tests/ is the script's folder, on sys.path)


class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes


class Op:
    def __init__(self, peer, nbytes):
        self.peer = peer
        self.tensor = Tensor(nbytes) if nbytes is not None else None


class Work:
    pass


calls = []       # (what, args, kwargs) each time a wrapped original runs
fallbacks = []   # each time a wrapper called its fallback


def original(name, result=None, raises=None):
    def fn(*args, **kwargs):
        calls.append((name, args, kwargs))
        if raises is not None:
            raise raises
        return result(*args, **kwargs) if result is not None else (name, args, kwargs)
    fn.__name__ = name
    return fn


# Where PyTorch's functions put what each role reads (the hook finds it in
# the signature, arguments.py; these stand-ins take anything)
SELF = (0, "self")
PARAMS = {"forward": (SELF, (1, "fwd_chunk_id")), "weight": (SELF, (1, "bwd_chunk_id")),
          "backward": (SELF, (1, "bwd_chunk_id"), (3, "full_backward", True)),
          "batch_p2p": ((0, "p2p_ops"),), "wait": ((0, "work"),), "label": ((0, "name"),)}


def wrap(fast, role, orig, fallback, *kind):
    params = PARAMS.get(role) or (SELF, (1, "fwd_chunk_id" if kind and kind[0] in (4, 5) else "bwd_chunk_id"))
    return fast.wrap(role, orig, fallback, params, *kind)


def fallback_of(orig):
    def fb(*args, **kwargs):
        fallbacks.append(orig.__name__)
        return orig(*args, **kwargs)
    return fb


def hostile(L, fast, tmp, failures, Stage):
    """Python that runs in the middle of a wrapper: an op's attribute that
    empties the list being returned (no crash, the job's list back), a
    close and open within a wrapped _batch_p2p (the wrappers still follow
    set_on), a KeyboardInterrupt from the report of a failure (the job's:
    it comes through).  Each on a rank of its own, closed after."""
    r, err = L.Rank.open("fast-hostile", 0, 1, trace=os.path.join(tmp, "hostile.pptrace"))
    fast.set_on(1)
    shared = []

    class Clearing:
        tensor = None

        @property
        def peer(self):
            shared.clear()
            return 0

    def make(self, mb):
        shared[:] = [Clearing(), Clearing()]
        return shared
    Stage.get_fwd_recv_ops = wrap(fast, "get_ops", make, make, L.RECV_F)
    if Stage(0).get_fwd_recv_ops(1) is not shared:
        fail("get_ops did not return the job's own list")
    reopened = []

    def p2p_orig(ops):
        if not reopened:
            r.close()
            reopened.append(L.Rank.open("fast-hostile-2", 0, 1, trace=os.path.join(tmp, "hostile2.pptrace"))[0])
        return []
    fb = []
    p2p = wrap(fast, "batch_p2p", p2p_orig, lambda ops: fb.append(1) or p2p_orig(ops))
    fast.set_on(1)
    p2p([])
    fast.set_on(0)
    p2p([])
    if fb != [1]:
        fail(f"after a close and open within _batch_p2p, switched off: {len(fb)} fallbacks, not 1")
    fast.set_on(1)
    fast.set_fail(lambda what, exc: (_ for _ in ()).throw(KeyboardInterrupt()))
    Stage.forward_one_chunk_k = wrap(fast, "forward", lambda self, mb: "out", lambda self, mb: "out")
    try:
        Stage(0).forward_one_chunk_k("not a micro-batch")
        fail("a KeyboardInterrupt raised while reporting a failure did not reach the job")
    except KeyboardInterrupt:
        pass
    fast.set_fail(lambda what, exc: failures.append((what, exc)))
    reopened[0].close()
    ok("Python within a wrapper: an op that empties the job's list, a close and open within "
       "_batch_p2p, a KeyboardInterrupt from a report: no crash, the job's list and interrupt through")


def main():
    libpath, cli, fast_path = sys.argv[1], sys.argv[2], sys.argv[3]
    if fast_path == "none":
        print("1..0 # SKIP the build has no _pipescope_fast (no python3 headers): the hook records in Python")
        return 0
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-fast-")
    atexit.register(shutil.rmtree, tmp, True)   # on every exit, fail()'s too
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp
    from pipescope import lib as L
    raw = L.load()
    if raw is None:
        fail(f"load: {L.last_error}")
    fast = raw.pipescope_fast
    if fast is None:
        fail(f"lib.py did not load {fast_path} beside {libpath}")
    print("1..4")

    trace = os.path.join(tmp, "fast.pptrace")
    r, err = L.Rank.open("fast", 1, 2, trace=trace)
    if r is None or r.fast is not fast:
        fail(f"open: {err or 'the rank did not take the fast path'}")
    r2, _ = L.Rank.open("fast-second", 0, 2, trace=os.path.join(tmp, "second.pptrace"))
    if r2.fast is not None:
        fail("a second rank in the process took the one fast queue")
    r2.close()
    failures = []
    fast.set_fail(lambda what, exc: failures.append((what, exc)))

    class Stage:
        def __init__(self, index):
            self.stage_index = index

    o_fwd = original("forward_one_chunk")
    o_bwd = original("backward_one_chunk")
    o_w = original("backward_weight_one_chunk")
    o_ops = original("get_bwd_recv_ops", result=lambda self, mb: [Op(0, 4096), Op(None, None)])
    o_send = original("get_fwd_send_ops", result=lambda self, mb: [Op(0, 1 << 20)])
    o_none = original("get_bwd_send_ops", result=lambda self, mb: [])
    o_p2p = original("_batch_p2p", result=lambda ops: [Work() for _ in ops])
    o_wait = original("_wait_batch_p2p", result=lambda works: None)
    Stage.forward_one_chunk = wrap(fast, "forward", o_fwd, fallback_of(o_fwd))
    Stage.backward_one_chunk = wrap(fast, "backward", o_bwd, fallback_of(o_bwd))
    Stage.backward_weight_one_chunk = wrap(fast, "weight", o_w, fallback_of(o_w))
    Stage.get_bwd_recv_ops = wrap(fast, "get_ops", o_ops, fallback_of(o_ops), L.RECV_B)
    Stage.get_fwd_send_ops = wrap(fast, "get_ops", o_send, fallback_of(o_send), L.SEND_F)
    Stage.get_bwd_send_ops = wrap(fast, "get_ops", o_none, fallback_of(o_none), L.SEND_B)
    batch_p2p = wrap(fast, "batch_p2p", o_p2p, fallback_of(o_p2p))
    wait = wrap(fast, "wait", o_wait, fallback_of(o_wait))
    try:
        wrap(fast, "get_ops", o_ops, o_ops)
        fail("a get_ops wrapper without a transfer kind was made")
    except ValueError:
        pass

    # 1. each call once, its result and its exception untouched
    fast.set_on(1)
    s = Stage(1)
    t = r.now()
    r.step(0, 0, t)
    args = (object(), {"k": 1})
    out = s.forward_one_chunk(3, *args)
    if out != ("forward_one_chunk", (s, 3) + args, {}) or calls[-1][1][0] is not s:
        fail(f"forward: the result or the arguments changed: {out}")
    boom = RuntimeError("the job's own error")
    Stage.forward_one_chunk = wrap(fast, "forward", original("forward_one_chunk", raises=boom),
                                        fallback_of(o_fwd))
    try:
        s.forward_one_chunk(9)
        fail("an exception of the wrapped call did not come through")
    except RuntimeError as e:
        if e is not boom:
            fail(f"another exception came through: {e!r}")
    Stage.forward_one_chunk = wrap(fast, "forward", o_fwd, fallback_of(o_fwd))
    if Stage.forward_one_chunk.__name__ != "forward_one_chunk" or Stage.forward_one_chunk.__wrapped__ is not o_fwd:
        fail("__name__ / __wrapped__ are not the wrapped function's")
    if len(calls) != 2 or fallbacks:
        fail(f"{len(calls)} calls of the originals for 2 wrapped calls, {len(fallbacks)} fallbacks")
    ok("a wrapped call runs once with its arguments; its result and its exception come back untouched")

    # 2. what lands in the trace
    ops = s.get_bwd_recv_ops(3)
    if len(ops) != 2 or s.get_bwd_send_ops(3) != []:
        fail("get_ops' result changed")
    works = batch_p2p(ops)
    wait(works)                                # a wait, charged to the next block
    s.backward_one_chunk(3, full_backward=False)           # I 3, after the wait
    s.backward_one_chunk(4, None, False)                   # I 4, by position
    s.backward_one_chunk(bwd_chunk_id=5)                   # B 5, the default
    s.backward_weight_one_chunk(3)                         # W 3
    send = s.get_fwd_send_ops(6)
    wait(batch_p2p(send))
    r.step(0, 1, r.now())
    r.step(1, 0, r.now())
    fast.set_step(1)
    s.forward_one_chunk(fwd_chunk_id=7)                    # F 7, step 1, after the wait
    r.step(1, 1, r.now())

    # 3. off: the fallback; our own failure: once, off, the result back
    fast.set_on(0)
    before = len(calls)
    s.forward_one_chunk(8)
    if fallbacks != ["forward_one_chunk"] or len(calls) != before + 1:
        fail(f"switched off: fallbacks {fallbacks}, {len(calls) - before} calls")
    # a profiler label: only an overlapped pair's is the fallback's
    o_label = original("record_function")
    label = wrap(fast, "label", o_label, fallback_of(o_label))
    fast.set_on(1)
    n_fb = len(fallbacks)
    if label("PP:1F3") != ("record_function", ("PP:1F3",), {}) or len(fallbacks) != n_fb:
        fail("a label that is not an overlapped pair's went to the fallback or changed")
    label("PP:2;3OVERLAP_F_B")
    if fallbacks[n_fb:] != ["record_function"]:
        fail(f"an OVERLAP_F_B label did not go to the fallback: {fallbacks[n_fb:]}")
    fast.set_on(2)   # a paused step: the call, no fallback, nothing recorded
    before, n_fb = len(calls), len(fallbacks)
    s.forward_one_chunk(20)
    wait(batch_p2p(s.get_fwd_send_ops(20)))
    if len(calls) != before + 4 or len(fallbacks) != n_fb:
        fail(f"paused: {len(calls) - before} calls of 4, {len(fallbacks) - n_fb} fallbacks")
    fast.set_on(1)
    out = s.forward_one_chunk("not a micro-batch")
    if out[0] != "forward_one_chunk" or len(failures) != 1 or failures[0][0] != "a block":
        fail(f"a failure of our own: result {out}, reports {failures}")
    if fast.state()["on"]:
        fail("recording stays on after a failure of its own")
    s.forward_one_chunk(10)
    if len(failures) != 1 or fallbacks[-1] != "forward_one_chunk":
        fail("after a failure the wrappers did not fall back")
    ok("switched off, each wrapper calls its fallback; paused, only the call; a failure of its own reports once, "
       "switches off, and the call's result comes back")

    # 4. the overlap's and the plan's lists; nothing after close
    fast.set_on(1)
    gathered, observed = [], []
    fast.set_overlap(gathered)
    s.forward_one_chunk(11)
    fast.set_overlap(None)
    fast.set_observed(observed)
    s.backward_weight_one_chunk(12)
    fast.set_observed(None)
    if [g[:3] for g in gathered] != [(L.F, 1, 11)] or gathered[0][3] > gathered[0][4]:
        fail(f"the overlap's list holds {gathered}")
    if observed != [(L.W, 1, 12, -1, -1, -1)]:
        fail(f"the plan's list holds {observed}")

    # a cut (set_cut: DDP's all-reduce finishing in the last backward): the
    # block whose call holds the mark ends there, the rest of the call is
    # the cut's kind (micro-batch -1, its bytes); a cut of another stage, or
    # one outside the call, cuts nothing and is gone after the next block
    def ddp_backward(self, mb, full_backward=True):
        fast.set_cut(L.SPAN_REDUCE_GRAD, self.stage_index, r.now(), 777)
        return ("ddp", mb)
    Stage.ddp_backward = wrap(fast, "backward", ddp_backward, fallback_of(ddp_backward))
    observed = []
    fast.set_observed(observed)
    if s.ddp_backward(14) != ("ddp", 14):
        fail("a cut block's result did not come back")
    fast.set_observed(None)
    if observed != [(L.B, 1, 14, -1, -1, -1), (L.SPAN_REDUCE_GRAD, 1, -1, -1, -1, -1)]:
        fail(f"the plan's list after a cut block holds {observed}")
    fast.set_cut(L.SPAN_REDUCE_GRAD, 9, r.now(), 1)   # stage 9's: not stage 1's block
    s.backward_one_chunk(15)
    fast.set_cut(L.SPAN_REDUCE_GRAD, 1, 1, 1)         # long before the call
    s.backward_one_chunk(16)
    s.backward_one_chunk(17)
    try:
        fast.set_cut(L.STEP_BEGIN, 1, 1, 1)
        fail("set_cut took a step marker as a span kind")
    except ValueError:
        pass
    r.close()
    if fast.state()["open"] or fast.state()["on"]:
        fail("the fast path is still open after close")
    s.forward_one_chunk(13)   # after close: the fallback, nothing recorded

    hostile(L, fast, tmp, failures, Stage)

    rows = spans_of(cli, trace, tmp)
    got = [(x["kind"], int(x["stage"]), int(x["microbatch"]), int(x["step"]), int(x["bytes"]))
           for x in sorted(rows, key=lambda x: (int(x["start_ns"]), int(x["end_ns"]), -int(x["bytes"])))]
    want = [("F", 1, 3, 0, 0),
            ("RECV_B", 1, 3, 0, 4096),         # the op with a tensor; the other had none
            ("RECV_B", 1, 3, 0, 0),
            ("WAIT", 1, 3, 0, 0),              # charged to I 3
            ("I", 1, 3, 0, 0), ("I", 1, 4, 0, 0), ("B", 1, 5, 0, 0), ("W", 1, 3, 0, 0),
            ("SEND_F", 1, 6, 0, 1 << 20),
            ("WAIT", 1, 7, 1, 0),              # charged to F 7, in step 1
            ("F", 1, 7, 1, 0),
            ("W", 1, 12, 1, 0),
            ("B", 1, 14, 1, 0), ("REDUCE_GRAD", 1, -1, 1, 777),   # cut where the call set it
            ("B", 1, 15, 1, 0), ("B", 1, 16, 1, 0), ("B", 1, 17, 1, 0)]
    if got != want:
        fail("the trace differs from the calls:\n got  " + "\n      ".join(map(str, got))
             + "\n want " + "\n      ".join(map(str, want)))
    ok("the trace holds each block, transfer and wait as called, field for field; the overlap's "
       "and the plan's blocks went to their lists; a cut block ends at its mark and the rest is the cut's "
       "kind; nothing after close")
    return 0


if __name__ == "__main__":
    sys.exit(main())
