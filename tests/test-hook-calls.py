#!/usr/bin/env python3
"""test-hook-calls.py LIB CLI FAST — the hook's wrappers take every call the
wrapped function takes (the hook must never break a job).

A wrapper of the hook takes (*args, **kwargs), hands them on untouched, and
reads what it records where the wrapped function's signature puts it
(probe/python/pipescope/arguments.py).  With stand-ins for PyTorch's
pipelining (no PyTorch needed), installed by the hook's own _install, this
calls every wrapped function in every form its signature allows (all
positional, by keyword, defaults left out, self by keyword), through the
compiled wrappers (pipescope-fast.c) and through the Python ones, recording,
paused and with recording off, and checks:

  1. each call's result (or exception: type and message) is the unwrapped
     function's for the same call;
  2. recording, the trace holds one block, transfer, wait and overlapped
     pair a call, with the micro-batch the call gave, however it gave it;
     paused or off, nothing;
  3. the same for a later PyTorch's signatures (a keyword-only argument and
     **kwargs added, self positional-only, a micro-batch renamed: recorded
     as -1) and for an original that is someone's pass-through wrapper of
     (*args, **kwargs) without functools.wraps;
  4. the wrappers stay methods, with the originals' names and __wrapped__.
FAST is the built module's path, or "none": the Python wrappers only.
"""

import collections
import inspect
import os
import shutil
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, spans_of  # noqa: E402


# ---- stand-ins for torch.distributed.pipelining --------------------------

class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes

    def numel(self):
        return self.nbytes // 4

    def element_size(self):
        return 4


class Op:
    def __init__(self, peer, nbytes):
        self.peer, self.tensor = peer, Tensor(nbytes)


class Work:
    pass


def op_bytes(mb):
    return 4 * (mb + 2) if isinstance(mb, int) else 4


def digest(x):
    """A result, comparable between two calls (fresh ops and works each)."""
    if isinstance(x, list) and x and isinstance(x[0], Op):
        return [("op", o.peer, o.tensor.nbytes) for o in x]
    if isinstance(x, list) and x and isinstance(x[0], Work):
        return ["work"] * len(x)
    if hasattr(x, "__enter__") and hasattr(x, "name"):   # a label, or the hook's around one
        return ("label", x.name, x.args)
    if isinstance(x, Stage):
        return ("stage", x.stage_index)
    if isinstance(x, tuple):
        return tuple(digest(v) for v in x)
    return x


class Stage:
    """Holds what the stand-ins' methods share: a stage's own fields."""

    def __init__(self, index):
        self.stage_index = index
        self.group_rank, self.group_size = 0, 1
        self.device = types.SimpleNamespace(type="cpu")


class Label:
    def __init__(self, name, args=None):
        self.name, self.args = name, args

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def torch_215():
    """PyTorch 2.15's signatures (2.11's are the same)."""
    class Base(Stage):
        def forward_one_chunk(self, fwd_chunk_id, args, kwargs=None, save_forward_output=True):
            return ("F", self.stage_index, fwd_chunk_id, args, kwargs, save_forward_output)

        def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True, last_backward=False):
            return ("B", self.stage_index, bwd_chunk_id, loss, full_backward, last_backward)

        def backward_weight_one_chunk(self, bwd_chunk_id, last_backward=False):
            return ("W", self.stage_index, bwd_chunk_id, last_backward)

        def get_fwd_send_ops(self, fwd_chunk_id):
            return [Op(1, op_bytes(fwd_chunk_id))]

        def get_bwd_send_ops(self, bwd_chunk_id):
            return [Op(1, op_bytes(bwd_chunk_id))]

        def get_fwd_recv_ops(self, fwd_chunk_id):
            return [Op(1, op_bytes(fwd_chunk_id))]

        def get_bwd_recv_ops(self, bwd_chunk_id):
            return [Op(1, op_bytes(bwd_chunk_id))]

    def _batch_p2p(p2p_ops, desc=None):
        return [Work() for _ in p2p_ops]

    def _wait_batch_p2p(work):
        return ("waited", len(work))
    return Base, _batch_p2p, _wait_batch_p2p, Label


