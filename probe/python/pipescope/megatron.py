"""pipescope.megatron — records a megatron-core job, unchanged.

    import pipescope.megatron
    pipescope.megatron.instrument()

(or run the job under ``pipescope-cli profile -- torchrun ...``: the
autoload does this when the process imports
megatron.core.pipeline_parallel.schedules).  What it wraps, all in
megatron-core's own code, never the user's:

  * schedules.forward_backward_pipelining_without_interleaving (1F1B) and
    ..._with_interleaving: one call is one step (step markers, the
    description, the plan); get_forward_backward_func() looks them up by
    name in the module each time it is called, so wrapping the module's
    names reaches every job that asks it;
  * schedules.forward_step (F: its current_microbatch and vp_stage), and
    on the last stage its forward_step_calc_loss (0.16), where the job's
    loss function runs: on the CPU the F block ends where it begins and
    the rest of forward_step is a LOSS block (the last stage's work, side
    by side with F, never nested in it); and
    schedules.backward_step (B: it carries neither; its output_tensor is
    the object forward_step returned, so the forward's stage and
    micro-batch are looked up by that object's identity);
  * p2p_communication._batched_p2p_ops and _p2p_ops, which every
    P2PCommunicator method (and 0.13's module functions) sends and
    receives through: a transfer per tensor, with its peer (the pipeline
    rank) and bytes; a send's stage and micro-batch are its tensor's
    (the forward's output, the backward's input gradient), a receive's
    those of the block that consumes it, recorded just before that block;
    the requests they return are handed back as thin proxies whose wait()
    is timed (the waits the interleaved schedule issues itself with
    overlap_p2p_comm, and _communicate's own) and charged, as WAIT, to the
    block that comes next;
  * config.finalize_model_grads_func, for the length of one step's call
    only (put back when it returns): Megatron's data-parallel gradient
    reduction as REDUCE_GRAD of the pipeline rank;
  * its DistributedDataParallel's bucket groups (_ParamAndGradBucketGroup:
    start/finish_grad_sync, start/finish_param_sync) outside
    finalize_model_grads: the gradient syncs overlap_grad_reduce issues
    inside a backward, the distributed optimizer's parameter all-gathers,
    each a data-parallel span (REDUCE_GRAD, UNSHARD) of its chunk's stage
    nested in the block that issued it;
  * the optimizers' global step hooks (an OPT block); the last stage's
    losses (what forward_step returns there: the loss Megatron
    back-propagates, summed over the step's micro-batches) as LOSS.

Stages are Megatron's virtual stages: model chunk x P + pipeline rank.
The process's place (pp, dp, tp, cp, ep) is parallel_state's, read once.
The plan is the order megatron-core will run, computed by megatron-core's
own helpers (get_schedule_table, get_pp_rank_microbatches).

It never raises into the job, never changes what it computes (the wrapped
functions get the same arguments; results and exceptions pass through),
and leaves a megatron-core version it does not know alone, with one line.
"""

import functools
import os
import threading

from . import core as _core
from . import lib as _lib
from .arguments import MISSING, Param

KNOWN = ((0, 13), (0, 16))   # the megatron-core lines whose internals this hook knows (0.13 and 0.16 tested)

_SCHEDULES = {
    "forward_backward_pipelining_without_interleaving": "Megatron-1F1B",
    "forward_backward_pipelining_with_interleaving": "Megatron-Interleaved",
}

_hook = None
_lock = threading.Lock()


_say = _core.say


def _nbytes(t):
    try:
        return int(t.numel() * t.element_size())
    except Exception:
        return 0


