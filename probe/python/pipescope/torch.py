"""pipescope.torch — records a torch.distributed.pipelining job, unchanged.

The adapter for PyTorch's pipelining: it knows its schedule classes and
wraps their methods; what it sees it hands to core.Recorder (the rank, the
records, the plan, CUDA timing: what every framework's adapter shares).

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
    step's end) and the optimizers' global step hooks (an OPT block);
  * the schedule's loss call (_maybe_compute_loss, which the schedules
    call after forward_one_chunk returns: outside the block) as the last
    stage's LOSS block with its stage and micro-batch (trace format 1.9);
  * host work between blocks (issue 29, host.py): _split_inputs (the
    batch into micro-batches) and torch.optim.Optimizer.zero_grad (of the
    step it precedes), as HOST_DATA and HOST_ZERO_GRAD spans; the schedule's own code
    between wrapped calls (HOST_SCHEDULE), the training thread's GC pauses,
    and its run-queue delay and the hook's own time at block edges;
  * data parallelism (issue 27): FSDPModule.unshard/reshard inside a step
    (UNSHARD, RESHARD), the runtime's _assert_unsharded where it waits for
    an UNSHARD's all-gathers (an UNSHARD block too: data-parallel
    communication, not bubble), the stage's gradient reduction
    (REDUCE_GRAD, WAIT_REDUCE_GRAD), and backward_maybe_with_nosync of a
    DDP stage's last backward: post-accumulate-grad hooks, there for that
    call only, mark when the last gradient is ready; the block ends there
    and the rest of the call (DDP finishing its all-reduce) is a
    REDUCE_GRAD;
  * in a job with a tp dimension > 1, the functional collectives' and
    torch.distributed's collectives (module attributes, looked up at each
    call by DTensor and by the job), counted inside a step: one
    COLLECTIVE_CALLS and one COLLECTIVE_BYTES value a step.

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
import threading

from . import core as _core
from . import host as _host
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
# the data-parallel actions, by PyTorch's names (its _ComputationType values)
_DP_KIND_OF = {"UNSHARD": _lib.SPAN_UNSHARD, "RESHARD": _lib.SPAN_RESHARD,
               "REDUCE_GRAD": _lib.SPAN_REDUCE_GRAD, "WAIT_REDUCE_GRAD": _lib.SPAN_WAIT_REDUCE_GRAD}

_hook = None
_lock = threading.Lock()
_say = _core.say


class _Hook(_core.Recorder):
    """The recording of this process (core.Recorder) as PyTorch's schedules
    drive it: its rank opened, described and planned from the schedule."""

    def __init__(self, torch, dist, stage_mod, sched_mod):
        super().__init__(torch)
        self.dist = dist
        self.stage_mod = stage_mod
        self.sched = sched_mod
        self.op_meta = {}         # id(P2POp) -> (kind, stage, mb, peer, bytes)
        self.work_peer = {}       # id(Work) -> its op's (kind, stage, mb, peer, bytes)
        self.p2p_depth = 0
        # data parallelism (issue 27), read at the rank's open: the stages
        # wrapped in DDP or FSDP2, and each FSDP2 module of a stage as
        # (stage, first, last) in the order the runtime's UNSHARD/RESHARD
        # reach them (stage.submod.modules()); the bytes are read at each
        # call (_fsdp_param_bytes)
        self.dp_stages = set()
        self.fsdp = {}
        self.fsdp_run = {}        # kind -> [stage, t0, t1, bytes]: one action's calls so far
        self.dp_depth = 0         # inside a recorded data-parallel action of the schedule's
        # FSDP2's own collectives (foreach_all_gather, its copy-out, foreach_reduce):
        # id(FSDPParam) -> its stage, read at the open
        self.fsdp_params = {}
        self.dp_moved = 0         # bytes FSDP2's collectives moved so far inside the schedule's actions
        self.ddp = {}             # DDP stage -> the bytes its gradients' all-reduce takes in
        # tensor-parallel collectives (jobs with tp > 1): counted inside a
        # step, written as the step's COLLECTIVE_CALLS/_BYTES at its end
        self.coll_on = False
        self.coll_depth = 0       # inside a counted collective: the calls it makes are its own
        self.coll_calls = 0
        self.coll_bytes = 0

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
        cuda = st is not None and getattr(getattr(st, "device", None), "type", "") == "cuda"
        cpu = all(getattr(getattr(s, "device", None), "type", "cpu") != "cuda" for s in stages)
        rank = self.open_rank(int(group_rank), int(group_size), "pytorch", process, place, cuda, cpu)
        if rank is not None:
            try:
                self.map_dp(stages)
            except Exception as e:
                _say(f"data-parallel actions not recorded ({e.__class__.__name__}: {e}); recording goes on")
                self.dp_stages, self.fsdp, self.ddp, self.fsdp_params = set(), {}, {}, {}
            if place is not None and len(place[1]) > 2 and place[1][2] > 1:
                try:
                    _install_collectives(self)
                except Exception as e:
                    _say(f"tensor-parallel collectives not counted ({e.__class__.__name__}: {e}); "
                         "recording goes on")
        return rank

    def map_dp(self, stages):
        """Which stages are data-parallel (DDP, FSDP2), and their FSDP2
        modules and parameters: read once, at the rank's open."""
        fsdp_cls = _fsdp_module()
        ddp_cls = getattr(getattr(self.torch, "nn", None), "parallel", None)
        ddp_cls = getattr(ddp_cls, "DistributedDataParallel", None)
        for st in stages:
            mod = getattr(st, "submod", None)
            si = int(st.stage_index)
            if ddp_cls is not None and isinstance(mod, ddp_cls):
                self.dp_stages.add(si)
                self.ddp[si] = sum(p.numel() * p.element_size() for p in mod.parameters() if p.requires_grad)
            elif fsdp_cls is not None and isinstance(mod, fsdp_cls):
                self.dp_stages.add(si)
                mods = [m for m in mod.modules() if isinstance(m, fsdp_cls)]
                for i, m in enumerate(mods):
                    self.fsdp[id(m)] = (si, i == 0, i == len(mods) - 1)
                    for fp in _fsdp_params(m):
                        self.fsdp_params[id(fp)] = si

    def fsdp_call(self, kind, m, t0, t1, moved=None):
        """One FSDP2 module's unshard or reshard call, part of its stage's
        UNSHARD or RESHARD action: the runtime calls every FSDP2 module of
        the stage in turn, the stage's own first; the action is one block
        from the first call's start to the last's end.  moved: the bytes
        its all-gathers moved (an unshard of a module already unsharded
        moves none); None: the module's parameters' size (a reshard's)."""
        info = self.fsdp.get(id(m))
        if info is None:
            return
        si, first, last = info
        nbytes = moved if moved is not None else _fsdp_bytes(m)
        run = self.fsdp_run.get(kind)
        if run is not None and (first or run[0] != si):
            self.fsdp_flush(kind)
            run = None
        if run is None:
            run = self.fsdp_run[kind] = [si, t0, t1, 0]
        run[2] = t1
        run[3] += nbytes
        if last:
            self.fsdp_flush(kind)

    def fsdp_flush(self, kind=None):
        for k in ([kind] if kind is not None else list(self.fsdp_run)):
            run = self.fsdp_run.pop(k, None)
            if run is not None:
                self.dp_block(k, run[0], run[1], run[2], run[3])

    def read_place(self, st, stages, pipeline_rank):
        """(global rank, (coord, size) or None): this process's place on
        the job's mesh, read once, at the rank's open (place.py).  A place
        that cannot be read is said in one line and not recorded: the
        trace then holds the process as its pipeline rank, as before."""
        g = _core.global_rank(self.dist, pipeline_rank)
        try:
            place = _place.place_of(self.dist, getattr(st, "group", None),
                                    [s.submod for s in stages if getattr(s, "submod", None) is not None])
        except _place.NoPlace as e:
            _say(f"the process's place not recorded ({e}); recording goes on")
            return g, None
        except Exception as e:
            _say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
            return g, None
        return g, self.settle_place(g, place, pipeline_rank)

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
            params.append(f"s{s.stage_index} {_core.count(n)}")
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
        self.describe_job(name, backend, int(n_ranks), m, int(v), model)
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
        # the runtime's lowered order, with FSDP's and the gradient
        # reduction's actions, is what it runs: the plan where it has one
        # (those actions kept for the stages that are data-parallel: the
        # lowering adds them to every stage, and runs them as no-ops on
        # the others, which record nothing)
        lowered = getattr(schedule, "pipeline_order_with_comms", None)
        if isinstance(lowered, dict) and lowered.get(rank):
            order = lowered
        acts = []
        for a in order[rank]:
            t = _plan_action(a, self.dp_stages)
            if t is not None:
                acts.append(t)
        acts = _with_unshard_waits(acts, {v[0] for v in self.fsdp.values()})
        self.plan(int(rank), _with_ddp_reduce(acts, set(self.ddp) if self.cpu else set()))
        return True

    # ---- steps ---------------------------------------------------------------
    def schedule_begin(self, schedule):
        """A step of schedule begins: the rank opened and described at the
        first; its index, or None when not recording."""
        r = self.open(schedule)
        if r is None:
            return None
        if not self.described:
            self.describe(schedule)
        self.coll_calls = self.coll_bytes = 0
        return self.step_begin()

    def schedule_end(self, schedule, idx):
        self.fsdp_flush()
        # GPipe, 1F1B: no pipeline_order; the plan is what step 0 ran
        stages = self.stages_of(schedule)
        self.cut = None
        self.step_end(idx, int(getattr(stages[0], "group_rank", 0)) if stages else 0)
        if self.coll_on and self.rank is not None:
            t = self.rank.now()
            self.rank.counter(_lib.COUNTER_COLLECTIVE_CALLS, self.coll_calls, idx, t)
            self.rank.counter(_lib.COUNTER_COLLECTIVE_BYTES, self.coll_bytes, idx, t)


