"""pipescope.host — what the training thread does between blocks (issue 29).

A rank's `runtime` (its idle that the plan with measured costs does not
explain) is split by the analysis into parts measured on the rank.  This
records their inputs for one process, on the thread that runs its steps
(the training thread: the first step's, where the Recorder opens this):

  * GC: a gc.callbacks callback, start -> stop on time.monotonic_ns (the
    clock of the blocks, CLOCK_MONOTONIC), one SPAN_GC span (stage -1,
    mb -1, the step begun last) a collection, queued like every record
    (no library call while a batch is open).  The callback runs on the
    thread that collects: the training thread's collections have stream 0,
    another thread's carry that thread's native id (with PP_GC_STOPS_WORLD
    where sys._is_gil_enabled() says the interpreter has no GIL; format
    1.8, pp-event.h).  Another thread's collection holds the GIL, so it
    holds up the training thread only where that thread wants the
    interpreter meanwhile (not in a wait that released it, a gloo
    receive): the analysis decides what of it to charge (pp-why-runtime.h,
    rule 1); this only records it.  One slot serves every other thread:
    CPython runs one collection at a time, callbacks included.  The
    callback is removed during paused steps (the benchmark's unrecorded
    ones) and at close.  Its own cost is mostly inside the span it records
    (it reads the clock first at start, and first at stop).
  * block edges: /proc/thread-self/schedstat opened once on this thread;
    its run-queue delay (the thread runnable but not running) and the
    hook's own time on the thread (PROBE_SELF_NS: the compiled wrappers'
    own time, the measure bench-torch quotes, which includes these reads
    and the hand-overs made inside them) sampled at the start and the end
    of every block, each queued only when it changed since its last sample
    (about half the records: a block's own end rarely moves either); an
    unchanged sample is the previous one's value, so a reader takes the
    last sample at or before an edge.  The compiled wrappers do this
    (pipescope-fast.c); without them (PIPESCOPE_FAST=0) the Python ones
    sample the run-queue delay only (edge() below).  A kernel without
    schedstat (CONFIG_SCHEDSTATS off, no /proc): none recorded, said once.
    PIPESCOPE_EDGES=0: no samples (to measure what they cost).
  * host work: the wrappers record the schedule's own code between
    actions (HOST_SCHEDULE: from one wrapped call's exit to the next one's
    entry within a step, so it holds no recorded block, transfer, wait or
    host span and none of the compiled wrappers' own time; the hook's
    Python around the step and GC pauses lie inside it, the analysis takes
    GC out).  torch.py's compiled wrappers on CPU do it in C; megatron.py's
    Python wrappers on CPU through Recorder.sched_in/sched_out (their own
    Python is then inside it); the Python wrappers of a torch job
    (PIPESCOPE_FAST=0, CUDA) record none.  Also the splitting of the
    inputs into micro-batches (HOST_DATA; wrap_host here) and the
    optimizers' zero_grad (HOST_ZERO_GRAD, of the step it precedes:
    wrap_zero_grad).  The schedule's loss call is no host work: it is the
    last stage's LOSS block (trace format 1.9; torch.py).
"""

import functools
import gc
import os
import sys
import threading

from . import lib as _lib
from .say import say

# a GC span's stream (pp-event.h): another thread's native id, and this
# bit where the interpreter has no GIL (its collection stops every thread)
STOPS_WORLD, THREAD_MASK = 0x80000000, 0x7FFFFFFF