class _Req:
    """A request _p2p_ops or _batched_p2p_ops returned, handed on in its
    place: its wait() is timed; everything else is the request's own."""

    __slots__ = ("_req", "_hook", "_peer", "_kind")

    def __init__(self, req, hook, peer, kind):
        # kind: the transfer it finishes (RECV_B ...), what the open action
        # names while it waits; WAIT where a batch mixes them
        self._req, self._hook, self._peer, self._kind = req, hook, peer, kind

    def wait(self, *args, **kwargs):
        h = self._hook
        r = h.rank
        if r is None or h.failed:
            return self._req.wait(*args, **kwargs)
        t0 = r.now()
        h.sched_in(t0)
        was = h.now_open
        h.now_open = (self._kind, -1, -1, h.step_index - 1, self._peer, t0)   # issue 37: heartbeat.py
        try:
            out = self._req.wait(*args, **kwargs)
        finally:
            h.now_open = was
        try:
            t1 = r.now()
            h.pending_waits.append((self._peer, t0, t1))
            h.sched_out(t1)
        except Exception as e:
            h.fail("a wait", e)
        return out

    def __getattr__(self, name):
        try:
            req = object.__getattribute__(self, "_req")
        except AttributeError:
            # not yet set (copy, pickle): no attribute, as for any object
            raise AttributeError(name) from None
        return getattr(req, name)


