"""pipescope.deepspeed — records a DeepSpeed pipeline job, unchanged.

    import pipescope.deepspeed
    pipescope.deepspeed.instrument()

(or run the job under ``pipescope-cli profile -- torchrun ...``: the
autoload does this when the process imports deepspeed.runtime.pipe.engine,
which ``import deepspeed`` does; nothing is recorded until a pipe engine's
train_batch runs, so a DeepSpeed job without a pipeline is left as it was).  What it wraps, all
in DeepSpeed's own code, never the user's:

  * PipelineEngine.train_batch (DualPipeVEngine's is the same method): one
    call is one step (step markers, the description, the plan, the loss:
    what train_batch returns, the engine's aggregated train loss, the mean
    over micro-batches and data-parallel replicas, recorded by the loss
    stage's processes);
  * the engine's instruction methods, through its own dispatch table
    _INSTRUCTION_MAP (a class attribute: each class's table is replaced by
    one of wrappers, so a subclass that builds its table from its parent's,
    as DualPipeVEngine does, gets wrappers too):
      ForwardPass, BackwardPass   F and B blocks of the stage and micro-batch;
      SendActivation, RecvActivation, SendGrad, RecvGrad
                                  transfers with their peer (the pipeline rank)
                                  and bytes; blocking under TrainSchedule
                                  (dist.send / dist.recv), so the span is the
                                  transfer and the wait for the peer together;
      CommitP2P (DualPipeV)       the queued sends and receives run here, as
                                  one batch: each becomes a transfer over the
                                  commit's time;
      LoadMicroBatch              host work (HOST_DATA);
      ReduceTiedGrads, ReduceGrads
                                  data-parallel blocks (REDUCE_GRAD);
      OptimizerStep               the optimizer (OPT);
  * the schedules' steps() (TrainSchedule, DualPipeVSchedule): the engine
    passes buffer ids; the micro-batch is the schedule's own mapping
    (TrainSchedule._step_to_micro_batch of the step being executed, a
    send's the previous step's micro-batch, as TrainSchedule builds them;
    DualPipeV's buffer phase x M + micro-batch).

Stages: TrainSchedule runs one stage a pipeline rank (stage = the grid's
stage id); DualPipeV two, stage_id (phase 0) and 2P - 1 - stage_id (phase 1).
The place (pp, dp, tp) is the engine's grid's (PipeDataParallelTopology or
PipeModelDataParallelTopology).  The plan is the schedule object's own order
of ForwardPass and BackwardPass for this stage.

It never raises into the job, never changes what it computes (the wrapped
methods get the same arguments; results and exceptions pass through), and
leaves a DeepSpeed version it does not know alone, with one line.
"""

import functools
import os
import threading

from . import core as _core
from . import lib as _lib

KNOWN = ((0, 16), (0, 19))   # the DeepSpeed lines whose pipe engine this hook knows (0.16.9, 0.19.8 tested)

_hook = None
_lock = threading.Lock()
_say = _core.say

# instruction class name -> what it is: (kind, role)
_BLOCKS = {"ForwardPass": _lib.F, "BackwardPass": _lib.B}
_TRANSFERS = {  # kind, direction of the peer on the pipeline, phase 0
    "SendActivation": (_lib.SEND_F, 1), "RecvActivation": (_lib.RECV_F, -1),
    "SendGrad": (_lib.SEND_B, -1), "RecvGrad": (_lib.RECV_B, 1),
}


def _nbytes(x):
    """Bytes of a tensor or of the tensors in a tuple or list; 0 unknown."""
    try:
        if x is None:
            return 0
        if hasattr(x, "numel"):
            return int(x.numel() * x.element_size())
        if isinstance(x, (list, tuple)):
            return sum(_nbytes(t) for t in x)
    except Exception:
        pass
    return 0