def torch_later():
    """A later PyTorch's, as it might change them: keywords added (one
    keyword-only, **kwargs), self positional-only, a micro-batch renamed
    (chunk: the hook cannot find it and records -1), ops positional-only."""
    class Base(Stage):
        def forward_one_chunk(self, fwd_chunk_id, args=(), kwargs=None, save_forward_output=True, *,
                              new_flag=False):
            return ("F", self.stage_index, fwd_chunk_id, args, kwargs, save_forward_output, new_flag)

        def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True, last_backward=False,
                               **future):
            return ("B", self.stage_index, bwd_chunk_id, loss, full_backward, last_backward, future)

        def backward_weight_one_chunk(self, /, bwd_chunk_id, last_backward=False):
            return ("W", self.stage_index, bwd_chunk_id, last_backward)

        def get_fwd_send_ops(self, fwd_chunk_id, *, peer_hint=None):
            return [Op(1, op_bytes(fwd_chunk_id))]

        def get_bwd_send_ops(self, bwd_chunk_id):
            return [Op(1, op_bytes(bwd_chunk_id))]

        def get_fwd_recv_ops(self, fwd_chunk_id):
            return [Op(1, op_bytes(fwd_chunk_id))]

        def get_bwd_recv_ops(self, chunk):
            return [Op(1, op_bytes(chunk))]

    def _batch_p2p(p2p_ops, /, desc=None, *, group=None):
        return [Work() for _ in p2p_ops]

    def _wait_batch_p2p(work, timeout=None):
        return ("waited", len(work), timeout)
    return Base, _batch_p2p, _wait_batch_p2p, Label


def torch_passthrough():
    """2.15's, each already wrapped by someone's (*args, **kwargs) wrapper
    that keeps no functools.wraps metadata: the hook falls back to
    PyTorch's layout to read them."""
    Base, p2p, wait, label = torch_215()

    def through(fn):
        def w(*args, **kwargs):
            return fn(*args, **kwargs)
        w.inner = fn   # for the test's forms only: the hook sees (*args, **kwargs)
        return w
    for name in NAMES:
        setattr(Base, name, through(Base.__dict__[name]))
    return Base, through(p2p), through(wait), label


NAMES = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk",
         "get_fwd_send_ops", "get_bwd_send_ops", "get_fwd_recv_ops", "get_bwd_recv_ops")


def sched_module(p2p, wait, label):
    class _PipelineSchedule:
        def __init__(self, stage):
            self._stage = stage
            self._n_microbatches = 4
            self._internal_losses = []
            self.body = None

        def step(self, *args, target=None, losses=None, return_outputs=True, **kwargs):
            if self.body is not None:
                self.body()
            return ("step", args, target, losses, return_outputs, kwargs)

        def _update_losses(self, stages, losses):
            return ("losses", stages, losses)

    class PipelineScheduleSingle(_PipelineSchedule):
        pass

    class PipelineScheduleMulti(_PipelineSchedule):
        pass

    return types.SimpleNamespace(_PipelineSchedule=_PipelineSchedule,
                                 PipelineScheduleSingle=PipelineScheduleSingle,
                                 PipelineScheduleMulti=PipelineScheduleMulti,
                                 _batch_p2p=p2p, _wait_batch_p2p=wait, record_function=label)


# ---- every form a signature allows -----------------------------------------

def forms(fn, values):
    """Every way to call fn with values (name -> value): for each number of
    positional-or-keyword parameters given (those after it left to their
    defaults), each split into positional and keyword ones; keyword-only
    ones given and, where they have a default, left out; values for *args
    and **kwargs ("*", "**") where fn takes them."""
    ps = list(inspect.signature(fn).parameters.values())
    pos = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kwonly = [p for p in ps if p.kind == p.KEYWORD_ONLY]
    star = any(p.kind == p.VAR_POSITIONAL for p in ps)
    starstar = any(p.kind == p.VAR_KEYWORD for p in ps)
    required = sum(1 for p in pos if p.default is p.empty)
    kw_variants = [{p.name: values[p.name] for p in kwonly}]
    if kwonly and all(p.default is not p.empty for p in kwonly):
        kw_variants.append({})
    if starstar:
        kw_variants.append(dict(kw_variants[0], **values["**"]))
    out = []
    for n in range(required, len(pos) + 1):
        for s in range(n + 1):
            if any(p.kind == p.POSITIONAL_ONLY for p in pos[s:n]):
                continue
            args = tuple(values[p.name] for p in pos[:s])
            kw = {p.name: values[p.name] for p in pos[s:n]}
            for extra in kw_variants:
                out.append((args, dict(kw, **extra)))
            if star and s == n == len(pos):
                out.append((args + values["*"], dict(kw_variants[0])))
    return out