class _Hook(_core.Recorder):
    """The recording of this process (core.Recorder) as megatron-core's
    schedules drive it: what only Megatron has is here."""

    def __init__(self, torch, dist, version, sched, ps):
        super().__init__(torch)
        self.dist, self.version, self.sched, self.ps = dist, version, sched, ps
        self.in_step = False
        self.pp, self.P, self.V = 0, 1, 1
        self.loss_here = True     # tensor-parallel rank 0: its peers compute the same loss
        self.cuda = False         # the chunks are on CUDA: blocks timed by events
        self.out_meta = {}        # id(forward's output) -> (stage, mb): backward_step's
        self.send_meta = {}       # id(tensor to send) -> (stage, mb)
        self.recv_pending = {}    # id(received tensor) -> (kind, peer, bytes, t0, t1)
        self.tokens = []          # calculate_per_token_loss: each loss's token count
        self.loss_stage = None    # inside a last-stage forward on the CPU: its stage (_wrap_calc_loss)
        # megatron-core's DistributedDataParallel: id(bucket group) -> its
        # chunk's virtual stage, read at the open; inside finalize_model_grads
        # (recorded as one REDUCE_GRAD) the syncs it finishes are its own
        self.bucket_stage = {}
        self.dp_depth = 0

    # ---- the rank ------------------------------------------------------------
    def open(self, chunks):
        if self.rank is not None or self.failed:
            return self.rank
        ps = self.ps
        self.pp = int(ps.get_pipeline_model_parallel_rank())
        self.P = int(ps.get_pipeline_model_parallel_world_size())
        try:
            self.loss_here = int(ps.get_tensor_model_parallel_rank()) == 0
        except Exception:
            self.loss_here = True
        g = _core.global_rank(self.dist, self.pp)
        try:
            place = self.settle_place(g, self.mesh(), self.pp)
        except Exception as e:
            _say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
            place = None
        self.cuda = _device(chunks) == "cuda"
        try:
            self.bucket_stage = _bucket_stages(chunks, self.P, self.pp)
        except Exception as e:
            _say(f"megatron-core's data-parallel syncs not recorded ({e.__class__.__name__}: {e}); "
                 "recording goes on")
        # on the CPU, the schedule's own code between its calls (issue 29):
        # forward_backward_func's Python between forward_step, backward_step,
        # the p2p calls and their waits (core.Recorder.sched_in/out)
        self.py_sched = not self.cuda
        return self.open_rank(self.pp, self.P, "megatron", g, place, self.cuda, not self.cuda)

    def mesh(self):
        """(coord, size), pp dp tp cp ep, as parallel_state lays them out
        (tp innermost, pp outermost).  Expert parallelism splits the
        data-parallel ranks (Megatron's expert-data-parallel group), so dp
        here is the data-parallel rank; ep is recorded as 1 unless the mesh
        is pp x dp x tp x cp x ep = world."""
        ps = self.ps
        coord = [self.pp, int(ps.get_data_parallel_rank()), int(ps.get_tensor_model_parallel_rank()),
                 int(ps.get_context_parallel_rank()), 0]
        size = [self.P, int(ps.get_data_parallel_world_size()), int(ps.get_tensor_model_parallel_world_size()),
                int(ps.get_context_parallel_world_size()), 1]
        try:
            ep = int(ps.get_expert_model_parallel_world_size())
            world = self.dist.get_world_size()
            if ep > 1 and size[0] * size[1] * size[2] * size[3] * ep == world:
                coord[4], size[4] = int(ps.get_expert_model_parallel_rank()), ep
        except Exception:
            pass
        return coord, size

    # ---- the step ------------------------------------------------------------
    def begin(self, fn_name, kwargs, chunks, config):
        if self.open(chunks) is None:
            return None
        M = int(kwargs.get("num_microbatches"))
        V = self.V = len(chunks)
        group = int(getattr(config, "microbatch_group_size_per_vp_stage", None) or self.P)
        if not self.described:
            self.describe(fn_name, chunks, M, V, group)
        if not self.planned:
            self.write_plan(fn_name, M, V, group, config)
        self.tokens = []
        return self.step_begin()

    def end(self, idx):
        if self.rank is None:
            return
        self.flush_waits()
        if self.losses:
            # what forward_step returns on the last stage is the loss over
            # the step's micro-batches (Megatron divides each by M): summed;
            # with calculate_per_token_loss each is a sum over its tokens,
            # left undivided: the step's sum over all its tokens is the mean
            # (on the loss's device: nothing waits for it here)
            add = lambda a, b: a + b   # noqa: E731
            ls = self.losses
            loss = functools.reduce(add, ls[1:], ls[0])
            if self.tokens:
                loss = loss / functools.reduce(add, self.tokens[1:], self.tokens[0]).clamp(min=1)
            self.losses = [loss]
        self.tokens = []
        self.step_end(idx, self.pp)
        self.out_meta.clear()
        self.send_meta.clear()
        self.recv_pending.clear()

    def describe(self, fn_name, chunks, M, V, group):
        name = _SCHEDULES[fn_name]
        if fn_name.endswith("_with_interleaving"):
            name += f":group={group}"
        try:
            pg = self.dist.get_backend() if self.dist.is_initialized() else "none"
        except Exception:
            pg = "?"
        coord, size = self.mesh()
        params = []
        for c, m in enumerate(chunks):
            try:
                n = sum(p.numel() for p in m.parameters())
            except Exception:
                n = 0
            params.append(f"s{c * self.P + self.pp} {_core.count(n)}")
        model = (f"megatron-core {self.version} {pg} {fn_name}; tp {size[2]} cp {size[3]} dp {size[1]} "
                 f"ep {size[4]} pp {size[0]} vp {V} microbatch_group_size_per_vp_stage {group}; "
                 f"params of rank {self.pp}'s stages " + " ".join(params))
        self.describe_job(name, _device(chunks), self.P, M, V, model)

    def write_plan(self, fn_name, M, V, group, config):
        """This rank's order, as megatron-core's helpers give it."""
        self.planned = True
        try:
            acts = plan_order(self.sched, fn_name, self.P, self.pp, M, V, group,
                              bool(getattr(config, "overlap_moe_expert_parallel_comm", False)))
        except Exception as e:
            _say(f"the plan not recorded ({e.__class__.__name__}: {e}); recording goes on")
            return
        self.plan(self.pp, [(_lib.F if k == "F" else _lib.B, s, m, -1, -1, -1) for k, s, m in acts])

    # ---- what a block brings with it -----------------------------------------
    def flush_waits(self):
        """Waits no block came after (the step's last): charged to none."""
        r = self.rank
        if self.pending_waits:
            step = self.current_step()
            for peer, w0, w1 in self.pending_waits:
                r.wait(-1, -1, peer, step, w0, w1)
            self.pending_waits.clear()

    def recv_of(self, tensors, stage, mb):
        """The receives of the tensors a block consumes, recorded now with
        the block's stage and micro-batch."""
        pend = self.recv_pending
        if not pend:
            return
        r = self.rank
        step = self.current_step()
        for t in tensors if isinstance(tensors, (list, tuple)) else (tensors,):
            x = pend.pop(id(t), None) if t is not None else None
            if x is not None:
                kind, peer, nbytes, t0, t1 = x
                r.transfer(kind, stage, mb, peer, nbytes, step, t0, t1)