class _Hook(_core.Recorder):
    """The recording of this process (core.Recorder) as DeepSpeed's pipe
    engine drives it: what only DeepSpeed has is here."""

    def __init__(self, torch, dist, version, sched_mod):
        super().__init__(torch)
        self.dist, self.version, self.sched_mod = dist, version, sched_mod
        self.pp, self.P, self.M = 0, 1, 1
        self.dualpipev = False
        self.cuda = False
        self.engine = None
        self.in_batch = False
        # the schedule step being executed: (schedule, step id, its
        # micro-batch, the previous step's) for TrainSchedule
        self.cur = None
        self.queued = []          # DualPipeV: transfers queued until CommitP2P
        self.ds_peer_global = {}  # a transfer's peer stage -> its global rank (_open_of)
        self.wrapped_tables = set()   # engine classes whose _INSTRUCTION_MAP is ours

    # ---- the rank ------------------------------------------------------------
    def open(self, engine):
        if self.rank is not None or self.failed:
            return self.rank
        grid = engine.grid
        self.engine = engine
        self.pp = int(grid.get_stage_id())
        self.P = int(grid.get_pipe_parallel_world_size())
        self.dualpipev = isinstance(train_schedule(engine, self.sched_mod),
                                    getattr(self.sched_mod, "DualPipeVSchedule", ()))
        g = _core.global_rank(self.dist, self.pp)
        coord = [self.pp, int(grid.get_data_parallel_id()), int(grid.get_slice_parallel_rank()), 0, 0]
        size = [self.P, int(grid.get_data_parallel_world_size()), int(grid.get_slice_parallel_world_size()), 1, 1]
        try:
            place = self.settle_place(g, (coord, size), self.pp)
        except Exception as e:
            _say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
            place = None
        try:
            self.cuda = str(getattr(engine, "device", "cpu")).startswith("cuda")
        except Exception:
            self.cuda = False
        self.py_sched = not self.cuda
        return self.open_rank(self.pp, self.P, "deepspeed", g, place, self.cuda, not self.cuda)

    def stage_of(self, phase):
        return self.pp if not phase else 2 * self.P - 1 - self.pp

    # ---- the step ------------------------------------------------------------
    def begin(self, engine):
        if self.open(engine) is None:
            return None
        self.M = int(engine.micro_batches)
        if not self.described:
            self.describe(engine)
        if not self.planned:
            self.write_plan(engine)
        self.queued = []
        self.cur = None
        return self.step_begin()

    def end(self, idx, loss):
        if self.rank is None:
            return
        self.flush_queued(None, None)
        e = self.engine
        try:
            here = e._is_loss_stage(1) if self.dualpipev else e.is_last_stage()
        except Exception:
            here = self.pp == self.P - 1
        if here and hasattr(loss, "detach") and int(e.grid.get_slice_parallel_rank()) == 0:
            self.losses = [loss.detach()]
        self.step_end(idx, self.pp)

    def describe(self, engine):
        name = "DeepSpeed-DualPipeV" if self.dualpipev else "DeepSpeed-1F1B"
        try:
            pg = self.dist.get_backend() if self.dist.is_initialized() else "none"
        except Exception:
            pg = "?"
        grid = engine.grid
        try:
            n = sum(p.numel() for p in engine.module.parameters())
        except Exception:
            n = 0
        cls = "DualPipeVSchedule" if self.dualpipev else "TrainSchedule"
        model = (f"DeepSpeed {self.version} {pg} {engine.__class__.__name__} {cls}; "
                 f"pp {self.P} dp {grid.get_data_parallel_world_size()} "
                 f"tp {grid.get_slice_parallel_world_size()}; gradient_accumulation_steps {self.M}; "
                 f"params of rank {self.pp}'s stage{'s' if self.dualpipev else ''} {_core.count(n)}")
        self.describe_job(name, "cuda" if self.cuda else "cpu", self.P, self.M, 2 if self.dualpipev else 1, model)

    def write_plan(self, engine):
        """This rank's order: the schedule object's ForwardPass and
        BackwardPass, in the order its steps() yields them."""
        self.planned = True
        try:
            acts = plan_order(train_schedule(engine, self.sched_mod), self.dualpipev, self.P, self.pp, self.M)
        except Exception as e:
            _say(f"the plan not recorded ({e.__class__.__name__}: {e}); recording goes on")
            return
        self.plan(self.pp, [(k, s, m, -1, -1, -1) for k, s, m in acts])

    # ---- the micro-batch of an instruction -----------------------------------
    def mb_of(self, name, kwargs):
        b = kwargs.get("buffer_id")
        if b is None:
            return -1
        if self.dualpipev:
            return int(b) % self.M
        cur = self.cur
        if cur is None:
            return -1
        _, _, mb, prev = cur
        return prev if name in ("SendActivation", "SendGrad") else mb

    def flush_queued(self, t0, t1):
        """DualPipeV's queued transfers, run by the CommitP2P at [t0, t1]
        (None: the step ended with some queued, which no commit ran)."""
        q, self.queued = self.queued, []
        if t0 is None:
            return
        r = self.rank
        step = self.current_step()
        for kind, stage, mb, peer, nbytes in q:
            r.transfer(kind, stage, mb, peer, nbytes, step, t0, t1)


