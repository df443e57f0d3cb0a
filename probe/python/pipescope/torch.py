"""pipescope.torch — records a torch.distributed.pipelining job, unchanged.

    import pipescope.torch
    pipescope.torch.instrument()

(or run the job under ``pipescope-cli profile -- ...``, which does this in
every Python process through the environment).  What it wraps, all in
PyTorch's own pipelining code, never the user's:

  * the stage's forward_one_chunk, backward_one_chunk (B, or I with
    full_backward=False) and backward_weight_one_chunk (W): every block of
    every schedule class, the single-stage ones (GPipe, 1F1B) included;
  * the schedules' point-to-point helpers (_batch_p2p: the sends and
    receives posted, with peer and bytes; _wait_batch_p2p: the waits), and
    the stage's get_*_ops to know which stage and micro-batch each op is;
  * the schedule's step(): step markers, the description, the plan (the
    schedule's pipeline_order, or for GPipe and 1F1B the order their
    _step_microbatches ran in the first step);
  * the runtime's profiler label around each action, to tell an overlapped
    forward and backward (DualPipeV's OVERLAP_F_B) as one block with both
    halves;
  * _update_losses (the last stage's losses, once a step, read at the
    step's end) and the optimizers' global step hooks (an OPT block).

Each process is recorded as itself: when it opens its rank it reads, once,
its place on the job's mesh (its global rank, pipeline rank, dp and tp
coordinates; place.py), names its trace file by its global rank
($PIPESCOPE_TRACE.rank<G>: the replicas of one pipeline rank never collide)
and hands the place to the library (Rank.place); its spans, plan and
description stay its pipeline rank's.

On CUDA, blocks are timed by CUDA events on the stage's stream, resolved
once they have passed, never by a synchronisation.  Where the library can
run its CUPTI collector in the process (PIPESCOPE_CUPTI=0: not tried), the
kernels and copies each block launches are tagged with the block's id
(pushed and popped around the wrapped call) and become its children in the
trace, the block timed by them; its backward then runs on the calling thread
(autograd's set_multithreading_enabled(False): the same kernels in the same
order), since CUPTI tags a thread's launches and autograd would launch them
from its own device thread.

It never raises into the job (every error of the hook is caught, said once on
stderr, and recording stops), never changes what the job computes (the
wrapped functions are called with the same arguments and their results and
exceptions pass through untouched), never changes how they can be called (a
wrapper takes (*args, **kwargs) and reads what it records where the
wrapped function's signature puts it, arguments.py), and never waits on a
viewer or a disk (recording is the C probe's rings).
"""

import functools
import os
import socket
import sys
import threading

from . import lib as _lib
from . import place as _place
from .arguments import MISSING, Param

KNOWN = ((2, 11), (2, 15))   # the PyTorch versions whose internals this hook knows

_SCHEDULE_NAMES = {
    "ScheduleGPipe": "GPipe",
    "Schedule1F1B": "1F1B",
    "ScheduleInterleaved1F1B": "Interleaved1F1B",
    "ScheduleLoopedBFS": "LoopedBFS",
    "ScheduleInterleavedZeroBubble": "InterleavedZeroBubble",
    "ScheduleZBVZeroBubble": "ZBV",
    "ScheduleDualPipeV": "DualPipeV",
    "_PipelineScheduleRuntime": "CSV",
}

_KIND_OF = {"F": _lib.F, "B": _lib.B, "I": _lib.I, "W": _lib.W}

_hook = None
_lock = threading.Lock()