def _device(chunks):
    try:
        return "cuda" if next(chunks[0].parameters()).device.type == "cuda" else "cpu"
    except Exception:
        return "cpu"


def plan_order(sched, fn_name, P, r, M, V, group, moe_overlap=False):
    """[(kind "F"/"B", virtual stage, mb)] in the order megatron-core runs
    them on pipeline rank r: its schedule table (micro-batch, chunk) a
    virtual micro-batch, its warm-up count, then one forward and one
    backward a virtual micro-batch, then the cool-down, as both schedule
    functions walk them (a backward's chunk is V - 1 - the table's)."""
    if fn_name.endswith("_with_interleaving"):
        table = sched.get_schedule_table(M, V, group)
    else:
        V, table = 1, [(m, 0) for m in range(M)]
    warm = _warmup(sched, P, r, M, V, group, moe_overlap)
    fwd = [("F", c * P + r, m) for m, c in table]
    bwd = [("B", (V - 1 - c) * P + r, m) for m, c in table]
    order = fwd[:warm]
    for i in range(warm, len(fwd)):
        order += [fwd[i], bwd[i - warm]]
    return order + bwd[len(fwd) - warm:]


def _warmup(sched, P, r, M, V, group, moe_overlap):
    """megatron-core's warm-up count for rank r (get_pp_rank_microbatches,
    given P and r through a stand-in communicator where it takes one)."""
    fn = sched.get_pp_rank_microbatches

    class _Group:
        def size(self):
            return P

        def rank(self):
            return r

    class _Comm:
        pp_group = _Group()
        virtual_pipeline_model_parallel_size = V if V > 1 else None

    p = Param(fn, "p2p_communicator")
    if p.name is not None:
        kw = {"p2p_communicator": _Comm()}
        if Param(fn, "overlap_moe_expert_parallel_comm").name is not None:
            kw["overlap_moe_expert_parallel_comm"] = moe_overlap
        return int(fn(M, V, group, **kw)[2])
    # 0.13: it reads parallel_state, which is this process's own (r, P, V)
    return int(fn(M, V, group)[2])


# ---- the wrappers: the original runs exactly once, its result and exceptions untouched ----

def _wrap_schedule(hook, orig, fn_name):
    """A schedule function (keyword-only in every version known): one call
    a step; finalize_model_grads_func timed for the call's length only."""
    get_config = hook.sched.get_model_config

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.failed or hook.in_step or kwargs.get("forward_only"):
            return orig(*args, **kwargs)
        if hook.alternate:
            # the benchmark's paired steps: every other step unrecorded
            hook.calls += 1
            hook.set_paused(hook.calls % 2 == 0)
            if hook.paused:
                return orig(*args, **kwargs)
        idx, config, fin = None, None, None
        try:
            model = kwargs.get("model")
            chunks = list(model) if isinstance(model, (list, tuple)) else [model]
            config = get_config(chunks[0])
            idx = hook.begin(fn_name, kwargs, chunks, config)
            fin = config.finalize_model_grads_func
            if idx is not None and fin is not None:
                config.finalize_model_grads_func = _wrap_finalize(hook, fin)
            else:
                fin = None
        except Exception as e:
            hook.fail("a step", e)
        hook.in_step = True
        try:
            return orig(*args, **kwargs)
        finally:
            hook.in_step = False
            if fin is not None:
                try:
                    config.finalize_model_grads_func = fin   # the job's own again
                except Exception as e:
                    hook.fail("finalize_model_grads", e)
            if idx is not None and not hook.failed:
                try:
                    hook.end(idx)
                except Exception as e:
                    hook.fail("a step's end", e)
    return wrapper