def plan_order(sched, dualpipev, P, pp, M):
    """[(kind, stage, mb)] of the F and B blocks the schedule runs on
    pipeline rank pp, in its steps()'s order."""
    acts = []
    for i, cmds in enumerate(_orig_steps(sched)):
        for c in cmds:
            kind = _BLOCKS.get(type(c).__name__)
            if kind is None:
                continue
            b = int(c.kwargs["buffer_id"])
            if dualpipev:
                phase = int(c.kwargs.get("phase", 0))
                acts.append((kind, pp if not phase else 2 * P - 1 - pp, b % M))
            else:
                acts.append((kind, pp, sched._step_to_micro_batch(i)[0]))
    return acts


def _orig_steps(sched):
    """The schedule's own steps(), not our wrapper's (no step tracked)."""
    fn = getattr(type(sched).steps, "__wrapped__", None) or type(sched).steps
    return fn(sched)


# ---- the wrappers: the original runs exactly once, its result and exceptions untouched ----

def _wrap_steps(hook, orig):
    """A schedule's steps(): the step id and micro-batch of the commands it
    yields, for the instructions that follow (TrainSchedule's mapping)."""
    @functools.wraps(orig)
    def steps(self, *args, **kwargs):
        gen = orig(self, *args, **kwargs)
        if not hook.in_batch or hook.failed or hook.dualpipev:
            yield from gen
            return
        prev = -1
        for i, cmds in enumerate(gen):
            try:
                mb = int(self._step_to_micro_batch(i)[0])
                hook.cur = (self, i, mb, prev)
                prev = mb
            except Exception as e:
                hook.fail("the schedule's steps", e)
            yield cmds
    return steps


def _wrap_train_batch(hook, orig):
    @functools.wraps(orig)
    def train_batch(self, *args, **kwargs):
        if hook.failed or hook.in_batch or not hasattr(self, "_INSTRUCTION_MAP"):
            return orig(self, *args, **kwargs)
        if hook.alternate:
            # the benchmark's paired steps: every other step unrecorded
            hook.calls += 1
            hook.set_paused(hook.calls % 2 == 0)
            if hook.paused:
                return orig(self, *args, **kwargs)
        idx = None
        try:
            _wrap_tables(hook, type(self))
            idx = hook.begin(self)
        except Exception as e:
            hook.fail("a step", e)
        hook.in_batch = idx is not None
        out = None
        try:
            out = orig(self, *args, **kwargs)
            return out
        finally:
            hook.in_batch = False
            hook.cur = None
            if idx is not None and not hook.failed:
                try:
                    hook.end(idx, out)
                except Exception as e:
                    hook.fail("a step's end", e)
    return train_batch


