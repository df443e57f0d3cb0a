#!/usr/bin/env python3
"""test-hook-loss.py LIB CLI FAST — the loss as the hook records it (issue
36), with stand-ins for PyTorch (no PyTorch needed).

  1. The compiled loss wrapper (role loss, the schedule's
     _maybe_compute_loss): a call on the last stage with a loss function
     is one LOSS block of that stage and micro-batch (given by position or
     by keyword), timed around the call; a call on another stage, or with
     no loss function, or inside an overlapped action records nothing; the
     result and the exception of the call pass through untouched.
  2. The loss value as the job reduces it (core.Recorder.record_loss):
     the mean over micro-batches as LOSS by default; with PIPESCOPE_LOSS=sum,
     or once the process has imported torchtitan, their sum as LOSS_PART;
     never both kinds.
  3. zero_grad (host.wrap_zero_grad) belongs to the step it precedes: the
     calls before the rank opens and between two steps wait and are
     recorded with the index of the step that begins next; a call inside a
     step is that step's; a paused step's are dropped.
FAST "none": part 1 skipped (no python3 headers at build time).
"""

import atexit
import os
import shutil
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "probe", "python")))
from pp_tap import fail, ok, raw_trace, spans_of  # noqa: E402


class Stage:
    def __init__(self, index, last):
        self.stage_index, self.is_last = index, last


class Schedule:
    def __init__(self, loss_fn):
        self._loss_fn = loss_fn
        self._internal_losses = []


def maybe_compute_loss(self, stage, output, target_mbs, mb_index, loss_kwargs=None):
    """PyTorch 2.15's _maybe_compute_loss, in short."""
    if stage.is_last and self._loss_fn is not None:
        self._internal_losses.append(self._loss_fn(output, target_mbs[mb_index]))


class FakeRank:
    """What Recorder.record_loss and step_begin call of a lib.Rank."""

    def __init__(self):
        self.counters, self.blocks, self.steps, self.fast = [], [], [], None
        self.t = 1000

    def now(self):
        self.t += 10
        return self.t

    def counter(self, kind, value, step, t):
        self.counters.append((kind, value, step))

    def block(self, kind, stage, mb, step, t0, t1):
        self.blocks.append((kind, step, t0, t1))

    def step(self, idx, phase, t):
        self.steps.append((idx, phase))


def part1(libpath, cli, tmp):
    from pipescope import lib as L
    raw = L.load()
    fast = raw.pipescope_fast if raw is not None else None
    if fast is None:
        fail(f"lib.py did not load _pipescope_fast beside {libpath}")
    trace = os.path.join(tmp, "loss.pptrace")
    r, err = L.Rank.open("hook-loss", 1, 2, trace=trace)
    if r is None or r.fast is not fast:
        fail(f"open: {err or 'the rank did not take the fast path'}")
    fast.set_fail(lambda what, exc: fail(f"the fast path failed: {what}: {exc}"))
    Schedule.call = fast.wrap("loss", maybe_compute_loss, maybe_compute_loss,
                              ((0, "self"), (1, "stage"), (4, "mb_index")))
    boom = RuntimeError("the loss function's own error")

    def raising(out, target):
        raise boom

    last, mid = Stage(3, True), Stage(1, False)
    sched, none, bad = Schedule(lambda o, t: o - t), Schedule(None), Schedule(raising)
    fast.set_on(1)
    r.step(0, 0, r.now())
    t0 = r.now()
    if sched.call(last, 10, [1, 2, 3], 2) is not None or sched._internal_losses != [7]:
        fail(f"the loss call's result changed: {sched._internal_losses}")
    sched.call(last, 10, [1, 2, 3], mb_index=1)              # by keyword
    sched.call(stage=last, output=5, target_mbs=[1], mb_index=0)
    t1 = r.now()
    sched.call(mid, 10, [1, 2, 3], 0)                        # not the last stage
    none.call(last, 10, [1, 2, 3], 0)                        # no loss function
    try:
        bad.call(last, 10, [1, 2, 3], 0)
        fail("the loss function's exception did not come through")
    except RuntimeError as e:
        if e is not boom:
            fail(f"another exception came through: {e!r}")
    fast.set_overlap([])                                     # inside an overlapped pair
    sched.call(last, 10, [1, 2, 3], 0)
    fast.set_overlap(None)
    r.step(0, 1, r.now())
    fast.set_on(0)
    r.close()
    rows = [x for x in spans_of(cli, trace, tmp) if x["kind"] == "LOSS"]
    got = sorted((int(x["stage"]), int(x["microbatch"])) for x in rows)
    if got != [(3, 0), (3, 1), (3, 2)]:
        fail(f"LOSS blocks {got}: want stage 3's micro-batches 0, 1, 2 (the failed call, the other "
             "stage's, the one without a loss function and the overlapped one record none)")
    times = [(s0, e0) for _, kind, _, s0, e0 in raw_trace(trace)[0] if kind == L.SPAN_LOSS]   # the writer's clock
    if len(times) != 3 or any(s0 < t0 or e0 > t1 or e0 < s0 for s0, e0 in times):
        fail(f"LOSS blocks at {times}, not inside their calls' {t0}..{t1}")
    ok("the compiled loss wrapper: one LOSS block of the stage and micro-batch a loss computed, none "
       "elsewhere, the call's result and exception untouched")