def _wrap_no_pipelining(hook, orig):
    """forward_backward_no_pipelining: no pipeline to record; said once
    (else profile ends with no trace and no reason), the call untouched."""
    said = []

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if not said and hook.rank is None and not hook.failed:
            said.append(True)
            _say("megatron-core ran forward_backward_no_pipelining (pipeline_model_parallel_size 1): "
                 "no pipeline there to record; profile a job with pipeline_model_parallel_size 2 or more")
        return orig(*args, **kwargs)
    return wrapper


def _wrap_finalize(hook, orig):
    """finalize_model_grads (the data-parallel gradient reduction) as
    REDUCE_GRAD of the pipeline rank (the kinds contract, item 3); the
    bucket syncs it runs or waits for are its own (hook.dp_depth)."""
    @functools.wraps(orig)
    def finalize(*args, **kwargs):
        if hook.rank is None or hook.failed:
            return orig(*args, **kwargs)
        hook.dp_depth += 1
        try:
            return _core.run_block(hook, orig, _lib.SPAN_REDUCE_GRAD, hook.pp, -1, hook.cuda, args, kwargs)
        finally:
            hook.dp_depth -= 1
    return finalize


def _bucket_stages(chunks, P, pp):
    """id(bucket group) -> virtual stage, for the chunks that are
    megatron-core DistributedDataParallel modules (their bucket_groups and
    expert_parallel_bucket_groups); {} for any other."""
    out = {}
    for c, m in enumerate(chunks):
        for name in ("bucket_groups", "expert_parallel_bucket_groups"):
            for bg in getattr(m, name, None) or ():
                out[id(bg)] = c * P + pp
    return out


def _bucket_bytes(bg, field):
    """The bytes a bucket group's buckets hold in field (grad_data,
    param_data), 0 where it has none."""
    n = 0
    for b in getattr(bg, "buckets", ()):
        t = getattr(b, field, None)
        if t is not None:
            n += _nbytes(t)
    return n


# megatron-core's DistributedDataParallel and distributed optimizer: the
# bucket groups' gradient sync (all-reduce, or reduce-scatter with the
# distributed optimizer) and parameter sync (all-gather); a start issues
# it (waits for it where not overlapped), a finish waits for it (or runs
# it, where overlap_grad_reduce is off)
_BUCKET_SYNCS = (("start_grad_sync", _lib.SPAN_REDUCE_GRAD, "grad_data"),
                 ("finish_grad_sync", _lib.SPAN_REDUCE_GRAD, "grad_data"),
                 ("start_param_sync", _lib.SPAN_UNSHARD, "param_data"),
                 ("finish_param_sync", _lib.SPAN_UNSHARD, "param_data"))


def _install_bucket_syncs(hook):
    """Wraps _ParamAndGradBucketGroup's syncs (a megatron-core without
    them is left as it is)."""
    import importlib
    try:
        mod = importlib.import_module("megatron.core.distributed.param_and_grad_buffer")
    except Exception:
        return
    cls = getattr(mod, "_ParamAndGradBucketGroup", None)
    if cls is None:
        return
    for name, kind, field in _BUCKET_SYNCS:
        if name in cls.__dict__:
            setattr(cls, name, _wrap_bucket_sync(hook, cls.__dict__[name], kind, field, name.startswith("start")))


def _wrap_bucket_sync(hook, orig, kind, field, start):
    """A bucket group's sync wherever it runs outside finalize_model_grads
    (a gradient sync that overlap_grad_reduce issues from a backward hook,
    inside B; a parameter sync in a forward pre-hook or the optimizer's
    step) as a data-parallel span of its chunk's stage nested in the block
    that issued it (Recorder.dp_nested); one inside another (a finish that
    runs its start) is the outer one's.  Bytes: the buckets' data for a
    start, or for a finish that runs the sync itself (overlap off); 0 for
    a finish that only waits."""
    group_of = Param(orig, "self", 0)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or hook.paused or hook.dp_depth or not hook.bucket_stage:
            return orig(*args, **kwargs)
        bg = group_of.of(args, kwargs)
        si = hook.bucket_stage.get(id(bg))
        if si is None:
            return orig(*args, **kwargs)
        t0 = r.now()
        hook.dp_depth += 1
        try:
            out = orig(*args, **kwargs)
        finally:
            hook.dp_depth -= 1
        try:
            sync = start or not getattr(getattr(bg, "ddp_config", None), "overlap_grad_reduce", True)
            hook.dp_nested(kind, si, t0, r.now(), _bucket_bytes(bg, field) if sync else 0)
        except Exception as e:
            hook.fail("a data-parallel sync", e)
        return out
    return wrapper