def call_both(wrapped, orig, args, kwargs, what):
    """Calls wrapped and orig alike; their results (or exceptions) must
    agree.  Returns wrapped's result, or None where both raised."""
    def run(fn):
        try:
            return True, fn(*args, **kwargs)
        except Exception as e:
            return False, (type(e), str(e))
    ok_w, w = run(wrapped)
    ok_o, o = run(orig)
    if ok_w != ok_o or (digest(w) if ok_w else w) != (digest(o) if ok_o else o):
        fail(f"{what}{_show(args, kwargs)}: wrapped {'returned' if ok_w else 'raised'} {digest(w) if ok_w else w}, "
             f"the original {'returned' if ok_o else 'raised'} {digest(o) if ok_o else o}")
    return w if ok_w else None


def _show(args, kwargs):
    return "(" + ", ".join([digest(a).__repr__() for a in args]
                           + [f"{k}={digest(v)!r}" for k, v in kwargs.items()]) + ")"


# ---- one run: a layout, C or Python --------------------------------------

def one_run(T, L, make, fast, trace, label):
    """Installs the hook on fresh stand-ins, calls everything in every form
    off (before the first step), recording (step 0), paused (step 1) and
    failed; returns (calls made while recording, what the trace must hold)."""
    Base, p2p, wait, rf = make()
    sched = sched_module(p2p, wait, rf)
    orig = {n: Base.__dict__[n] for n in NAMES}
    orig_p2p, orig_wait, orig_label = p2p, wait, rf
    orig_step = sched._PipelineSchedule.__dict__["step"]
    orig_losses = sched._PipelineSchedule.__dict__["_update_losses"]
    hook = T._Hook(types.SimpleNamespace(__version__="stand-in"),
                   types.SimpleNamespace(is_initialized=lambda: False), None, sched)
    T._install(hook, Base, sched, fast)
    for n in NAMES:
        w = Base.__dict__[n]
        if w.__name__ != orig[n].__name__ or w.__wrapped__ is not orig[n]:
            fail(f"{label}: {n}'s wrapper has not the original's __name__ and __wrapped__")
    stage = Base(1)
    if not isinstance(Base.forward_one_chunk, types.FunctionType) and \
            not hasattr(stage.forward_one_chunk, "__self__"):
        fail(f"{label}: the wrapper does not bind as a method")
    loss = object()
    want = collections.Counter()
    n_calls = [0]
    mbs = iter(range(10 ** 6))
    MB = object()   # in a form: the call's micro-batch, new each call

    def each_form(fn, **v):
        """(mb, args, kwargs) for every form of fn (the signature of the
        function a pass-through hands on to, where it is one)."""
        shape = getattr(fn, "inner", fn)
        values = dict(self=stage, args=("x",), kwargs={"k": 1}, save_forward_output=False, loss=loss,
                      last_backward=True, new_flag=True, peer_hint=0, desc="d", group=None, timeout=5,
                      full_backward=False, fwd_chunk_id=MB, bwd_chunk_id=MB, chunk=MB,
                      **{"*": (), "**": {"future_kw": 1}})
        values.update(v)
        for args, kwargs in forms(shape, values):
            mb = next(mbs)
            yield (mb, tuple(mb if x is MB else x for x in args),
                   {k: (mb if x is MB else x) for k, x in kwargs.items()})

    def calls(recording):
        """Every form of every wrapped call, each with a micro-batch of its own."""
        # transfers and their waits first: the waits are the first block's
        for n, kind in (("get_fwd_send_ops", "SEND_F"), ("get_bwd_send_ops", "SEND_B"),
                        ("get_fwd_recv_ops", "RECV_F"), ("get_bwd_recv_ops", "RECV_B")):
            for mb, a, k in each_form(orig[n]):
                ops = call_both(getattr(Base, n), orig[n], a, k, f"{label}: {n}")
                # _batch_p2p and _wait_batch_p2p, a form each in turn
                pf = list(each_form(orig_p2p, p2p_ops=ops))
                _, pa, pk = pf[mb % len(pf)]
                works = call_both(sched._batch_p2p, orig_p2p, pa, pk, f"{label}: _batch_p2p")
                wf = list(each_form(orig_wait, work=works))
                _, wa, wk = wf[mb % len(wf)]
                call_both(sched._wait_batch_p2p, orig_wait, wa, wk, f"{label}: _wait_batch_p2p")
                n_calls[0] += 3
                if recording:
                    renamed = "chunk" in inspect.signature(getattr(orig[n], "inner", orig[n])).parameters
                    want[(kind, 1, -1 if renamed else mb, op_bytes(mb))] += 1
                    want[("WAIT",)] += 1
        for n, kind in (("forward_one_chunk", "F"), ("backward_one_chunk", "B"),
                        ("backward_weight_one_chunk", "W")):
            names = _names(getattr(orig[n], "inner", orig[n]))
            for mb, a, k in each_form(orig[n]):
                if a:   # self given positionally: the bound method too
                    call_both(getattr(stage, n), orig[n].__get__(stage), a[1:], k, f"{label}: stage.{n}")
                else:
                    call_both(getattr(Base, n), orig[n], a, k, f"{label}: {n}")
                n_calls[0] += 1
                if recording:
                    full = dict(zip(names, a), **k).get("full_backward", True)
                    want[("I" if kind == "B" and not full else kind, 1, mb, 0)] += 1
        # the profiler label, each form, around an overlapped forward and backward
        for mb, a, k in each_form(orig_label, name="1;1OVERLAP_F_B", args=None):
            lw = call_both(sched.record_function, orig_label, a, k, f"{label}: record_function")
            with lw as inner:
                if digest(inner) != ("label", "1;1OVERLAP_F_B", None):
                    fail(f"{label}: the label's __enter__ gave {digest(inner)}")
                stage.forward_one_chunk(mb, ())
                stage.backward_one_chunk(mb)
            n_calls[0] += 3
            if recording:
                want[("OVERLAP_F_B", 1, mb, 0)] += 1
        # calls the function refuses: the same TypeError through the
        # wrapper, nothing recorded
        def refuses(o, a, k):
            try:
                o(*a, **k)
            except TypeError:
                return True
            return False
        for fn, o in [(getattr(Base, n), orig[n]) for n in NAMES] + [
                (sched._batch_p2p, orig_p2p), (sched._wait_batch_p2p, orig_wait),
                (sched.record_function, orig_label)]:
            for a, k in (((), {}), ((stage,), {}), ((stage, 1, 2, 3, 4, 5, 6), {}), ((stage, 1), {"no_such": 1}),
                         ((), {"fwd_chunk_id": 1, "bwd_chunk_id": 1}), (([],), {"no_such": 1})):
                if refuses(o, a, k):
                    call_both(fn, o, a, k, f"{label}: {o.__name__}, a call it refuses")
                    n_calls[0] += 1
        for _, a, k in each_form(orig_losses, self=schedule, stages=[stage], losses=[]):
            call_both(sched._PipelineSchedule._update_losses, orig_losses, a, k, f"{label}: _update_losses")
            n_calls[0] += 1

    schedule = sched.PipelineScheduleSingle(stage)
    calls(False)                        # before the first step: no rank, recording off
    schedule.body = lambda: calls(True)
    schedule.step("x", target="y")      # step 0: recording
    schedule.body = None
    if hook.rank is None or hook.failed:
        fail(f"{label}: the hook did not open its rank")
    hook.set_paused(True)               # paused: the calls alone
    calls(False)
    hook.set_paused(False)
    # the step itself, every form (the schedule by keyword too)
    for _, a, k in each_form(orig_step, self=schedule, target="y", losses=[], return_outputs=False,
                             **{"*": ("x",)}):
        call_both(sched.PipelineScheduleSingle.step, orig_step, a, k, f"{label}: step")
        n_calls[0] += 1
    hook.close()
    hook.fail("the test", RuntimeError("recording stopped on purpose"))
    calls(False)                        # after a failure: recording off
    return n_calls[0], want


