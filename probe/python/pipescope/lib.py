"""lib.py — libpipescope-probe.so through ctypes (the API of probe/pipescope.h).

Found at $PIPESCOPE_LIB (what `pipescope-cli profile` sets), else beside this
package in a build tree, else by the linker's search.  load() returns None,
with the reason in last_error, when the library cannot be had or is of an API
version this package does not know: the caller then records nothing.  The
device calls (pipescope_device_*, added to version 1) are looked up by name:
a library without them answers Rank.device_start with 1 and the reason.

The hot path costs microseconds a call through ctypes (converting seven
64-bit arguments), far more than recording does.  So blocks, transfers and
waits are queued here, step markers among them in their order, and handed over,
packed, with one pipescope_records call: when 512 are queued, with the
first record 50 ms after the last hand-over (a live viewer sees a record
that late, or at the next record), at each step's end and at close.  A
ctypes call costs the job far more in place than on its own (in a 2-rank
CPU job, 9 us for the call and 13 us for the Python around it, cold in
the cache), so the fewer, the better.  Times come from
time.monotonic_ns, the library's CLOCK_MONOTONIC without a ctypes call,
once a check at open has shown the two agree.  A library without
pipescope_records gets a call a record, as before.

Where the build made the hot path in C for this interpreter
(_pipescope_fast beside the library, probe/python/pipescope-fast.c), the
queue is that module's and its wrappers (torch.py) record into it without
a Python frame; the methods here queue into it too, so the order holds.
"""

import ctypes
import ctypes.util
import os
import struct
import threading
import time

API_VERSION = 1

# Kinds and counters: probe/pipescope.h.
F, B, I, W = 0, 1, 2, 3
SEND_F, RECV_F, SEND_B, RECV_B = 4, 5, 6, 7
OPT, WAIT, OVERLAP_F_B = 8, 9, 13
STEP_BEGIN, STEP_END = 64, 65   # pipescope_records' step markers
LOSS, ACTIVATION_BYTES, DEVICE_BYTES, INFLIGHT = 0, 1, 2, 3
# Data-parallel communication (trace format 1.5), recorded with Rank.block:
# FSDP's actions as PyTorch names them, and the gradient reduction at a
# step's end; stage = the stage, mb = -1.
SPAN_UNSHARD, SPAN_RESHARD, SPAN_REDUCE_GRAD, SPAN_WAIT_REDUCE_GRAD = 14, 15, 16, 17
# The same actions in a plan (Rank.plan): pipescope_plan takes the API's
# (span) kinds, as for F and OVERLAP_F_B, and writes the trace's action
# kinds (10..13) itself.  Use the names, never the numbers.
ACT_UNSHARD, ACT_RESHARD, ACT_REDUCE_GRAD, ACT_WAIT_REDUCE_GRAD = (
    SPAN_UNSHARD, SPAN_RESHARD, SPAN_REDUCE_GRAD, SPAN_WAIT_REDUCE_GRAD)
# Collectives seen inside a step's blocks (Rank.counter): one value of
# each a step, that step's total, at the step's end.
COUNTER_COLLECTIVE_CALLS, COUNTER_COLLECTIVE_BYTES = 4, 5
# What the host did between blocks (trace format 1.6), recorded with
# Rank.block (stage -1, mb -1; HOST_LOSS: the micro-batch where known):
# neither work nor bubble, they say where a gap went.
SPAN_GC, SPAN_HOST_SCHEDULE, SPAN_HOST_LOSS, SPAN_HOST_DATA, SPAN_HOST_ZERO_GRAD = 18, 19, 20, 21, 22
# A launch an idle device waited for (1.8): the probe's CUPTI collector
# writes it, Rank.block refuses it; for readers of a trace.
SPAN_LAUNCH = 23
# The loss computation inside the schedule's loss call (1.9): the last
# stage's work, stage and micro-batch; Rank.block.
SPAN_LOSS = 24
# The process's part of the step's loss where the framework sums it over
# micro-batches and replicas (1.9; torchtitan): the job's loss is the sum
# of these over replicas.  LOSS is a mean, the job's the mean over replicas.
COUNTER_LOSS_PART = 9
# Cumulative nanoseconds of the recording thread, sampled at block edges
# (1.6): its run-queue delay (/proc/thread-self/schedstat's second field)
# and the hook's own cost on it; 1.7: its time on a CPU (the first field,
# of the same read).  In a batch as a COUNTER_RECORD record:
# (COUNTER_RECORD, counter kind, -1, step, time_ns, time_ns, -1, value).
COUNTER_RUN_DELAY_NS, COUNTER_PROBE_SELF_NS, COUNTER_ON_CPU_NS = 6, 7, 8
COUNTER_RECORD = 66   # pipescope_records only: not a span kind