def _with_unshard_waits(acts, fsdp_stages):
    """acts (plan tuples) with, for an FSDP2 stage, an UNSHARD before the
    first compute after each of its UNSHARDs: where the runtime waits for
    the all-gathers (_assert_unsharded), recorded as an UNSHARD block too.
    So the plan has an action for every UNSHARD block measured, and the
    simulator, which gives each the measured mean, adds up to the measured
    time (issue and wait), neither halved nor doubled."""
    if not fsdp_stages:
        return acts
    out, pending = [], set()
    for t in acts:
        if t[0] == _lib.SPAN_UNSHARD and t[1] in fsdp_stages:
            pending.add(t[1])
        elif t[0] not in _DP_KIND_OF.values():
            for s in (t[1], t[4]) if t[0] == _lib.OVERLAP_F_B else (t[1],):
                if s in pending:
                    pending.discard(s)
                    out.append((_lib.SPAN_UNSHARD, s, -1, -1, -1, -1))
        out.append(t)
    return out


def _with_ddp_reduce(acts, ddp_stages):
    """acts (plan tuples) with, for a DDP stage, a REDUCE_GRAD right after
    its last backward (B or W): DDP's all-reduce finishing inside it,
    recorded as a REDUCE_GRAD of its own (_wrap_nosync), beside the
    lowered order's REDUCE_GRAD (the gradients' scaling)."""
    last = {}
    for i, t in enumerate(acts):
        # (an overlapped pair's half is never cut: DualPipeV's is recorded whole)
        if t[0] in (_lib.B, _lib.W) and t[1] in ddp_stages:
            last[t[1]] = i
    if not last:
        return acts
    after = {i: s for s, i in last.items()}
    out = []
    for i, t in enumerate(acts):
        out.append(t)
        if i in after:
            out.append((_lib.SPAN_REDUCE_GRAD, after[i], -1, -1, -1, -1))
    return out