def _names(fn):
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def got_of(cli, trace, tmp):
    got = collections.Counter()
    for x in spans_of(cli, trace, tmp):
        k = x["kind"]
        if k in ("GC", "HOST_SCHEDULE", "HOST_LOSS", "HOST_DATA", "HOST_ZERO_GRAD"):
            continue   # what the thread did between the calls (issue 29): test-fast-host.py
        if k in ("SEND_F", "SEND_B", "RECV_F", "RECV_B"):
            got[(k, int(x["stage"]), int(x["microbatch"]), int(x["bytes"]))] += 1
        elif k == "WAIT":
            got[("WAIT",)] += 1
        else:
            got[(k, int(x["stage"]), int(x["microbatch"]), int(x["step"]))] += 1
    return got


def review_cases(T, A):
    """What a review found beside the call forms: a block whose arguments
    the hook cannot read runs outside the hook's own exception (the job's
    error carries no context of ours); a label copies as the real one; a
    signature that raises anything at all leaves the defaults to read."""
    class Hook:
        rank = types.SimpleNamespace(now=lambda: 0)
        failed = paused = False
        said = []

        def fail(self, what, e):
            self.said.append(what)
            self.failed = True

    class Stage:   # no stage_index: the hook cannot read the stage
        device = None

    seen = []

    def fwd(self, fwd_chunk_id, args=(), kwargs=None, save_forward_output=True):
        seen.append(sys.exc_info()[1])
        raise RuntimeError("the job's own")

    hook = Hook()
    w = T._wrap_block(hook, fwd, T._fwd_kind)
    try:
        w(Stage(), 0)
        fail("review: the job's exception did not pass")
    except RuntimeError as e:
        if e.__context__ is not None or seen != [None]:
            fail(f"review: the job's error ran inside the hook's: context {e.__context__!r}, "
                 f"exc_info inside the call {seen!r}")
    # a call the function refused is the job's error: recording goes on;
    # one that passes with arguments the hook cannot read stops it, once
    if hook.said:
        fail(f"review: the hook said {hook.said} of a call the job's function refused")
    if T._wrap_block(hook, lambda self, fwd_chunk_id: 7, T._fwd_kind)(Stage(), 0) != 7:
        fail("review: a call the hook could not read lost its result")
    if hook.said != ["a block"]:
        fail(f"review: the hook said {hook.said}, not one 'a block'")

    import copy
    lab = T._Label(hook, lambda name: types.SimpleNamespace(name=name), "x", ("PP:0F0",), {})
    for f in (copy.copy, copy.deepcopy):
        if f(lab).name != "PP:0F0":
            fail(f"review: {f.__name__} of a label lost its name")
    bare = T._Label.__new__(T._Label)
    if hasattr(bare, "inner"):
        fail("review: a label without its inner label has one")

    class Odd:   # inspect.signature raises what __signature__ raises
        @property
        def __signature__(self):
            raise NameError("an annotation only TYPE_CHECKING imports")

        def __call__(self, *args, **kwargs):
            pass
    try:
        p = A.Param(Odd(), "fwd_chunk_id", 1)
    except Exception as e:
        fail(f"review: a signature that raised reached the hook's install: {e!r}")
    if p.pos != 1 or p.name != "fwd_chunk_id":
        fail(f"review: a signature that raised left ({p.pos}, {p.name}), not PyTorch's (1, fwd_chunk_id)")
    ok("review cases: a job's error carries no context of the hook's; labels copy; "
       "a signature that raises leaves PyTorch's layout")