class Host:
    """The training thread's GC pauses and block edges, for Recorder rec
    (its rank open); made on the training thread."""

    def __init__(self, rec):
        self.rec = rec
        self.thread = threading.get_ident()
        self.fd = -1          # the Python wrappers' schedstat (no compiled ones)
        self.last_delay = self.last_cpu = -1
        self.on_gc = None
        fast = rec.fast
        samples = os.environ.get("PIPESCOPE_EDGES") != "0"
        if fast is not None and rec.compiled_blocks:
            has_delay = fast.edges_open(samples) or not samples
        elif not samples:
            has_delay = True   # no samples, as asked: nothing to say
        else:
            try:
                self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
                has_delay = self.run_delay() >= 0
            except OSError:
                has_delay = False
            if not has_delay:
                self.close_fd()
        if not has_delay:
            say("run-queue delay not recorded (this kernel offers no /proc/thread-self/schedstat); "
                         "time the rank's thread spent descheduled stays unattributed")
        if os.environ.get("PIPESCOPE_GC") != "0":
            self.on_gc = self._gc_callback()
            gc.callbacks.append(self.on_gc)

    def _gc_callback(self):
        rec, get_ident, thread = self.rec, threading.get_ident, self.thread
        now = rec.rank.now
        began = [0]
        other = [0, 0]   # another thread's collection: its start, its thread's code
        gil = getattr(sys, "_is_gil_enabled", lambda: True)()
        world = 0 if gil else STOPS_WORLD

        def on_other(phase):
            if phase == "start":
                other[0], other[1] = now(), (threading.get_native_id() & THREAD_MASK) | world
                return
            t0, other[0] = other[0], 0
            r = rec.rank
            if t0 == 0 or r is None or rec.failed:
                return
            try:
                r.gc_pause(rec.current_step(), t0, now(), other[1])
            except Exception as e:
                rec.fail("a GC pause on another thread", e)

        def on_gc(phase, info):
            if get_ident() != thread:
                on_other(phase)
                return
            if phase == "start":
                began[0] = now()
                return
            t0, began[0] = began[0], 0
            r = rec.rank
            if t0 == 0 or r is None or rec.failed:
                return
            try:
                r.gc_pause(rec.current_step(), t0, now())
            except Exception as e:
                rec.fail("a GC pause", e)
        return on_gc

    def set_paused(self, paused):
        """A paused step records nothing: the callback out of gc's list."""
        cb = self.on_gc
        if cb is None:
            return
        if paused and cb in gc.callbacks:
            gc.callbacks.remove(cb)
        elif not paused and cb not in gc.callbacks:
            gc.callbacks.append(cb)

    def close(self):
        cb, self.on_gc = self.on_gc, None
        if cb is not None and cb in gc.callbacks:
            gc.callbacks.remove(cb)
        self.close_fd()

    def close_fd(self):
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def run_delay(self):
        """The training thread's cumulative run-queue delay (ns), -1 unread."""
        return self.schedstat()[1]

    def schedstat(self):
        """(time on a CPU, run-queue delay) of the training thread,
        cumulative ns, from one read; (-1, -1) unread."""
        try:
            f = os.pread(self.fd, 64, 0).split()
            return int(f[0]), int(f[1])
        except (OSError, IndexError, ValueError):
            return -1, -1

    def edge(self, t):
        """A block edge at t (Python wrappers): the run-queue delay's sample
        where it changed, on the training thread only."""
        if threading.get_ident() != self.thread:
            return
        cpu, d = self.schedstat()
        r = self.rec.rank
        if d >= 0 and d != self.last_delay and r is not None:
            self.last_delay = d
            r.sample(_lib.COUNTER_RUN_DELAY_NS, d, self.rec.current_step(), t)
        if cpu >= 0 and cpu != self.last_cpu and r is not None:
            self.last_cpu = cpu
            r.sample(_lib.COUNTER_ON_CPU_NS, cpu, self.rec.current_step(), t)


def wrap_host(hook, orig, kind):
    """orig recorded as a host span of kind (the Python wrapper; the
    compiled one, role "host", is the same)."""
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        t0 = r.now()
        out = orig(*args, **kwargs)
        try:
            r.block(kind, -1, -1, hook.current_step(), t0, r.now())
        except Exception as e:
            hook.fail("host work", e)
        return out
    return wrapper


def hot_host(hook, fast, orig, kind):
    """The compiled host wrapper of orig where the build has one (the
    Python one its fallback), else the Python one."""
    wrapper = wrap_host(hook, orig, kind)
    if fast is None:
        return wrapper
    return fast.wrap("host", orig, wrapper, ((-1, None, None),), kind)


def wrap_zero_grad(hook, orig):
    """orig (an optimizer's zero_grad) as a HOST_ZERO_GRAD span of the step
    it precedes: called between steps (a training loop's zero_grad before
    its step, torchtitan's included), it waits in hook.zero_grads until
    the next step begins (Recorder.step_begin), so the first one, before
    the rank is open, is recorded too; called inside a step, it is that
    step's.  A Python wrapper: once a step, and the step it belongs to is
    not known when it runs (the compiled host wrapper records at once)."""
    import time
    mono = time.monotonic_ns   # the library's CLOCK_MONOTONIC (lib.Rank.now), before the rank opens too

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.failed:
            return orig(*args, **kwargs)
        r = hook.rank
        now = r.now if r is not None else mono
        t0 = now()
        out = orig(*args, **kwargs)
        try:
            t1 = now()
            if hook.in_step and r is not None:
                r.block(_lib.SPAN_HOST_ZERO_GRAD, -1, -1, hook.current_step(), t0, t1)
            elif len(hook.zero_grads) < 64:   # a loop that never steps keeps a few, no more
                hook.zero_grads.append((t0, t1))
        except Exception as e:
            hook.fail("zero_grad", e)
        return out
    return wrapper


def zero_grad_hooks(hook, fast):
    """torch.optim.Optimizer.zero_grad as HOST_ZERO_GRAD spans of the step
    each precedes (wrap_zero_grad; an optimizer class of its own zero_grad
    is not seen).  fast: unused (kept for the adapters' one call)."""
    import importlib
    opt = importlib.import_module("torch.optim.optimizer").Optimizer
    if "zero_grad" in opt.__dict__:
        opt.zero_grad = wrap_zero_grad(hook, opt.__dict__["zero_grad"])