def _plan_action(a, dp_stages=()):
    """A PyTorch _Action as the C API's 6 integers, or None (bubbles, p2p
    comms; data-parallel actions of a stage not in dp_stages)."""
    if a is None:
        return None
    ct = getattr(a.computation_type, "value", str(a.computation_type))
    if ct in _DP_KIND_OF:
        return (_DP_KIND_OF[ct], a.stage_index, -1, -1, -1, -1) if a.stage_index in dp_stages else None
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
        return _core.run_block(hook, orig, kind, si, mb, cuda, args, kwargs)
    return wrapper


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
                    known.append(m)
            # a Work an op: its wait learns the peer (only when they pair up)
            if known and isinstance(works, list) and len(works) == len(known):
                peers = hook.work_peer
                for w, m in zip(works, known):
                    peers[id(w)] = m
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
        was = hook.now_open
        try:
            work = work_of.of(args, kwargs)
            hook.now_open = (_lib.WAIT, -1, -1, hook.step_index - 1, work if isinstance(work, list) else -1, t0)
        except Exception:
            work = None
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.now_open = was
        try:
            t1 = r.now()
            peer = -1
            if isinstance(work, list):
                pop = hook.work_peer.pop
                for w in work:
                    m = pop(id(w), None)
                    if m is not None:
                        peer = m[3]
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
            idx = hook.schedule_begin(schedule)
        except Exception as e:
            hook.fail("a step", e)
        hook.in_step += 1
        try:
            return orig(*args, **kwargs)
        finally:
            hook.in_step -= 1
            if idx is not None and not hook.failed:
                try:
                    hook.schedule_end(schedule, idx)
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