def _wrap_forward(hook, orig):
    mb_of = Param(orig, "current_microbatch", 11, None)
    vp_of = Param(orig, "vp_stage", 12, None)
    input_of = Param(orig, "input_tensor", 4)
    last_of = Param(orig, "is_last_stage", 13, MISSING)
    collect_of = Param(orig, "collect_non_loss_data", 8, False)
    config_of = Param(orig, "config", 6, None)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.rank is None or hook.failed or not hook.in_step or hook.paused:
            return orig(*args, **kwargs)
        try:
            mb, vp = mb_of.of(args, kwargs), vp_of.of(args, kwargs)
            mb = -1 if mb is None or mb is MISSING else int(mb)
            stage = (0 if vp is None or vp is MISSING else int(vp)) * hook.P + hook.pp
            hook.recv_of(input_of.of(args, kwargs), stage, mb)
        except Exception as e:
            out = orig(*args, **kwargs)   # the job's own errors carry no context of ours
            hook.fail("a forward", e)
            return out
        last = MISSING
        try:
            last = last_of.of(args, kwargs)
            if last is MISSING:   # 0.13: the last virtual stage computes the loss
                last = stage == hook.P * hook.V - 1
            hook.loss_stage = stage if last and not hook.cuda and not collect_of.of(args, kwargs) else None
        except Exception as e:
            hook.fail("a forward", e)
        try:
            out = _core.run_block(hook, orig, _lib.F, stage, mb, hook.cuda, args, kwargs)
        finally:
            hook.loss_stage = None
        if hook.failed:
            return out
        try:
            o = out[0] if isinstance(out, tuple) else out
            hook.out_meta[id(o)] = (stage, mb)
            for t in o if isinstance(o, list) else (o,):
                if t is not None:
                    hook.send_meta[id(t)] = (stage, mb)
            if last and hook.loss_here and not collect_of.of(args, kwargs):
                t = o[0] if isinstance(o, list) else o
                n = None
                if getattr(config_of.of(args, kwargs), "calculate_per_token_loss", False):
                    # a sum over tokens: its count is forward_step's second result
                    n = out[1] if isinstance(out, tuple) and len(out) > 1 else None
                    if not hasattr(n, "clamp"):
                        t = None   # no count: no loss rather than a wrong one
                if hasattr(t, "detach"):
                    if n is not None:
                        hook.tokens.append(n.detach())
                    hook.losses.append(t.detach())   # before Megatron may deallocate it
        except Exception as e:
            hook.fail("a forward", e)
        return out
    return wrapper


def _wrap_calc_loss(hook, orig):
    """forward_step_calc_loss (0.16; forward_step calls it last, after
    the job's forward_step_func): on the last stage it runs the job's
    loss function.  Inside a recorded last-stage forward on the CPU
    (hook.loss_stage), the forward's block ends where this call begins
    and the rest of forward_step's call is a LOSS block of the stage and
    micro-batch (Recorder.cut): the loss computation is the last stage's
    work of its own kind, and F and LOSS lie side by side, never nested,
    so no time is counted twice.  Elsewhere (other stages, CUDA, where
    blocks are timed by events, or 0.13, which has no such function: the
    loss stays inside F) the call as it is."""
    loss_func_of = Param(orig, "loss_func", 2)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        si, r = hook.loss_stage, hook.rank
        if si is None or r is None or hook.failed or hook.paused:
            return orig(*args, **kwargs)
        try:
            if loss_func_of.of(args, kwargs) is not None:
                hook.cut = (_lib.SPAN_LOSS, si, r.now(), 0)
        except Exception as e:
            hook.fail("the loss", e)
        return orig(*args, **kwargs)
    return wrapper