def _wrap_instruction(hook, cls_name, orig):
    """One entry of an engine's _INSTRUCTION_MAP: the method the engine
    binds and calls with the instruction's kwargs."""
    block = _BLOCKS.get(cls_name)
    transfer = _TRANSFERS.get(cls_name)

    @functools.wraps(orig)
    def instr(self, *args, **kwargs):
        r = hook.rank
        if r is None or hook.failed or not hook.in_batch or hook.paused:
            return orig(self, *args, **kwargs)
        try:
            phase = int(kwargs.get("phase", 0) or 0)
            stage = hook.stage_of(phase)
            mb = hook.mb_of(cls_name, kwargs)
        except Exception as e:
            out = orig(self, *args, **kwargs)
            hook.fail("an instruction", e)
            return out
        if block is not None:
            return _core.run_block(hook, orig, block, stage, mb, hook.cuda, (self,) + args, kwargs)
        t0 = r.now()
        hook.sched_in(t0)
        # issue 37 (heartbeat.py): what the training thread is in until it returns
        was = hook.now_open
        try:
            now = _open_of(hook, self, cls_name, transfer, phase, stage, mb, t0)
        except Exception as e:
            now = None
            hook.fail("an instruction", e)
        if now is not None:
            hook.now_open = now
        try:
            out = orig(self, *args, **kwargs)
        finally:
            hook.now_open = was
        t1 = r.now()
        try:
            step = hook.current_step()
            if transfer is not None:
                kind, d = transfer
                d = d if not phase else -d            # phase 1 flows the other way
                peer = hook.pp + d
                nbytes = _transfer_bytes(self, cls_name, kwargs.get("buffer_id"))
                if hook.dualpipev:
                    hook.queued.append((kind, stage, mb, peer, nbytes))
                else:
                    r.transfer(kind, stage, mb, peer, nbytes, step, t0, t1)
            elif cls_name == "CommitP2P":
                hook.flush_queued(t0, t1)
            elif cls_name == "LoadMicroBatch":
                r.block(_lib.SPAN_HOST_DATA, -1, -1, step, t0, t1)
            elif cls_name in ("ReduceGrads", "ReduceTiedGrads"):
                hook.dp_block(_lib.SPAN_REDUCE_GRAD, hook.pp, t0, t1)
            elif cls_name == "OptimizerStep":
                r.block(_lib.OPT, -1, -1, step, t0, t1)
            hook.sched_out(r.now())
        except Exception as e:
            hook.fail("an instruction", e)
        return out
    return instr


def _open_of(hook, engine, cls_name, transfer, phase, stage, mb, t0):
    """The open action (heartbeat.py) of an instruction other than a
    block: a transfer with its peer's global rank (DeepSpeed's grid, each
    peer's asked once), the gradient all-reduce, the optimizer; None for
    the rest (loading a micro-batch, DualPipeV's CommitP2P)."""
    step = hook.step_index - 1
    if transfer is not None:
        kind, d = transfer
        ps = hook.pp + (d if not phase else -d)
        peers = hook.ds_peer_global
        g = peers.get(ps)
        if g is None:
            try:
                g = int(engine.grid.stage_to_global(ps)) if 0 <= ps < hook.P else -1
            except Exception:
                g = ps    # its pipeline rank: pp-stuck.c reads either
            peers[ps] = g
        return (kind, stage, mb, step, g, t0)
    if cls_name in ("ReduceGrads", "ReduceTiedGrads"):
        return (_lib.SPAN_REDUCE_GRAD, hook.pp, -1, step, -1, t0)
    if cls_name == "OptimizerStep":
        return (_lib.OPT, -1, -1, step, -1, t0)
    return None


def _transfer_bytes(engine, cls_name, buffer_id):
    """The bytes an instruction moved, from the engine's buffers after it
    ran (0 where they do not say)."""
    try:
        bufs = engine.pipe_buffers
        if cls_name == "SendActivation":
            return _nbytes(bufs["outputs"][buffer_id])
        if cls_name == "RecvActivation":
            return _nbytes(bufs["inputs"][buffer_id])
        if cls_name == "RecvGrad":
            g = bufs.get("grads")
            return _nbytes(g[buffer_id] if g else getattr(engine, "grad_layer", None))
        if cls_name == "SendGrad":
            x = bufs["inputs"][buffer_id]
            xs = x if isinstance(x, (list, tuple)) else [x]
            return sum(_nbytes(t.grad) for t in xs if t is not None and getattr(t, "grad", None) is not None)
    except Exception:
        pass
    return 0


def _wrap_tables(hook, engine_cls):
    """Every _INSTRUCTION_MAP of engine_cls and its bases replaced by one
    of wrappers, once a class.  Done at an engine's first train_batch, not
    at import: a subclass (DualPipeVEngine) builds its table from its
    parent's when its module runs, which may be while the parent's module
    is still being imported; the engine looks the table up at each
    instruction, so a table replaced later is the one it uses."""
    for cls in engine_cls.__mro__:
        if cls not in hook.wrapped_tables and "_INSTRUCTION_MAP" in cls.__dict__:
            _wrap_map(hook, cls)
            hook.wrapped_tables.add(cls)