def _loss_params(orig):
    """_maybe_compute_loss's schedule (self), stage and micro-batch."""
    return [Param(orig, "self", 0), Param(orig, "stage", 1), Param(orig, "mb_index", 4)]


def _wrap_loss(hook, orig):
    """The schedule's loss call, _maybe_compute_loss(stage, output,
    target_mbs, mb_index): on the last stage (with a loss function) the
    loss function and the append of its result, a LOSS block of the stage
    and micro-batch (trace format 1.9: the last stage's work, whatever the
    loss function runs: torchtitan's chunked loss runs lm_head and the
    cross-entropy, forward and backward, there).  The call holds no host
    time of its own beyond that append, so no HOST_LOSS is recorded.  On
    CUDA timed by CUDA events, as the blocks.  The compiled wrapper (role
    loss) is the same on the CPU."""
    sched_of, stage_of, mb_of = _loss_params(orig)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        try:
            stage = stage_of.of(args, kwargs)
            sch = sched_of.of(args, kwargs)
            mine = (stage is not MISSING and sch is not MISSING and bool(getattr(stage, "is_last", False))
                    and getattr(sch, "_loss_fn", None) is not None)
            si = int(stage.stage_index) if mine else -1
            mb = mb_of.of(args, kwargs) if mine else None
            mb = -1 if mb is None or mb is MISSING else int(mb)
            cuda = mine and getattr(getattr(stage, "device", None), "type", "") == "cuda"
            e0 = hook.gpu_events() if cuda else None
        except Exception as e:
            out = orig(*args, **kwargs)   # the job's own errors carry no context of ours
            hook.fail("the loss", e)
            return out
        if not mine:
            return orig(*args, **kwargs)
        t0 = r.now()
        out = orig(*args, **kwargs)
        try:
            if e0 is not None:
                hook.gpu_loss_block(si, mb, e0)
            else:
                hook.loss_block(si, mb, t0, r.now())
        except Exception as e:
            hook.fail("the loss", e)
        return out
    return wrapper


def _fsdp_module():
    """FSDP2's FSDPModule class, or None where this PyTorch has none."""
    try:
        import importlib
        return getattr(importlib.import_module("torch.distributed.fsdp"), "FSDPModule", None)
    except Exception:
        return None


def _fsdp_bytes(m):
    """The bytes an FSDP2 module's all-gather brings: the full size of the
    parameters it manages itself (_fsdp_param_bytes); 0 where FSDP's state
    cannot be read."""
    try:
        group = m._get_fsdp_state()._fsdp_param_group
        if group is None:
            return 0
        return sum(_fsdp_param_bytes(fp) for fp in group.fsdp_params)
    except Exception:
        return 0