def _say(msg):
    try:
        sys.stderr.write(f"pipescope: {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass


class _Hook:
    def __init__(self, torch, dist, stage_mod, sched_mod):
        self.torch = torch
        self.dist = dist
        self.stage_mod = stage_mod
        self.sched = sched_mod
        self.rank = None          # lib.Rank once the first step runs
        self.failed = False       # a failure of the hook: record nothing more
        self.step_index = 0       # steps begun in this process
        self.in_step = 0
        self.described = False
        self.planned = False
        self.observed = []        # first step's compute order (single-stage plans)
        self.op_meta = {}         # id(P2POp) -> (kind, stage, mb, peer, bytes)
        self.work_peer = {}       # id(Work) -> the peer its op talks to
        self.pending_waits = []   # waits before the next block: (peer, t0, t1)
        self.overlap = None       # inside an OVERLAP_F_B action: list of blocks
        self.losses = []
        self.loss_pending = []    # (step, tensors, event) resolved without a sync
        self.opt_t0 = None
        self.p2p_depth = 0
        self.alternate = bool(os.environ.get("PIPESCOPE_BENCH_ALTERNATE"))
        self.calls = 0
        self.paused = False
        # CUDA: blocks timed by events on the stage's stream, resolved
        # once they have passed (a step late is fine), never by a sync
        self.gpu_pending = []     # ("block"|"overlap", ev0, ev1, fields)
        self.gpu_ref = None       # (event, host ns) the GPU's times are counted from
        # CUPTI in the library (device_start at the rank's open): blocks'
        # kernels and copies tagged with the block's id
        self.device = False
        self.single_thread = None  # torch.autograd.set_multithreading_enabled
        # the hot path in C (lib.Rank.fast): its wrappers record while the
        # rank is open, every stage is on the CPU and nothing is paused;
        # else they call the Python wrappers here
        self.fast = None
        self.cpu = False

    # ---- failure: never into the job ----------------------------------------
    def fail(self, what, exc):
        if not self.failed:
            self.failed = True
            self.sync_fast()
            _say(f"recording stopped ({what}: {exc.__class__.__name__}: {exc}); the job runs on")

    def sync_fast(self):
        f = self.fast
        if f is not None:
            # 1: record; 2: a paused step, the calls and nothing else; 0: Python
            f.set_on((2 if self.paused else 1) if self.rank is not None and not self.failed and self.cpu
                     else 0)

    def set_paused(self, paused):
        self.paused = paused
        self.sync_fast()

    # ---- the rank ------------------------------------------------------------
    def open(self, schedule):
        if self.rank is not None or self.failed:
            return self.rank
        stages = self.stages_of(schedule)
        st = stages[0] if stages else None
        group_rank = getattr(schedule, "rank", None)
        if group_rank is None and st is not None:
            group_rank = getattr(st, "group_rank", None)
        group_size = getattr(schedule, "_num_stages", None)
        if st is not None and getattr(st, "group_size", None):
            group_size = st.group_size
        if group_rank is None:
            group_rank = self.dist.get_rank() if self.dist.is_initialized() else 0
        if not group_size:
            group_size = self.dist.get_world_size() if self.dist.is_initialized() else 1
        process, place = self.read_place(st, stages, int(group_rank))
        job = os.environ.get("PIPESCOPE_JOB") or _job_from_launcher()
        trace = os.environ.get("PIPESCOPE_TRACE")
        if trace:
            # by global rank: the replicas of one pipeline rank never collide
            trace = f"{trace}.rank{process}"
        rank, err = _lib.Rank.open(job, int(group_rank), int(group_size), "pytorch", trace,
                                   os.environ.get("PIPESCOPE_RANK_LISTEN"))
        if rank is None:
            self.failed = True
            _say(f"not recording: {err}")
            return None
        self.rank = rank
        rank.rank_info(socket.gethostname())
        place_fn = getattr(rank, "place", None)   # a lib.py before Rank.place: records as before
        if place is not None and place_fn is not None:
            try:
                place_fn(process, *place)   # False: a library without places; the same records
            except Exception as e:
                _say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
        if st is not None and getattr(getattr(st, "device", None), "type", "") == "cuda":
            self.start_device(rank)
        self.cpu = all(getattr(getattr(s, "device", None), "type", "cpu") != "cuda" for s in stages)
        self.fast = rank.fast
        if self.fast is not None:
            self.fast.set_fail(self.fail)
            self.sync_fast()
        return rank

    def read_place(self, st, stages, pipeline_rank):
        """(global rank, (coord, size) or None): this process's place on
        the job's mesh, read once, at the rank's open (place.py).  A place
        that cannot be read is said in one line and not recorded: the
        trace then holds the process as its pipeline rank, as before."""
        try:
            g = self.dist.get_rank() if self.dist.is_initialized() else pipeline_rank
        except Exception:
            g = pipeline_rank
        try:
            place = _place.place_of(self.dist, getattr(st, "group", None),
                                    [s.submod for s in stages if getattr(s, "submod", None) is not None])
        except _place.NoPlace as e:
            _say(f"the process's place not recorded ({e}); recording goes on")
            return g, None
        except Exception as e:
            _say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
            return g, None
        if place is None:
            return g, None
        coord, size = place
        if coord[0] != pipeline_rank:
            _say(f"the process's place not recorded (pipeline rank {coord[0]} in the stage's group, "
                 f"{pipeline_rank} in the schedule); recording goes on")
            return g, None
        if g == pipeline_rank and all(n == 1 for n in size[1:]):
            # one process a pipeline rank, global rank = pipeline rank: the
            # trace says as much without a place, as before (its registry
            # name and frames unchanged)
            return g, None
        return g, place

    def start_device(self, rank):
        """The library's CUPTI collector for this rank, where it can run; one
        line where it cannot, and the blocks keep their CUDA events' times."""
        if os.environ.get("PIPESCOPE_CUPTI") == "0" or not rank.has_device:
            return
        rc, why = rank.device_start()
        if rc != 0:
            _say(f"kernels and copies not recorded ({why}); blocks timed by CUDA events")
            return
        self.single_thread = getattr(self.torch.autograd, "set_multithreading_enabled", None)
        self.device = True

    def stages_of(self, schedule):
        if hasattr(schedule, "_stages"):
            return list(schedule._stages)
        if hasattr(schedule, "_stage"):
            return [schedule._stage]
        return []

    def describe(self, schedule):
        self.described = True
        torch = self.torch
        stages = self.stages_of(schedule)
        cls = type(schedule).__name__
        name = _SCHEDULE_NAMES.get(cls, cls)
        st = stages[0] if stages else None
        n_ranks = getattr(st, "group_size", 1) if st is not None else 1
        n_stages = getattr(schedule, "_num_stages", None) or (getattr(st, "num_stages", n_ranks))
        v = max(1, n_stages // max(1, n_ranks))
        m = int(getattr(schedule, "_n_microbatches", 0))
        backend = "cpu"
        if st is not None and getattr(st, "device", None) is not None and st.device.type == "cuda":
            backend = "cuda"
        try:
            pg = self.dist.get_backend() if self.dist.is_initialized() else "none"
        except Exception:
            pg = "?"
        params = []
        for s in stages:
            try:
                n = sum(p.numel() for p in s.submod.parameters())
            except Exception:
                n = 0
            params.append(f"s{s.stage_index} {_count(n)}")
        stage_map = ""
        order = getattr(schedule, "pipeline_order", None)
        if isinstance(order, dict) and isinstance(schedule, self.sched.PipelineScheduleMulti):
            owner = {}
            for r, acts in order.items():
                for a in acts:
                    if a is not None and getattr(a, "stage_index", -1) >= 0:
                        owner.setdefault(a.stage_index, r)
            stage_map = " stages->ranks " + ",".join(f"{s}:{owner[s]}" for s in sorted(owner))
        rank_no = getattr(schedule, "rank", getattr(st, "group_rank", 0) if st is not None else 0)
        model = (f"PyTorch {torch.__version__} {pg} {cls}{stage_map}; params of rank {rank_no}'s stages "
                 + " ".join(params))
        cmd = " ".join(sys.argv)
        self.rank.describe(name, backend, int(n_ranks), m, int(v), model[:255], cmd[:1023])
        self.write_plan(schedule)

    def write_plan(self, schedule):
        order = getattr(schedule, "pipeline_order", None)
        rank = getattr(schedule, "rank", None)
        # single-stage schedules run _step_microbatches, not their
        # pipeline_order (a visualizer's, which may differ): their plan is
        # the order step 0 ran
        if (not isinstance(schedule, self.sched.PipelineScheduleMulti) or not isinstance(order, dict)
                or rank is None or rank not in order):
            return False
        acts = []
        for a in order[rank]:
            t = _plan_action(a)
            if t is not None:
                acts.append(t)
        self.rank.plan(int(rank), acts)
        self.planned = True
        return True

    # ---- blocks --------------------------------------------------------------
    def block(self, kind, stage, mb, t0, t1):
        r = self.rank
        if r is None:
            return
        si = self.step_index
        step = si - 1 if si > 0 else 0
        waits = self.pending_waits
        if waits:
            for peer, w0, w1 in waits:
                r.wait(stage, mb, peer, step, w0, w1)
            waits.clear()
        if self.overlap is not None:
            self.overlap.append((kind, stage, mb, t0, t1))
            return
        r.block(kind, stage, mb, step, t0, t1)
        if si == 1 and self.in_step:
            self.observed.append((kind, stage, mb, -1, -1, -1))

    # ---- CUDA: events around each block -------------------------------------
    def gpu_events(self):
        torch = self.torch
        if self.gpu_ref is None:
            # once: the origin of the GPU's clock on the host's (one sync,
            # before the first block, never again)
            ref = torch.cuda.Event(enable_timing=True)
            ref.record()
            ref.synchronize()
            self.gpu_ref = (ref, self.rank.now())
        e0 = torch.cuda.Event(enable_timing=True)
        e0.record()
        return e0

    def gpu_block(self, kind, stage, mb, e0, bid=0):
        e1 = self.torch.cuda.Event(enable_timing=True)
        e1.record()
        step = self.step_index - 1 if self.step_index > 0 else 0
        if self.pending_waits:
            r = self.rank
            for peer, w0, w1 in self.pending_waits:
                r.wait(stage, mb, peer, step, w0, w1)
            self.pending_waits.clear()
        if self.overlap is not None:
            self.overlap.append((kind, stage, mb, e0, e1, bid))
            return
        self.gpu_pending.append(("block", e0, e1, (bid, kind, stage, mb, step)))
        if self.in_step and self.step_index == 1:
            self.observed.append((kind, stage, mb, -1, -1, -1))
        if len(self.gpu_pending) > 4096:
            self.resolve_gpu()

    def resolve_gpu(self, final=False):
        """Records the blocks whose end event has passed, in order."""
        r = self.rank
        if r is None or self.gpu_ref is None:
            self.gpu_pending.clear()
            return
        ref, t_ref = self.gpu_ref
        done = 0
        for tag, e0, e1, a in self.gpu_pending:
            if not final and not e1.query():
                break
            if final:
                e1.synchronize()
            t0 = t_ref + int(ref.elapsed_time(e0) * 1e6)
            t1 = t_ref + int(ref.elapsed_time(e1) * 1e6)
            # with a block id the library times the block by its kernels
            # once CUPTI has handed them over (their work has passed)
            if tag == "block":
                bid, kind, stage, mb, step = a
                if bid:
                    r.device_block(bid, kind, stage, mb, step, t0, t1)
                else:
                    r.block(kind, stage, mb, step, t0, t1)
            else:
                bf, bb, fs, fm, bk, bs, bm, step = a
                if bf or bb:
                    r.device_overlap(bf, bb, fs, fm, bk, bs, bm, step, t0, t1)
                else:
                    r.overlap(fs, fm, bk, bs, bm, step, t0, t1)
            done += 1
        del self.gpu_pending[:done]

    def overlap_end(self, blocks):
        r = self.rank
        if r is None or not blocks:
            return
        step = self.step_index - 1 if self.step_index > 0 else 0
        if len(blocks[0]) == 6:
            # CUDA: (kind, stage, mb, e0, e1, block id); the pair spans the
            # first's start to the second's end
            f = [b for b in blocks if b[0] == _lib.F]
            bw = [b for b in blocks if b[0] in (_lib.B, _lib.I)]
            if f and bw:
                self.gpu_pending.append(("overlap", blocks[0][3], blocks[-1][4],
                                         (f[0][5], bw[0][5], f[0][1], f[0][2], bw[0][0], bw[0][1],
                                          bw[0][2], step)))
            else:
                for kind, stage, mb, e0, e1, bid in blocks:
                    self.gpu_pending.append(("block", e0, e1, (bid, kind, stage, mb, step)))
            return
        f = [b for b in blocks if b[0] == _lib.F]
        bw = [b for b in blocks if b[0] in (_lib.B, _lib.I)]
        rest = [b for b in blocks if b not in f[:1] and b not in bw[:1]]
        if f and bw:
            t0 = min(b[3] for b in blocks[:2])
            t1 = max(b[4] for b in blocks[:2])
            r.overlap(f[0][1], f[0][2], bw[0][0], bw[0][1], bw[0][2], step, t0, t1)
        else:
            rest = blocks
        for kind, stage, mb, t0, t1 in rest:
            r.block(kind, stage, mb, step, t0, t1)

    # ---- steps ---------------------------------------------------------------
    def step_begin(self, schedule):
        r = self.open(schedule)
        if r is None:
            return None
        if not self.described:
            self.describe(schedule)
        self.resolve_losses(final=False)
        self.losses = []
        idx = self.step_index
        self.step_index += 1
        if self.fast is not None:
            self.fast.set_step(idx)
            if idx == 0:
                self.fast.set_observed(self.observed)   # GPipe's and 1F1B's plan
        r.step(idx, 0, r.now())
        return idx

    def step_end(self, schedule, idx):
        r = self.rank
        if r is None:
            return
        if self.gpu_pending:
            self.resolve_gpu()
        if self.fast is not None:
            self.fast.set_observed(None)
        r.step(idx, 1, r.now())
        if idx == 0 and self.observed and not self.planned:
            # GPipe, 1F1B: no pipeline_order; the plan is what step 0 ran
            self.rank.plan(int(getattr(self.stages_of(schedule)[0], "group_rank", 0)), self.observed)
            self.planned = True
        self.observed = []
        if self.losses:
            self.queue_losses(idx, self.losses)
        self.losses = []

    def queue_losses(self, idx, tensors):
        torch = self.torch
        try:
            ts = [t for t in tensors if hasattr(t, "detach")]
            if not ts:
                return
            if not ts[0].is_cuda:
                # read now (item() needs no detach): nothing kept, no op run
                r = self.rank
                vals = [t.item() if t.numel() == 1 else float(t.detach().float().mean()) for t in ts]
                if r is not None:
                    r.counter(_lib.LOSS, sum(vals) / len(vals), idx, r.now())
                return
            # CUDA, no sync: a copy on the stream, read once its event has passed
            host = [t.detach().to("cpu", non_blocking=True) for t in ts]
            ev = torch.cuda.Event()
            ev.record()
            self.loss_pending.append((idx, host, ev))
            self.resolve_losses(final=False)
        except Exception as e:
            self.fail("loss", e)

    def resolve_losses(self, final):
        r = self.rank
        keep = []
        for idx, ts, ev in self.loss_pending:
            if ev is not None and not final and not ev.query():
                keep.append((idx, ts, ev))
                continue
            if ev is not None and final:
                ev.synchronize()
            # one element (a scalar loss): item() reads it without the
            # two tensor operations a mean takes
            vals = [t.item() if t.numel() == 1 else float(t.float().mean()) for t in ts]
            if r is not None and vals:
                r.counter(_lib.LOSS, sum(vals) / len(vals), idx, r.now())
        self.loss_pending = keep

    def close(self):
        r = self.rank
        if r is None:
            return
        try:
            self.resolve_losses(final=True)
            self.resolve_gpu(final=True)
        except Exception:
            pass
        self.rank = None
        self.sync_fast()
        err = r.close()
        if err:
            _say(err[len("pipescope: "):] if err.startswith("pipescope: ") else err)


def _count(n):
    if n >= 1e9:
        return f"{n / 1e9:.2f}G"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return str(n)


def _plan_action(a):
    """A PyTorch _Action as the C API's 6 integers, or None (bubbles, comms)."""
    if a is None:
        return None
    ct = getattr(a.computation_type, "value", str(a.computation_type))
    subs = getattr(a, "sub_actions", None)
    if ct == "OVERLAP_F_B" and subs:
        f = [s for s in subs if getattr(s.computation_type, "value", "") == "F"]
        b = [s for s in subs if getattr(s.computation_type, "value", "") in ("B", "I")]
        if f and b:
            return (_lib.OVERLAP_F_B, f[0].stage_index, f[0].microbatch_index,
                    _KIND_OF[b[0].computation_type.value], b[0].stage_index, b[0].microbatch_index)
        return None
    if ct in _KIND_OF and a.microbatch_index is not None:
        return (_KIND_OF[ct], a.stage_index, a.microbatch_index, -1, -1, -1)
    return None


def _job_from_launcher():
    """One name for every rank of a job started without `pipescope-cli
    profile`: torchrun's run id, else the rendezvous address."""
    rid = os.environ.get("TORCHELASTIC_RUN_ID")
    if rid and rid != "none":
        return f"torch-{rid}"[:60]
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        return f"torch-{addr}-{port}"[:60]
    return None


# ---- the wrappers: the original runs exactly once, its result and exceptions untouched ----
#
# Each takes (*args, **kwargs) and calls the original with them unchanged
# (arguments.py): a caller may call a wrapped function every way it may call
# the function itself.  What a wrapper records it reads through Params found
# in the original's signature when it is made; what a call does not give is
# recorded as -1, or not at all.

class _Block:
    """A stage's compute call as a block: its kind (a backward's is I where
    full_backward is false, else B) and where PyTorch puts what it reads:
    the stage (self), the micro-batch and, for a backward, full_backward."""

    def __init__(self, kind, mb, full=False):
        self.kind, self.mb, self.full = kind, mb, full

    def params(self, orig):
        ps = [Param(orig, "self", 0), Param(orig, self.mb, 1)]
        if self.full:
            ps.append(Param(orig, "full_backward", 3, True))
        return ps

    def reader(self, orig):
        """read(args, kwargs) -> (stage, kind, stage_index, mb) of a call of orig."""
        ps = self.params(orig)
        st, chunk, full = ps[0], ps[1], ps[2] if len(ps) > 2 else None
        kind = self.kind

        def read(args, kwargs):
            stage = st.of(args, kwargs)
            k = kind
            if full is not None:
                f = full.of(args, kwargs)
                if f is not MISSING and not f:
                    k = _lib.I
            mb = chunk.of(args, kwargs)
            return (stage, k, -1 if stage is MISSING else int(stage.stage_index),
                    -1 if mb is MISSING else int(mb))
        return read


_fwd_kind = _Block(_lib.F, "fwd_chunk_id")
_bwd_kind = _Block(_lib.B, "bwd_chunk_id", full=True)
_w_kind = _Block(_lib.W, "bwd_chunk_id")


def _wrap_block(hook, orig, block):
    read = block.reader(orig)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.rank is None or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        err = None
        try:
            stage, kind, si, mb = read(args, kwargs)
            cuda = getattr(getattr(stage, "device", None), "type", "") == "cuda"
        except Exception as e:
            err = e
        if err is not None:
            # the call runs outside our except clause, so the job's own
            # exceptions carry no context of ours; said once the call has
            # passed: a call the function refuses is the job's own error
            out = orig(*args, **kwargs)
            hook.fail("a block", err)
            return out
        if cuda:
            # host time is launch time: the GPU's comes from events
            e0 = None
            try:
                e0 = hook.gpu_events()
            except Exception as e:
                hook.fail("a CUDA event", e)
            if hook.device and e0 is not None:
                return _run_tagged(hook, orig, kind, si, mb, e0, args, kwargs)
            out = orig(*args, **kwargs)
            if e0 is not None and not hook.failed:
                try:
                    hook.gpu_block(kind, si, mb, e0)
                except Exception as e:
                    hook.fail("a block", e)
            return out
        now = hook.rank.now
        t0 = now()
        out = orig(*args, **kwargs)
        try:
            hook.block(kind, si, mb, t0, now())
        except Exception as e:
            hook.fail("a block", e)
        return out
    return wrapper


def _run_tagged(hook, orig, kind, si, mb, e0, args, kwargs):
    """orig as one block whose kernels and copies CUPTI tags with its id:
    pushed before, popped after, whatever orig does; a backward on this
    thread.  orig runs once; its result and exceptions pass through."""
    bid, single = 0, None
    try:
        bid = hook.rank.device_push(kind, si, mb, hook.step_index - 1 if hook.step_index > 0 else 0)
        if bid and kind != _lib.F and hook.single_thread is not None:
            single = hook.single_thread(False)   # set now, restored by __exit__
    except Exception as e:
        hook.fail("a block's tag", e)
    try:
        out = orig(*args, **kwargs)
    finally:
        if single is not None:
            try:
                single.__exit__(None, None, None)
            except Exception as e:
                hook.fail("autograd's threads", e)
        if bid:
            try:
                hook.rank.device_pop()
            except Exception as e:
                hook.fail("a block's tag", e)
    if not hook.failed:
        try:
            hook.gpu_block(kind, si, mb, e0, bid)
        except Exception as e:
            hook.fail("a block", e)
    return out


def _ops_params(orig, mb):
    """get_*_ops' stage and micro-batch (mb: PyTorch's name of it)."""
    return [Param(orig, "self", 0), Param(orig, mb, 1)]


def _wrap_get_ops(hook, orig, kind, mb_name):
    st, chunk = _ops_params(orig, mb_name)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        ops = orig(*args, **kwargs)
        if hook.rank is not None and not hook.failed and not hook.paused:
            try:
                if ops:
                    stage, mb = st.of(args, kwargs), chunk.of(args, kwargs)
                    si = -1 if stage is MISSING else int(stage.stage_index)
                    mb = -1 if mb is MISSING else int(mb)
                    meta = hook.op_meta
                    for op in ops:
                        t = getattr(op, "tensor", None)
                        peer = getattr(op, "peer", None)
                        meta[id(op)] = (kind, si, mb, -1 if peer is None else int(peer),
                                        t.numel() * t.element_size() if t is not None else 0)
                    if len(meta) > 65536:
                        meta.clear()
            except Exception as e:
                hook.fail("p2p ops", e)
        return ops
    return wrapper


def _wrap_batch_p2p(hook, orig):
    ops_of = Param(orig, "p2p_ops", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.p2p_depth or hook.paused:
            return orig(*args, **kwargs)
        hook.p2p_depth += 1
        try:
            t0 = r.now()
            works = orig(*args, **kwargs)
        finally:
            hook.p2p_depth -= 1
        try:
            t1 = r.now()
            p2p_ops = ops_of.of(args, kwargs)
            pop = hook.op_meta.pop
            step = hook.step_index - 1 if hook.step_index > 0 else 0
            known = []
            for op in (() if p2p_ops is MISSING else p2p_ops):
                m = pop(id(op), None)
                if m is not None:
                    kind, stage, mb, peer, nbytes = m
                    r.transfer(kind, stage, mb, peer, nbytes, step, t0, t1)
                    known.append(peer)
            # a Work an op: its wait learns the peer (only when they pair up)
            if known and isinstance(works, list) and len(works) == len(known):
                peers = hook.work_peer
                for w, peer in zip(works, known):
                    peers[id(w)] = peer
                if len(peers) > 65536:
                    peers.clear()
        except Exception as e:
            hook.fail("a transfer", e)
        return works
    return wrapper


def _wrap_wait(hook, orig):
    work_of = Param(orig, "work", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        t0 = r.now()
        out = orig(*args, **kwargs)
        try:
            t1 = r.now()
            peer = -1
            work = work_of.of(args, kwargs)
            if isinstance(work, list):
                pop = hook.work_peer.pop
                for w in work:
                    p = pop(id(w), None)
                    if p is not None:
                        peer = p
            # charged to the block that comes next (its stage and micro-batch)
            hook.pending_waits.append((peer, t0, t1))
        except Exception as e:
            hook.fail("a wait", e)
        return out
    return wrapper


def _wrap_step(hook, orig):
    schedule_of = Param(orig, "self", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.failed or hook.in_step:
            return orig(*args, **kwargs)
        schedule = schedule_of.of(args, kwargs)
        if schedule is MISSING:
            return orig(*args, **kwargs)
        if hook.alternate:
            # the benchmark's paired steps: every other step unrecorded
            # (PIPESCOPE_BENCH_ALTERNATE), the optimizer's after it too
            hook.calls += 1
            hook.set_paused(hook.calls % 2 == 0)
            if hook.paused:
                return orig(*args, **kwargs)
        idx = None
        try:
            idx = hook.step_begin(schedule)
        except Exception as e:
            hook.fail("a step", e)
        hook.in_step += 1
        try:
            return orig(*args, **kwargs)
        finally:
            hook.in_step -= 1
            if idx is not None and not hook.failed:
                try:
                    hook.step_end(schedule, idx)
                except Exception as e:
                    hook.fail("a step's end", e)
    return wrapper


def _wrap_update_losses(hook, orig):
    """_update_losses, once a step: the step's losses before it clears
    them (every PyTorch the hook knows has it)."""
    schedule_of = Param(orig, "self", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.rank is not None and not hook.failed:
            try:
                losses = getattr(schedule_of.of(args, kwargs), "_internal_losses", None)
                if losses:
                    hook.losses.extend(losses)
            except Exception as e:
                hook.fail("the loss", e)
        return orig(*args, **kwargs)
    return wrapper


class _Label:
    """The runtime's profiler label around an action; an OVERLAP_F_B one
    gathers the blocks run inside it into one overlapped block.  Anything
    else asked of it is the label's own."""

    def __init__(self, hook, orig, name, args, kwargs):
        self.hook = hook
        self.inner = orig(*args, **kwargs)
        self.mine = (hook.rank is not None and not hook.failed and isinstance(name, str)
                     and name.endswith("OVERLAP_F_B") and hook.overlap is None)

    def __getattr__(self, name):
        try:
            inner = self.__dict__["inner"]
        except KeyError:
            # not yet set (copy, pickle): no attribute, as for any object
            raise AttributeError(name) from None
        return getattr(inner, name)

    def __call__(self, *args, **kwargs):
        return self.inner(*args, **kwargs)   # as a decorator: the label's own

    def __enter__(self):
        out = self.inner.__enter__()
        if self.mine:
            self.hook.overlap = []
            if self.hook.fast is not None:
                self.hook.fast.set_overlap(self.hook.overlap)
        return out

    def __exit__(self, *exc):
        if self.mine:
            blocks, self.hook.overlap = self.hook.overlap, None
            if self.hook.fast is not None:
                self.hook.fast.set_overlap(None)
            try:
                self.hook.overlap_end(blocks or [])
            except Exception as e:
                self.hook.fail("an overlapped block", e)
        return self.inner.__exit__(*exc)


def _wrap_label(hook, orig):
    name_of = Param(orig, "name", 0)

    # updated=(): orig is a class, whose __dict__ is no function's
    @functools.wraps(orig, updated=())
    def record_function(*args, **kwargs):
        return _Label(hook, orig, name_of.of(args, kwargs), args, kwargs)
    return record_function


def _opt_hooks(hook, torch):
    # PyTorch calls them as hook(optimizer, args, kwargs): its own
    # convention, positional, whatever the step was called with
    def pre(optimizer, args, kwargs):
        r = hook.rank
        if r is not None and not hook.failed and not hook.paused:
            try:
                hook.opt_t0 = r.now()
            except Exception as e:
                hook.fail("the optimizer", e)

    def post(optimizer, args, kwargs):
        r = hook.rank
        if r is not None and not hook.failed and hook.opt_t0 is not None:
            try:
                r.block(_lib.OPT, -1, -1, max(0, hook.step_index - 1), hook.opt_t0, r.now())
            except Exception as e:
                hook.fail("the optimizer", e)
        hook.opt_t0 = None

    import importlib
    reg = importlib.import_module("torch.optim.optimizer")
    reg.register_optimizer_step_pre_hook(pre)
    reg.register_optimizer_step_post_hook(post)


_BLOCKS = (("forward_one_chunk", "forward", _fwd_kind),
           ("backward_one_chunk", "backward", _bwd_kind),
           ("backward_weight_one_chunk", "weight", _w_kind))
_GET_OPS = (("get_fwd_send_ops", _lib.SEND_F, "fwd_chunk_id"), ("get_bwd_send_ops", _lib.SEND_B, "bwd_chunk_id"),
            ("get_fwd_recv_ops", _lib.RECV_F, "fwd_chunk_id"), ("get_bwd_recv_ops", _lib.RECV_B, "bwd_chunk_id"))


def _install(hook, base, sched, fast):
    """Wraps PyTorch's pipelining (base: _PipelineStageBase; sched: the
    schedules module) for hook; fast: the compiled wrappers, or None."""

    def hot(role, orig, wrapper, params, kind=-1):
        """The C wrapper (pipescope-fast.c) where the build has one, the
        Python one its fallback; else the Python one.  params: where the C
        one reads what it records, found in orig's signature now."""
        if fast is None:
            return wrapper
        return fast.wrap(role, orig, wrapper, tuple(p.spec() for p in params), kind)

    for name, role, block in _BLOCKS:
        orig = getattr(base, name)
        setattr(base, name, hot(role, orig, _wrap_block(hook, orig, block), block.params(orig)))
    for name, kind, mb in _GET_OPS:
        orig = getattr(base, name)
        setattr(base, name, hot("get_ops", orig, _wrap_get_ops(hook, orig, kind, mb), _ops_params(orig, mb), kind))
    orig = sched._batch_p2p
    sched._batch_p2p = hot("batch_p2p", orig, _wrap_batch_p2p(hook, orig), [Param(orig, "p2p_ops", 0)])
    orig = sched._wait_batch_p2p
    sched._wait_batch_p2p = hot("wait", orig, _wrap_wait(hook, orig), [Param(orig, "work", 0)])
    if hasattr(sched, "record_function"):
        orig = sched.record_function
        sched.record_function = hot("label", orig, _wrap_label(hook, orig), [Param(orig, "name", 0)])
    for name in dir(sched):
        cls = getattr(sched, name)
        if isinstance(cls, type) and issubclass(cls, sched._PipelineSchedule) and "step" in cls.__dict__:
            setattr(cls, "step", _wrap_step(hook, cls.__dict__["step"]))
    base_sched = sched._PipelineSchedule.__dict__
    if "_update_losses" in base_sched:
        sched._PipelineSchedule._update_losses = _wrap_update_losses(hook, base_sched["_update_losses"])


def _check(torch, stage_mod, sched):
    """None when this PyTorch's internals are the ones the hook knows, else
    the reason (one line)."""
    try:
        major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return f"cannot read PyTorch's version {torch.__version__!r}"
    lo, hi = KNOWN
    if not (lo <= (major, minor) <= hi) and not os.environ.get("PIPESCOPE_TORCH_ANY"):
        return (f"PyTorch {torch.__version__} is not one this hook knows "
                f"({lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}); set PIPESCOPE_TORCH_ANY=1 to try")
    base = getattr(stage_mod, "_PipelineStageBase", None)
    need = [(base, n) for n in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk",
                                "get_fwd_send_ops", "get_bwd_send_ops", "get_fwd_recv_ops",
                                "get_bwd_recv_ops")]
    need += [(sched, n) for n in ("_batch_p2p", "_wait_batch_p2p", "PipelineScheduleSingle",
                                  "PipelineScheduleMulti", "_PipelineSchedule")]
    missing = [n for obj, n in need if obj is None or not hasattr(obj, n)]
    if missing:
        return f"PyTorch {torch.__version__}'s pipelining lacks {', '.join(missing)}"
    return None


def instrument():
    """Records this process's pipeline schedules from now on.  Idempotent;
    returns True when recording is set up, False (having said why in one
    line) when the job is left untouched."""
    global _hook
    with _lock:
        if _hook is not None:
            return True
        try:
            import torch
            import torch.distributed as dist
            from torch.distributed.pipelining import schedules as sched
            from torch.distributed.pipelining import stage as stage_mod
        except Exception as e:
            _say(f"not recording: cannot import torch.distributed.pipelining ({e})")
            return False
        why = _check(torch, stage_mod, sched)
        if why is not None:
            _say(f"not recording: {why}; the job runs untouched")
            return False
        if _lib.load() is None:
            _say(f"not recording: {_lib.last_error}")
            return False
        hook = _Hook(torch, dist, stage_mod, sched)
        try:
            _install(hook, stage_mod._PipelineStageBase, sched, _lib.load().pipescope_fast)
        except Exception as e:
            # what was wrapped stays wrapped, passing every call through:
            # the hook is failed, and installed once, never again
            hook.fail("installing the hook", e)
            _hook = hook
            return False
        try:
            _opt_hooks(hook, torch)
        except Exception as e:
            _say(f"optimizer steps not recorded ({e})")
        import atexit
        atexit.register(_close)
        _hook = hook
        return True


def _close():
    h = _hook
    if h is not None:
        try:
            h.close()
        except Exception as e:
            _say(f"closing the trace: {e}")


def close():
    """Ends recording now (the trace file is complete); atexit does it too."""
    _close()