def _wrap_backward(hook, orig):
    out_of = Param(orig, "output_tensor", 1)
    grad_of = Param(orig, "output_tensor_grad", 2)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if hook.rank is None or hook.failed or not hook.in_step or hook.paused:
            return orig(*args, **kwargs)
        try:
            # its forward's stage and micro-batch, by the output's identity
            stage, mb = hook.out_meta.pop(id(out_of.of(args, kwargs)), (hook.pp, -1))
            hook.recv_of(grad_of.of(args, kwargs), stage, mb)
        except Exception as e:
            out = orig(*args, **kwargs)
            hook.fail("a backward", e)
            return out
        out = _core.run_block(hook, orig, _lib.B, stage, mb, hook.cuda, args, kwargs)
        if hook.failed:
            return out
        try:
            for t in out if isinstance(out, list) else (out,):
                if t is not None:
                    hook.send_meta[id(t)] = (stage, mb)
        except Exception as e:
            hook.fail("a backward", e)
        return out
    return wrapper


# each tensor argument of the p2p functions: its kind and the direction of
# its peer on the pipeline (next: +1, previous: -1)
_P2P_ARGS = (("tensor_send_next", _lib.SEND_F, 1), ("tensor_send_prev", _lib.SEND_B, -1),
             ("tensor_recv_prev", _lib.RECV_F, -1), ("tensor_recv_next", _lib.RECV_B, 1))
_P2P_KIND = {name: kind for name, kind, _ in _P2P_ARGS}


# what a p2p call is while it runs: its first receive, else its first send
_P2P_OPEN = (("tensor_recv_prev", _lib.RECV_F, -1), ("tensor_recv_next", _lib.RECV_B, 1),
             ("tensor_send_next", _lib.SEND_F, 1), ("tensor_send_prev", _lib.SEND_B, -1))


def _wrap_p2p(hook, orig):
    """_batched_p2p_ops / _p2p_ops (keyword-only in every version known)."""

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or not hook.in_step or hook.paused:
            return orig(*args, **kwargs)
        t0 = r.now()
        hook.sched_in(t0)
        # issue 37 (heartbeat.py): a synchronous p2p call is a receive (or
        # a send) until it returns
        was = hook.now_open
        for name, kind, d in _P2P_OPEN:
            if kwargs.get(name) is not None:
                hook.now_open = (kind, hook.pp, -1, hook.step_index - 1, (hook.pp + d) % hook.P, t0)
                break
        try:
            reqs = orig(*args, **kwargs)
        finally:
            hook.now_open = was
        t1 = r.now()
        try:
            step = hook.current_step()
            P = hook.P
            peers = {}
            for name, kind, d in _P2P_ARGS:
                t = kwargs.get(name)
                if t is None:
                    continue
                peer = (hook.pp + d) % P   # the pipeline rank it talks to
                peers[name] = peer
                if kind in (_lib.SEND_F, _lib.SEND_B):
                    stage, mb = hook.send_meta.pop(id(t), (hook.pp, -1))
                    r.transfer(kind, stage, mb, peer, _nbytes(t), step, t0, t1)
                else:
                    hook.recv_pending[id(t)] = (kind, peer, _nbytes(t), t0, t1)
            # the requests, each a proxy whose wait is timed: a dict by
            # direction (_p2p_ops), or a list (batched: one peer if all agree)
            if isinstance(reqs, dict):
                for k, q in list(reqs.items()):
                    name = "tensor_" + k
                    reqs[k] = _Req(q, hook, peers.get(name, -1), _P2P_KIND.get(name, _lib.WAIT))
            elif isinstance(reqs, list):
                # a batch's wait is named by its receive, and waits for that
                # peer (send_forward_recv_backward waits for the gradient)
                recvs = [n for n in peers if _P2P_KIND[n] in (_lib.RECV_F, _lib.RECV_B)]
                if len(recvs) == 1:
                    kind, peer = _P2P_KIND[recvs[0]], peers[recvs[0]]
                else:
                    one, kinds = set(peers.values()), {_P2P_KIND[n] for n in peers}
                    peer = one.pop() if len(one) == 1 else -1
                    kind = kinds.pop() if len(kinds) == 1 else _lib.WAIT
                reqs[:] = [_Req(q, hook, peer, kind) for q in reqs]
            hook.sched_out(r.now())
        except Exception as e:
            hook.fail("a transfer", e)
        return reqs
    return wrapper