def _wrap_reduce(hook, orig, kind):
    """A stage's gradient reduction (perform_reduce_grad: the single-stage
    schedules' at a step's end and the runtime's REDUCE_GRAD for a stage
    not in FSDP2; start_gradient_reduction: REDUCE_GRAD of an FSDP2 stage;
    wait_for_gradient_reduction: its WAIT_REDUCE_GRAD) as a block of kind,
    for a data-parallel stage; one block, the outermost (perform_reduce_grad
    of an FSDP2 stage calls the other two)."""
    stage_of = Param(orig, "self", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.rank is None or hook.failed or hook.paused or hook.dp_depth or not hook.dp_stages:
            return orig(*args, **kwargs)
        try:
            st = stage_of.of(args, kwargs)
            si = None if st is MISSING else int(st.stage_index)
        except Exception:
            si = None   # not a stage the hook knows: the call as it is
        if si not in hook.dp_stages:
            return orig(*args, **kwargs)
        hook.dp_depth += 1
        m0 = hook.dp_moved
        was = hook.now_open
        try:
            t0 = hook.rank.now()
            hook.now_open = (kind, si, -1, hook.step_index - 1, -1, t0)
            out = orig(*args, **kwargs)
        finally:
            hook.dp_depth -= 1
            hook.now_open = was
        try:
            # the bytes FSDP2's reduce-scatters moved inside it: FSDP2's
            # asynchronous finalize runs them in the wait (a stage with
            # nothing left to reduce moves none)
            hook.dp_block(kind, si, t0, hook.rank.now(), hook.dp_moved - m0)
        except Exception as e:
            hook.fail("a gradient reduction", e)
        return out
    return wrapper


def _wrap_fsdp(hook, orig, kind):
    """FSDPModule.unshard or .reshard, called by the runtime's UNSHARD and
    RESHARD actions on each FSDP2 module of a stage: timed for the stage's
    action (hook.fsdp_call) inside a step, outside a gradient reduction;
    any other call (the job's own, FSDP's) as it is."""
    module_of = Param(orig, "self", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if (hook.rank is None or hook.failed or hook.paused or not hook.in_step or hook.dp_depth
                or not hook.fsdp):
            return orig(*args, **kwargs)
        m = module_of.of(args, kwargs)
        if m is MISSING or id(m) not in hook.fsdp:
            return orig(*args, **kwargs)
        t0 = hook.rank.now()
        hook.dp_depth += 1   # its all-gathers are this action's (_wrap_fsdp_collective)
        m0 = hook.dp_moved
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.dp_depth -= 1
        try:
            hook.fsdp_call(kind, m, t0, hook.rank.now(), hook.dp_moved - m0 if kind == _lib.SPAN_UNSHARD else None)
        except Exception as e:
            hook.fail("an FSDP action", e)
        return out
    return wrapper


def _fsdp_params(m):
    """The FSDPParams an FSDP2 module manages itself (none where FSDP's
    state cannot be read)."""
    try:
        group = m._get_fsdp_state()._fsdp_param_group
        return list(group.fsdp_params) if group is not None else []
    except Exception:
        return []


def _fsdp_param_bytes(fp):
    """The bytes an FSDPParam's all-gather brings: its full size (a
    DTensor's numel is its full tensor's) in the dtype it is gathered in,
    its mixed-precision param_dtype where it has one (bf16 parameters of
    float32 storage: half the storage's bytes, counted twice before).  FSDP2
    sets param_dtype at its lazy init, in the first forward: read at the
    call, never at the rank's open."""
    try:
        p = fp.sharded_param
        dtype = getattr(fp, "param_dtype", None) or p.dtype
        return p.numel() * dtype.itemsize
    except Exception:
        return 0


# FSDP2's own collectives, by the names its FSDPParamGroup calls them under
# (module globals of _fsdp_param_group, looked up at each call): the
# parameters' all-gather (issued; waited for and copied out) and the
# gradients' reduce-scatter (with HSDP's all-reduce)
_FSDP_COLLECTIVES = (("foreach_all_gather", _lib.SPAN_UNSHARD, 0),
                     ("foreach_all_gather_copy_out", _lib.SPAN_UNSHARD, 1),
                     ("foreach_reduce", _lib.SPAN_REDUCE_GRAD, 0))


def _install_fsdp_collectives(hook):
    """FSDP2's collectives wherever they run (issue 36): in its
    pre-forward and pre-backward hooks (inside F, B, the loss call), after
    a backward, in its prefetches.  Each is a data-parallel span of its
    stage nested in the block that issued it (Recorder.dp_nested); one run
    by a recorded action of the schedule (the runtime's UNSHARD, its wait,
    REDUCE_GRAD: hook.dp_depth) is that action's, recorded once.  A
    PyTorch without FSDP2 is left as it is."""
    import importlib
    try:
        pg = importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_param_group")
    except Exception:
        return
    for name, kind, pos in _FSDP_COLLECTIVES:
        orig = pg.__dict__.get(name)
        if callable(orig):
            setattr(pg, name, _wrap_fsdp_collective(hook, orig, kind, pos))


def _wrap_fsdp_collective(hook, orig, kind, pos):
    """One of FSDP2's collectives (_FSDP_COLLECTIVES; pos: where its
    fsdp_params is) as a nested data-parallel span of the stage whose
    parameters it moves, inside a step, outside the schedule's own
    data-parallel actions; the bytes: the parameters' full size for an
    all-gather's issue, the gradients' for a reduction, 0 for a copy-out
    (its issue has them)."""
    params_of = Param(orig, "fsdp_params", pos)
    grads_of = Param(orig, "unsharded_grads", 1) if kind == _lib.SPAN_REDUCE_GRAD else None
    issue = pos == 0

    def moved(fps, args, kwargs):
        if grads_of is not None:
            return _nbytes(grads_of.of(args, kwargs))
        if issue:
            return sum(_fsdp_param_bytes(fp) for fp in fps)
        return 0

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused or not hook.in_step or not hook.fsdp_params:
            return orig(*args, **kwargs)
        try:
            fps = params_of.of(args, kwargs)
            si = hook.fsdp_params.get(id(fps[0])) if fps else None
        except Exception:
            si = None   # not a call the hook knows: as it is
        if si is None:
            return orig(*args, **kwargs)
        # read before the call: foreach_reduce empties its list of gradients
        try:
            nbytes = moved(fps, args, kwargs)
        except Exception:
            nbytes = 0
        if hook.dp_depth:
            # the schedule's own action's: its bytes, no span of its own
            out = orig(*args, **kwargs)
            hook.dp_moved += nbytes
            return out
        t0 = r.now()
        out = orig(*args, **kwargs)
        try:
            hook.dp_nested(kind, si, t0, r.now(), nbytes)
        except Exception as e:
            hook.fail("an FSDP collective", e)
        return out
    return wrapper


def _wrap_unshard_wait(hook, orig):
    """_PipelineScheduleRuntime._assert_unsharded(stage): before a stage's
    compute, it waits for the all-gathers its UNSHARD issued (their
    UnshardHandle.wait).  Where one is pending, the call is that wait: an
    UNSHARD block of the stage (bytes 0: the issue has them), so the
    all-gather's time is data-parallel communication, never bubble (a WAIT
    span would be: Why counts a wait as idle)."""
    sched_of = Param(orig, "self", 0)
    stage_of = Param(orig, "stage", 1)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused or not hook.fsdp:
            return orig(*args, **kwargs)
        try:
            si = int(stage_of.of(args, kwargs).stage_index)
            pending = si in hook.dp_stages and si in getattr(sched_of.of(args, kwargs), "unshard_ops", ())
        except Exception:
            pending = False   # not a call the hook knows: as it is
        if not pending:
            return orig(*args, **kwargs)
        t0 = r.now()
        hook.dp_depth += 1   # its copy-out is this wait's (_wrap_fsdp_collective)
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.dp_depth -= 1
        try:
            hook.fsdp_flush(_lib.SPAN_UNSHARD)   # the issue first, in time order
            hook.dp_block(_lib.SPAN_UNSHARD, si, t0, r.now())
        except Exception as e:
            hook.fail("an FSDP all-gather's wait", e)
        return out
    return wrapper


def _wrap_nosync(hook, orig):
    """_PipelineStageBase.backward_maybe_with_nosync: in a DDP stage's last
    backward (last_backward true) DDP's reducer all-reduces the gradients
    as they become ready and waits for the last all-reduce when the
    backward ends.  A post-accumulate-grad hook on each of the stage's
    parameters, there for this call only, notes when the last gradient
    is ready; the enclosing block ends there and the rest of its call is a
    REDUCE_GRAD of the stage (Recorder.cut, the C wrappers' set_cut).  The
    hooks only read a clock: the gradients, DDP's buckets and the call's
    result are untouched.  CPU stages only: on CUDA the host's clock is
    not the device's."""
    stage_of = Param(orig, "self", 0)
    last_of = Param(orig, "last_backward", 3, False)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused or not hook.ddp or not last_of.of(args, kwargs):
            return orig(*args, **kwargs)
        handles, last = [], [0]
        try:
            st = stage_of.of(args, kwargs)
            si = int(st.stage_index)
            if si in hook.ddp and getattr(st.device, "type", "cpu") != "cuda":
                now = r.now

                params = [p for p in st.submod.parameters() if p.requires_grad]
                left = [len(params)]

                def ready(_param):
                    last[0] = now()
                    left[0] -= 1
                    if left[0] == 0:   # the rest of the call is DDP's all-reduce (heartbeat.py)
                        hook.dp_open = (si, _lib.SPAN_REDUCE_GRAD, last[0])
                handles = [p.register_post_accumulate_grad_hook(ready) for p in params]
        except Exception as e:
            hook.fail("DDP's gradient all-reduce", e)
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.dp_open = None
            try:
                for h in handles:
                    h.remove()
            except Exception as e:
                hook.fail("DDP's gradient all-reduce", e)
        if last[0] and not hook.failed:
            hook.cut = (_lib.SPAN_REDUCE_GRAD, si, last[0], hook.ddp[si])
            f = hook.fast
            if f is not None:
                try:
                    f.set_cut(*hook.cut)
                except Exception as e:
                    hook.fail("DDP's gradient all-reduce", e)
        return out
    return wrapper


# The collectives a tensor-parallel job's blocks run: DTensor's
# redistribute calls the functional collectives (placement_types looks
# funcol.all_reduce, all_gather_single, reduce_scatter_single ... up on the
# module at each call); hand-written tensor parallelism calls c10d's.
_FUNCOL = ("all_reduce", "all_gather_single", "reduce_scatter_single", "all_gather_tensor",
           "reduce_scatter_tensor", "all_to_all_single", "all_reduce_coalesced", "all_gather_single_coalesced",
           "reduce_scatter_single_coalesced", "all_gather_into_tensor_coalesced",
           "reduce_scatter_tensor_coalesced", "broadcast", "permute_tensor", "all_gather_single_autograd",
           "reduce_scatter_single_autograd", "all_gather_tensor_autograd", "reduce_scatter_tensor_autograd",
           "all_to_all_single_autograd")
_C10D = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
         "all_to_all", "all_to_all_single", "broadcast", "reduce", "all_reduce_coalesced")


def _nbytes(x):
    """The bytes of a tensor, or of the tensors of a list."""
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    try:
        return x.numel() * x.element_size()
    except Exception:
        return 0


def _data_param(orig):
    """The argument whose bytes a collective moves: its input where its
    signature names one, else its first."""
    import inspect
    try:
        names = list(inspect.signature(orig).parameters)
    except Exception:
        names = []
    for n in ("input", "input_tensor", "input_list", "input_tensor_list", "inputs"):
        if n in names:
            return Param(orig, n, names.index(n))
    return Param(orig, names[0], 0) if names else Param(orig, "tensor", 0)


def _wrap_collective(hook, orig):
    data_of = _data_param(orig)

    compiling = getattr(getattr(hook.torch, "compiler", None), "is_compiling", None)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        # under torch.compile's tracing the call is the job's alone: a count
        # kept there would break its graph
        if compiling is not None and compiling():
            return orig(*args, **kwargs)
        if not hook.in_step or hook.coll_depth or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        hook.coll_depth += 1
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.coll_depth -= 1
        try:
            hook.coll_calls += 1
            hook.coll_bytes += _nbytes(data_of.of(args, kwargs))
        except Exception as e:
            hook.fail("a collective", e)
        return out
    return wrapper


def _install_collectives(hook):
    """Counts the collectives of a job with a tp dimension > 1: the module
    attributes of the functional collectives and of torch.distributed
    wrapped (a job without tensor parallelism is left as it is: its
    collectives are data-parallel, recorded as blocks).  A function the job
    patched before is wrapped as it is; one it patches after replaces ours."""
    if hook.coll_on:
        return
    import importlib
    funcol = importlib.import_module("torch.distributed._functional_collectives")
    for mod, names in ((funcol, _FUNCOL), (hook.dist, _C10D)):
        for name in names:
            orig = getattr(mod, name, None)
            if callable(orig):
                setattr(mod, name, _wrap_collective(hook, orig))
    hook.coll_on = True


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
            self.hook.overlap_begin()
        return out

    def __exit__(self, *exc):
        if self.mine:
            blocks = self.hook.overlap_stop()
            try:
                self.hook.overlap_end(blocks)
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

    hook.compiled_blocks = fast is not None

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
    # data parallelism: the stage's gradient reduction (every PyTorch the
    # hook knows has perform_reduce_grad; 2.15 the FSDP2 split of it), and
    # FSDP2's unshard and reshard; a PyTorch without them is left as it is
    for name, kind in (("perform_reduce_grad", _lib.SPAN_REDUCE_GRAD),
                       ("start_gradient_reduction", _lib.SPAN_REDUCE_GRAD),
                       ("wait_for_gradient_reduction", _lib.SPAN_WAIT_REDUCE_GRAD)):
        if name in getattr(base, "__dict__", {}):
            setattr(base, name, _wrap_reduce(hook, base.__dict__[name], kind))
    if "backward_maybe_with_nosync" in getattr(base, "__dict__", {}):
        base.backward_maybe_with_nosync = _wrap_nosync(hook, base.__dict__["backward_maybe_with_nosync"])
    runtime = getattr(sched, "_PipelineScheduleRuntime", None)
    if runtime is not None and "_assert_unsharded" in runtime.__dict__:
        runtime._assert_unsharded = _wrap_unshard_wait(hook, runtime.__dict__["_assert_unsharded"])
    fsdp = _fsdp_module()
    if fsdp is not None:
        for name, kind in (("unshard", _lib.SPAN_UNSHARD), ("reshard", _lib.SPAN_RESHARD)):
            if name in fsdp.__dict__:
                setattr(fsdp, name, _wrap_fsdp(hook, fsdp.__dict__[name], kind))
    base_sched = sched._PipelineSchedule.__dict__
    # the loss call (_maybe_compute_loss: the schedules compute the loss
    # after forward_one_chunk, outside the block) as the last stage's LOSS
    # block; host work between blocks (issue 29, host.py): the step's
    # splitting of its inputs into micro-batches
    if "_maybe_compute_loss" in base_sched:
        orig = base_sched["_maybe_compute_loss"]
        sched._PipelineSchedule._maybe_compute_loss = hot("loss", orig, _wrap_loss(hook, orig), _loss_params(orig))
    if "_split_inputs" in base_sched:
        sched._PipelineSchedule._split_inputs = _host.hot_host(hook, fast, base_sched["_split_inputs"],
                                                               _lib.SPAN_HOST_DATA)
    _install_fsdp_collectives(hook)
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
            _core.opt_hooks(hook)
        except Exception as e:
            _say(f"optimizer steps not recorded ({e})")
        try:
            _host.zero_grad_hooks(hook, _lib.load().pipescope_fast)
        except Exception as e:
            _say(f"zero_grad not recorded ({e})")
        import atexit
        atexit.register(_close)
        _hook = hook
        return True


def _close():
    _core.close_now(_hook)   # the hook of the moment: atexit calls this late


def close():
    """Ends recording now (the trace file is complete); atexit does it too."""
    _close()