def _wrap_map(hook, cls):
    """cls's own _INSTRUCTION_MAP replaced by one of wrappers (a class's
    table, not its parent's; an entry already wrapped is kept)."""
    table = cls.__dict__.get("_INSTRUCTION_MAP")
    if not table:
        return
    wrapped = {}
    for instr_cls, fn in table.items():
        if getattr(fn, "_pipescope", False):
            wrapped[instr_cls] = fn
            continue
        w = _wrap_instruction(hook, instr_cls.__name__, fn)
        w._pipescope = True
        wrapped[instr_cls] = w
    cls._INSTRUCTION_MAP = wrapped


def train_schedule(engine, sched_mod):
    """The schedule train_batch runs: the engine's own _train_schedule()
    (newer lines; DualPipeVEngine's is DualPipeV's), or where it lacks one the
    TrainSchedule that 0.16's train_batch builds inline, from the same
    three attributes."""
    own = getattr(engine, "_train_schedule", None)
    if own is not None:
        return own()
    return sched_mod.TrainSchedule(micro_batches=engine.micro_batches, stages=engine.num_stages,
                                   stage_id=engine.stage_id)


def _version():
    try:
        # its distribution's metadata: the package itself may still be
        # importing when its pipe engine is (the autoload engages then)
        from importlib import metadata
        v = metadata.version("deepspeed")
        parts = v.split(".")
        return v, (int(parts[0]), int(parts[1]))
    except Exception:
        return None, None


def _check(engine_mod, sched_mod, version, vt):
    if vt is None:
        return "cannot read DeepSpeed's version"
    lo, hi = KNOWN
    if not (lo <= vt <= hi) and not os.environ.get("PIPESCOPE_DEEPSPEED_ANY"):
        return (f"DeepSpeed {version} is not one this hook knows ({lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}); "
                f"set PIPESCOPE_DEEPSPEED_ANY=1 to try")
    eng = getattr(engine_mod, "PipelineEngine", None)
    missing = [n for n in ("train_batch", "_INSTRUCTION_MAP") if not hasattr(eng, n)]
    missing += [n for n in ("TrainSchedule",) if not hasattr(sched_mod, n)]
    if eng is not None and not missing:
        names = {c.__name__ for c in eng._INSTRUCTION_MAP}
        missing += sorted((set(_BLOCKS) | set(_TRANSFERS)) - names)
    if missing:
        return f"DeepSpeed {version} lacks {', '.join(missing)}"
    return None


def instrument():
    """Records this process's DeepSpeed pipeline engines from now on.
    Idempotent; True when recording is set up, False (said in one line)
    when the job is left untouched."""
    global _hook
    with _lock:
        if _hook is not None:
            return True
        try:
            import torch
            import torch.distributed as dist
            from deepspeed.runtime.pipe import engine as engine_mod
            from deepspeed.runtime.pipe import schedule as sched_mod
        except Exception as e:
            _say(f"not recording: cannot import DeepSpeed's pipe engine ({e})")
            return False
        version, vt = _version()
        why = _check(engine_mod, sched_mod, version, vt)
        if why is not None:
            _say(f"not recording: {why}; the job runs untouched")
            return False
        if _lib.load() is None:
            _say(f"not recording: {_lib.last_error}")
            return False
        hook = _Hook(torch, dist, version, sched_mod)
        try:
            eng = engine_mod.PipelineEngine
            eng.train_batch = _wrap_train_batch(hook, eng.train_batch)
            sched_mod.TrainSchedule.steps = _wrap_steps(hook, sched_mod.TrainSchedule.steps)
        except Exception as e:
            hook.fail("installing the hook", e)
            _hook = hook
            return False
        _core.close_at_exit(hook)
        _hook = hook
        return True


def close():
    """Ends recording now (the trace file is complete); atexit does it too."""
    _core.close_now(_hook)