def part2():
    from pipescope import core
    from pipescope import lib as L
    said = []
    for env, titan, want in ((None, False, L.LOSS), ("sum", False, L.COUNTER_LOSS_PART),
                             (None, True, L.COUNTER_LOSS_PART), ("mean", True, L.LOSS)):
        os.environ.pop("PIPESCOPE_LOSS", None)
        if env:
            os.environ["PIPESCOPE_LOSS"] = env
        sys.modules.pop("torchtitan", None)
        if titan:
            sys.modules["torchtitan"] = types.ModuleType("torchtitan")   # a trainer's import (no metadata)
        rec = core.Recorder(None)
        rec.rank = FakeRank()
        rec.record_loss([0.25, 0.5, 1.0], 0)
        rec.record_loss([1.0, 2.0, 3.0], 1)
        value = (lambda v: sum(v)) if want == L.COUNTER_LOSS_PART else (lambda v: sum(v) / len(v))
        expect = [(want, value([0.25, 0.5, 1.0]), 0), (want, value([1.0, 2.0, 3.0]), 1)]
        if rec.rank.counters != expect:
            fail(f"PIPESCOPE_LOSS={env} torchtitan {titan}: counters {rec.rank.counters}, want {expect}")
        said.append(f"{env or '-'}/{'torchtitan' if titan else 'plain'} -> "
                    f"{'loss_part' if want == L.COUNTER_LOSS_PART else 'loss'}")
    sys.modules.pop("torchtitan", None)
    os.environ.pop("PIPESCOPE_LOSS", None)
    ok("the loss as the job reduces it, one kind a process: " + ", ".join(said))


def part3():
    from pipescope import core
    from pipescope import host as H
    from pipescope import lib as L
    os.environ["PIPESCOPE_GC"] = "0"
    os.environ["PIPESCOPE_EDGES"] = "0"
    rec = core.Recorder(None)
    calls = []

    def zero_grad(*args, **kwargs):
        calls.append((args, kwargs))
        return "zeroed"
    zg = H.wrap_zero_grad(rec, zero_grad)
    if zg(1, set_to_none=True) != "zeroed" or calls != [((1,), {"set_to_none": True})]:
        fail(f"zero_grad's call or result changed: {calls}")   # before the rank opens
    rec.rank = FakeRank()
    rec.step_begin()                                           # step 0
    rec.in_step = 1
    zg()                                                       # inside step 0
    rec.in_step = 0
    zg()                                                       # between steps 0 and 1
    zg()
    rec.step_begin()                                           # step 1
    zg()                                                       # before a paused step: dropped
    rec.set_paused(True)
    rec.set_paused(False)
    rec.step_begin()                                           # step 2
    got = [step for kind, step, _, _ in rec.rank.blocks if kind == L.SPAN_HOST_ZERO_GRAD]
    if got != [0, 0, 1, 1]:
        fail(f"zero_grad spans of steps {got}: want [0, 0, 1, 1] (the first call before the rank opened "
             "and the one inside step 0 are step 0's, the two between steps 0 and 1 step 1's, the one "
             "before a paused step none)")
    if rec.host is not None:
        rec.host.close()
    ok("zero_grad belongs to the step it precedes: " + ", ".join(map(str, got)))


def main():
    libpath, cli, fast_path = sys.argv[1], sys.argv[2], sys.argv[3]
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-hook-loss-")
    atexit.register(shutil.rmtree, tmp, True)
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp
    print("1..3")
    if fast_path == "none":
        ok("# SKIP the build has no _pipescope_fast: the hook records in Python")
    else:
        part1(libpath, cli, tmp)
    part2()
    part3()
    return 0


if __name__ == "__main__":
    sys.exit(main())