def main():
    libpath, cli, fast_path = sys.argv[1], sys.argv[2], sys.argv[3]
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-hook-calls-")
    try:
        os.chmod(tmp, 0o700)
        os.environ["XDG_RUNTIME_DIR"] = tmp
        os.environ["PIPESCOPE_JOB"] = "hook-calls"
        from pipescope import lib as L
        from pipescope import torch as T
        raw = L.load()
        if raw is None:
            fail(f"load: {L.last_error}")
        fast = raw.pipescope_fast
        if fast_path != "none" and fast is None:
            fail(f"lib.py did not load {fast_path} beside {libpath}")
        paths = [("C", fast)] if fast is not None else []
        paths.append(("Python", None))
        layouts = (("PyTorch 2.15", torch_215), ("a later PyTorch", torch_later),
                   ("pass-through originals", torch_passthrough))
        print(f"1..{len(layouts) + 1}")
        import io
        for name, make in layouts:
            done = []
            for path, f in paths:
                trace = os.path.join(tmp, f"{make.__name__}-{path}")
                os.environ["PIPESCOPE_TRACE"] = trace
                err, sys.stderr = sys.stderr, io.StringIO()
                try:
                    n, want = one_run(T, L, make, f, trace, f"{name}, {path}")
                finally:
                    said, sys.stderr = sys.stderr.getvalue(), err
                lines = said.strip().splitlines()
                if len(lines) != 1 or "recording stopped (the test" not in lines[0]:
                    fail(f"{name}, {path}: the hook said {lines}, not the one line of the test's own stop")
                got = got_of(cli, trace + ".rank0", tmp)
                if got != want:
                    fail(f"{name}, {path}: the trace differs from the calls made while recording:\n"
                         f" missing {sorted((want - got).items())}\n extra   {sorted((got - want).items())}")
                done.append(f"{path}: {n} calls, {sum(want.values())} records")
            ok(f"{name}: every form of every wrapped call, results and exceptions the original's; "
               f"recorded as called, nothing paused or off ({'; '.join(done)})")
        from pipescope import arguments as A
        review_cases(T, A)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