last_error = ""
_lib = None


def _candidates():
    env = os.environ.get("PIPESCOPE_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for up in ("../../..", "../../../build"):
        yield os.path.normpath(os.path.join(here, up, "probe", "libpipescope-probe.so"))
    found = ctypes.util.find_library("pipescope-probe")
    if found:
        yield found


def _declare(lib):
    i32, i64, u64, sz = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
    cp, vp = ctypes.c_char_p, ctypes.c_void_p
    sigs = {
        "pipescope_api_version": (i32, []),
        "pipescope_now_ns": (i64, []),
        "pipescope_rank_open": (vp, [cp, i32, i32, cp, cp, cp, cp, sz]),
        "pipescope_rank_close": (i32, [vp, cp, sz]),
        "pipescope_describe": (i32, [vp, cp, cp, i32, i32, i32, cp, cp]),
        "pipescope_plan": (i32, [vp, i32, sz, ctypes.POINTER(ctypes.c_int32)]),
        "pipescope_block": (i32, [vp, i32, i32, i32, i32, i64, i64]),
        "pipescope_overlap": (i32, [vp, i32, i32, i32, i32, i32, i32, i64, i64]),
        "pipescope_transfer": (i32, [vp, i32, i32, i32, i32, u64, i32, i64, i64]),
        "pipescope_wait": (i32, [vp, i32, i32, i32, i32, i64, i64]),
        "pipescope_step": (i32, [vp, i32, i32, i64]),
        "pipescope_counter": (i32, [vp, i32, ctypes.c_double, i32, i64]),
        "pipescope_rank_info": (i32, [vp, cp]),
        "pipescope_dropped": (u64, [vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    device = {
        "pipescope_device_start": (i32, [vp, cp, sz]),
        "pipescope_device_push": (u64, [vp, i32, i32, i32, i32]),
        "pipescope_device_pop": (i32, [vp]),
        "pipescope_device_block": (i32, [vp, u64, i32, i32, i32, i32, i64, i64]),
        "pipescope_device_overlap": (i32, [vp, u64, u64, i32, i32, i32, i32, i32, i32, i64, i64]),
    }
    try:
        fn = lib.pipescope_records
        fn.restype = sz
        fn.argtypes = [vp, sz, vp]
        lib.pipescope_has_records = True
    except AttributeError:
        lib.pipescope_has_records = False   # an older library: a call a record
    try:
        for name, (res, args) in device.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        lib.pipescope_has_device = True
    except AttributeError:
        lib.pipescope_has_device = False   # an older library: no device activity


def load():
    """The library, or None (reason in last_error)."""
    global _lib, last_error
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if not os.path.exists(path) and os.sep in path:
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
        except (OSError, AttributeError) as e:
            tried.append(f"{path} ({e})")
            continue
        v = lib.pipescope_api_version()
        if v != API_VERSION:
            last_error = f"{path} has API version {v}; this hook knows {API_VERSION}"
            return None
        lib.pipescope_fast = _load_fast(path) if lib.pipescope_has_records else None
        _lib = lib
        return lib
    last_error = ("cannot load libpipescope-probe.so (set PIPESCOPE_LIB; tried "
                  + ", ".join(tried or ["the linker's path"]) + ")")
    return None


def _load_fast(lib_path):
    """The hot path in C (probe/python/pipescope-fast.c) beside the library,
    built for this interpreter (its extension suffix), or None: then the
    hook records in Python.  PIPESCOPE_FAST=0 keeps it in Python."""
    if os.environ.get("PIPESCOPE_FAST") == "0" or os.sep not in lib_path:
        return None
    import importlib.machinery
    import importlib.util
    # only this interpreter's own suffix (".cpython-311-x86_64-linux-gnu.so"),
    # the one the build gives it: never a generic ".so" or ".abi3.so"
    path = os.path.join(os.path.dirname(lib_path), "_pipescope_fast" + importlib.machinery.EXTENSION_SUFFIXES[0])
    if not os.path.exists(path):
        return None
    try:
        spec = importlib.util.spec_from_file_location("_pipescope_fast", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception:   # ImportError: a build for another interpreter
        return None
    # built against the same API and record layout as this package knows
    if getattr(mod, "API_VERSION", None) != API_VERSION or getattr(mod, "RECORD_FIELDS", None) != Rank._FIELDS:
        return None
    return mod


class Rank:
    """One rank of a job, open for recording.  Every method returns quietly
    when the library refuses a record (full rings: dropped and counted)."""

    # pipescope_records' layout (probe/pipescope.h): kind, stage, microbatch,
    # step, start_ns, end_ns, peer, bytes
    _FIELDS = 8
    _RECORD = struct.Struct(f"={_FIELDS}q")
    _SIZE = _RECORD.size
    _CAPACITY = 512           # records a hand-over at most
    _FULL = _FIELDS * _CAPACITY
    _FLUSH_NS = 50_000_000    # after this, the next record hands over

    def __init__(self, lib, handle):
        self._lib = lib
        self._h = handle
        self.now = lib.pipescope_now_ns
        a = lib.pipescope_now_ns()
        b = time.monotonic_ns()
        c = lib.pipescope_now_ns()
        if a <= b <= c:
            self.now = time.monotonic_ns   # the same clock, without a ctypes call
        self._block = lib.pipescope_block
        self._wait = lib.pipescope_wait
        self._transfer = lib.pipescope_transfer
        # records wait in a flat list, PIPESCOPE_RECORD_FIELDS ints each
        # (one extend a record, atomic under the GIL, so no lock a record);
        # a hand-over packs them in one call under a lock of its own
        self._q = None
        if lib.pipescope_has_records:
            self._q = []
            self._buf = bytearray(self._SIZE * self._CAPACITY)
            self._cbuf = (ctypes.c_char * len(self._buf)).from_buffer(self._buf)
            self._addr = ctypes.addressof(self._cbuf)
            self._packers = {}   # records a hand-over -> its Struct
            self._t_flush = self.now()
            self._records = lib.pipescope_records
            self._flushing = threading.Lock()
        self._refused = 0
        # the compiled hot path, when this process has it and no other rank
        # holds it: one queue for its wrappers' records and these methods'
        self.fast = None
        fast = getattr(lib, "pipescope_fast", None)
        if fast is not None and self._q is not None:
            def addr(fn):
                return ctypes.cast(fn, ctypes.c_void_p).value
            if fast.open(handle, addr(lib.pipescope_records), addr(lib.pipescope_now_ns)):
                self.fast = fast
                self._q = None
        self.has_device = lib.pipescope_has_device
        if self.has_device:
            self._push = lib.pipescope_device_push
            self._pop = lib.pipescope_device_pop

    def flush(self):
        """Hands the records queued so far to the library."""
        if self.fast is not None:
            self.fast.flush()
            return
        q = self._q
        if not q:
            return
        with self._flushing:
            size = self._FIELDS
            while q:
                k = min(len(q), size * self._CAPACITY)
                batch = q[:k]
                del q[:k]   # what another thread appends meanwhile stays queued
                n = k // size
                packer = self._packers.get(n)
                if packer is None:
                    packer = self._packers[n] = struct.Struct(f"={k}q")
                try:
                    packer.pack_into(self._buf, 0, *batch)
                except (struct.error, TypeError):
                    n = self._pack_each(batch)   # one bad record: the others still go
                if self._h and n:
                    self._records(self._h, n, self._addr)
            self._t_flush = self.now()

    def _pack_each(self, batch):
        size, o = self._FIELDS, 0
        for i in range(0, len(batch), size):
            try:
                self._RECORD.pack_into(self._buf, o * self._RECORD.size, *batch[i:i + size])
                o += 1
            except (struct.error, TypeError):
                self._refused += 1   # not an integer, or past 64 bits
        return o

    @classmethod
    def open(cls, job, rank, n_ranks, runtime="pytorch", trace=None, listen=None):
        lib = load()
        if lib is None:
            return None, last_error
        err = ctypes.create_string_buffer(512)
        h = lib.pipescope_rank_open(_b(job), rank, n_ranks, _b(runtime), _b(trace), _b(listen),
                                    err, len(err))
        if not h:
            return None, err.value.decode(errors="replace")
        return cls(lib, h), ""

    def close(self):
        if not self._h:
            return ""
        self.flush()
        if self.fast is not None:
            self._refused += self.fast.refused()
            self.fast.close()   # from now on its wrappers record nothing
            self.fast = None
        self._q = None   # from now on a record goes to a NULL rank: nothing
        err = ctypes.create_string_buffer(512)
        rc = self._lib.pipescope_rank_close(self._h, err, len(err))
        self._h = None
        return err.value.decode(errors="replace") if rc != 0 else ""

    def describe(self, schedule, backend, n_ranks, n_microbatches, n_virtual, model, cmdline):
        self._lib.pipescope_describe(self._h, _b(schedule), _b(backend), n_ranks, n_microbatches,
                                     n_virtual, _b(model), _b(cmdline))

    def plan(self, rank, actions):
        """actions: (kind, stage, mb, sub_kind, sub_stage, sub_mb) tuples."""
        flat = [x for a in actions for x in a]
        arr = (ctypes.c_int32 * max(1, len(flat)))(*flat)
        self._lib.pipescope_plan(self._h, rank, len(actions), arr)

    def block(self, kind, stage, mb, step, t0, t1):
        if self.fast is not None:
            self.fast.record(kind, stage, mb, step, t0, t1)
            return
        q = self._q
        if q is None:
            self._block(self._h, kind, stage, mb, step, t0, t1)
            return
        q += (kind, stage, mb, step, t0, t1, -1, 0)
        if len(q) >= self._FULL or t1 - self._t_flush > self._FLUSH_NS:
            self.flush()

    def gc_pause(self, step, t0, t1, thread=0):
        """A collection (SPAN_GC): thread 0 the training thread's, else
        the collecting thread's code (pp-event.h: its native id, bit 31
        where the interpreter has no GIL), carried in the record's bytes
        field.  False where this library cannot carry it (no records: the
        plain call has no field for it), so nothing was recorded."""
        if self.fast is not None:
            self.fast.record(SPAN_GC, -1, -1, step, t0, t1, -1, thread)
            return True
        q = self._q
        if q is None:
            if thread:
                return False
            self._block(self._h, SPAN_GC, -1, -1, step, t0, t1)
            return True
        q += (SPAN_GC, -1, -1, step, t0, t1, -1, thread)
        if len(q) >= self._FULL or t1 - self._t_flush > self._FLUSH_NS:
            self.flush()
        return True

    def dp_block(self, kind, stage, step, t0, t1, nbytes=0):
        """A data-parallel action (SPAN_UNSHARD ... SPAN_WAIT_REDUCE_GRAD) of
        stage with the bytes it moves: through the records, which carry
        bytes (pipescope_block records 0)."""
        if self.fast is not None:
            self.fast.record(kind, stage, -1, step, t0, t1, -1, nbytes)
            return
        q = self._q
        if q is None:
            self._block(self._h, kind, stage, -1, step, t0, t1)
            return
        q += (kind, stage, -1, step, t0, t1, -1, nbytes)
        if len(q) >= self._FULL or t1 - self._t_flush > self._FLUSH_NS:
            self.flush()

    def overlap(self, f_stage, f_mb, b_kind, b_stage, b_mb, step, t0, t1):
        self.flush()
        self._lib.pipescope_overlap(self._h, f_stage, f_mb, b_kind, b_stage, b_mb, step, t0, t1)

    def transfer(self, kind, stage, mb, peer, nbytes, step, t0, t1):
        if self.fast is not None:
            self.fast.record(kind, stage, mb, step, t0, t1, peer, nbytes)
            return
        q = self._q
        if q is None:
            self._transfer(self._h, kind, stage, mb, peer, nbytes, step, t0, t1)
            return
        q += (kind, stage, mb, step, t0, t1, peer, nbytes)
        if len(q) >= self._FULL or t1 - self._t_flush > self._FLUSH_NS:
            self.flush()

    def wait(self, stage, mb, peer, step, t0, t1):
        if self.fast is not None:
            self.fast.record(WAIT, stage, mb, step, t0, t1, peer, 0)
            return
        q = self._q
        if q is None:
            self._wait(self._h, stage, mb, peer, step, t0, t1)
            return
        q += (WAIT, stage, mb, step, t0, t1, peer, 0)
        if len(q) >= self._FULL or t1 - self._t_flush > self._FLUSH_NS:
            self.flush()

    def step(self, step, phase, t):
        if self.fast is not None:
            self.fast.record(STEP_END if phase else STEP_BEGIN, -1, -1, step, t, t)
            return
        q = self._q
        if q is None:
            self._lib.pipescope_step(self._h, step, phase, t)
            return
        # queued after the spans before it, so it follows them
        q += (STEP_END if phase else STEP_BEGIN, -1, -1, step, t, t, -1, 0)
        if phase or len(q) >= self._FULL:
            self.flush()   # a step's end: the live view gets the whole step

    def sample(self, kind, value, step, t):
        """A cumulative counter's integer sample at a block edge
        (COUNTER_RUN_DELAY_NS, COUNTER_PROBE_SELF_NS, COUNTER_ON_CPU_NS):
        queued, in a batch."""
        rec = (COUNTER_RECORD, kind, -1, step, t, t, -1, int(value))
        if self.fast is not None:
            self.fast.record(*rec)
            return
        q = self._q
        if q is None:
            self.counter(kind, value, step, t)
            return
        q += rec
        if len(q) >= self._FULL or t - self._t_flush > self._FLUSH_NS:
            self.flush()

    def counter(self, kind, value, step, t):
        self._lib.pipescope_counter(self._h, kind, float(value), step, t)

    def rank_info(self, host=None):
        self._lib.pipescope_rank_info(self._h, _b(host))

    def place(self, process, coord, size):
        """This process's place on the job's mesh: its global rank, its
        coordinates and the mesh's sizes (pp, dp, tp, cp, ep; shorter
        sequences are filled with 0 and 1).  True when recorded; False on a
        bad place or with a library that has no pipescope_rank_place (it
        then records as before, one process per pipeline rank)."""
        why = getattr(coord, "why", None)   # place.Unread: the job did not say it
        if why is not None:
            return self._unplaced(process, why)
        fn = getattr(self._lib, "pipescope_rank_place", None)
        if fn is None:
            return False
        arr = ctypes.c_int32 * 5
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, arr, arr]
        try:
            c = [int(x) for x in list(coord)[:5]]
            n = [int(x) for x in list(size)[:5]]
            c += [0] * (5 - len(c))
            n += [1] * (5 - len(n))
            return fn(self._h, int(process), arr(*c), arr(*n)) == 0
        except (TypeError, ValueError, OverflowError, ctypes.ArgumentError):
            return False

    def _unplaced(self, process, why):
        """A process whose place the job's groups do not say: its global
        rank in a PROCESS frame flagged "place not read" (the merge numbers
        such replicas in order of global rank), said in one line."""
        fn = getattr(self._lib, "pipescope_rank_unplaced", None)
        done = False
        if fn is not None:
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
            try:
                done = fn(self._h, int(process)) == 0
            except (TypeError, ValueError, OverflowError, ctypes.ArgumentError):
                done = False
        try:
            os.write(2, (f"pipescope: the process's place was not read ({why}): recorded as process "
                         f"{int(process)} of its pipeline rank, place not read"
                         + ("" if done else " (not recorded: this library cannot say it)")
                         + "; recording goes on\n").encode())
        except Exception:
            pass
        return done

    def open_action(self, kind, stage, mb, step, peer, t0, where="", closed=False):
        """What this rank is doing now (trace format 1.10's OPEN frame):
        kind -1 for nothing open.  For the hook's own thread only (it
        writes and flushes).  False where the library cannot say it."""
        fn = getattr(self, "_open_fn", None)
        if fn is None:
            fn = getattr(self._lib, "pipescope_open_action", None)
            if fn is None:
                return False
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 5 + [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
            self._open_fn = fn
        try:
            return fn(self._h, int(kind), int(stage), int(mb), int(step), int(peer), int(t0),
                      (where or "").encode("utf-8", "replace")[:127], 1 if closed else 0) == 0
        except (TypeError, ValueError, OverflowError, ctypes.ArgumentError):
            return False

    def dropped(self):
        self.flush()
        fast = self.fast.refused() if self.fast is not None else 0
        return self._lib.pipescope_dropped(self._h) + self._refused + fast

    # ---- device activity (CUPTI): kernels and copies as children of blocks ----
    def device_start(self):
        """(0, "") when this process's kernels and copies are collected for
        this rank, else (1, why) (-1: no rank)."""
        if not self.has_device:
            return 1, "this libpipescope-probe.so has no device calls"
        err = ctypes.create_string_buffer(512)
        rc = self._lib.pipescope_device_start(self._h, err, len(err))
        why = err.value.decode(errors="replace")
        return rc, why[len("pipescope: "):] if why.startswith("pipescope: ") else why

    def device_push(self, kind, stage, mb, step):
        """Tags this thread's kernels and copies until device_pop; the
        block's id, 0 when nothing is tagged (then no pop is needed)."""
        return self._push(self._h, kind, stage, mb, step)

    def device_pop(self):
        self._pop(self._h)

    def device_block(self, bid, kind, stage, mb, step, t0, t1):
        self._lib.pipescope_device_block(self._h, bid, kind, stage, mb, step, t0, t1)

    def device_overlap(self, f_id, b_id, f_stage, f_mb, b_kind, b_stage, b_mb, step, t0, t1):
        self._lib.pipescope_device_overlap(self._h, f_id, b_id, f_stage, f_mb, b_kind, b_stage, b_mb,
                                           step, t0, t1)


def _b(s):
    return None if s is None else str(s).encode()