def _version():
    try:
        from megatron.core import package_info
        return package_info.__version__, (int(package_info.MAJOR), int(package_info.MINOR))
    except Exception:
        return None, None


def _check(sched, p2p, version, vt):
    if vt is None:
        return "cannot read megatron-core's version"
    lo, hi = KNOWN
    if not (lo <= vt <= hi) and not os.environ.get("PIPESCOPE_MEGATRON_ANY"):
        return (f"megatron-core {version} is not one this hook knows ({lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}); "
                f"set PIPESCOPE_MEGATRON_ANY=1 to try")
    need = [(sched, n) for n in list(_SCHEDULES) + ["forward_step", "backward_step", "get_model_config",
                                                   "get_schedule_table", "get_pp_rank_microbatches"]]
    need += [(p2p, n) for n in ("_batched_p2p_ops", "_p2p_ops")]
    missing = [n for obj, n in need if not hasattr(obj, n)]
    if missing:
        return f"megatron-core {version} lacks {', '.join(missing)}"
    return None


def instrument():
    """Records this process's megatron-core pipeline schedules from now on.
    Idempotent; True when recording is set up, False (said in one line)
    when the job is left untouched."""
    global _hook
    with _lock:
        if _hook is not None:
            return True
        try:
            import torch
            import torch.distributed as dist
            from megatron.core import parallel_state as ps
            from megatron.core.pipeline_parallel import p2p_communication as p2p
            from megatron.core.pipeline_parallel import schedules as sched
        except Exception as e:
            _say(f"not recording: cannot import megatron-core's schedules ({e})")
            return False
        version, vt = _version()
        why = _check(sched, p2p, version, vt)
        if why is not None:
            _say(f"not recording: {why}; the job runs untouched")
            return False
        if _lib.load() is None:
            _say(f"not recording: {_lib.last_error}")
            return False
        hook = _Hook(torch, dist, version, sched, ps)
        try:
            for name in _SCHEDULES:
                setattr(sched, name, _wrap_schedule(hook, getattr(sched, name), name))
            if hasattr(sched, "forward_backward_no_pipelining"):
                sched.forward_backward_no_pipelining = _wrap_no_pipelining(
                    hook, sched.forward_backward_no_pipelining)
            sched.forward_step = _wrap_forward(hook, sched.forward_step)
            if hasattr(sched, "forward_step_calc_loss"):
                sched.forward_step_calc_loss = _wrap_calc_loss(hook, sched.forward_step_calc_loss)
            sched.backward_step = _wrap_backward(hook, sched.backward_step)
            p2p._batched_p2p_ops = _wrap_p2p(hook, p2p._batched_p2p_ops)
            p2p._p2p_ops = _wrap_p2p(hook, p2p._p2p_ops)
        except Exception as e:
            hook.fail("installing the hook", e)
            _hook = hook
            return False
        try:
            _core.opt_hooks(hook)
        except Exception as e:
            _say(f"optimizer steps not recorded ({e})")
        try:
            _install_bucket_syncs(hook)
        except Exception as e:
            _say(f"megatron-core's data-parallel syncs not recorded ({e})")
        _core.close_at_exit(hook)
        _hook = hook
        return True


def close():
    """Ends recording now (the trace file is complete); atexit does it too."""
    _core.close_now(_hook)
