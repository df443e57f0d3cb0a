"""pipescope.core — what every framework's hook shares: one process's recording.

An adapter (torch.py for torch.distributed.pipelining; one a framework)
knows its framework's schedule and wraps its methods; what it sees it hands
to a Recorder here, which knows nothing of any framework's classes:

  * open_rank: the library's rank for this process, its trace file named
    by global rank, its place on the job's mesh (settle_place checks a
    place the adapter read), CUPTI where the stages are on CUDA;
  * describe and plan: the description and the plan, as tuples of the C
    API's six integers (kind, stage, mb, b_kind, b_stage, b_mb);
  * block, overlap_end, waits charged to the next block, steps, losses,
    the optimizer's OPT blocks (opt_hooks), close;
  * on CUDA, blocks timed by CUDA events resolved once they have passed,
    never by a synchronisation (gpu_events, gpu_block, resolve_gpu), and
    their kernels tagged with the block's id where CUPTI runs (run_block);
  * fail: a failure of the hook is said once and recording stops; the job
    never sees it;
  * what the training thread does between blocks (issue 29; host.py).

It uses torch (CUDA events, autograd's threads, the optimizers' global
hooks), which every framework the hook knows runs on, and nothing of any
framework built on it.
"""

import os
import socket
import sys
import threading

from . import heartbeat as _heartbeat
from . import host as _host
from . import lib as _lib
from .say import say   # noqa: F401  (the adapters' _core.say)


def count(n):
    """n as a short number (12.3k, 4.56M)."""
    if n >= 1e9:
        return f"{n / 1e9:.2f}G"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return str(n)


def job_from_launcher():
    """One name for every rank of a job started without `pipescope-cli
    profile`: torchrun's run id, else the rendezvous address."""
    rid = os.environ.get("TORCHELASTIC_RUN_ID")
    if rid and rid != "none":
        return f"torch-{rid}"[:60]
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        return f"torch-{addr}-{port}"[:60]
    return None


def global_rank(dist, default):
    """This process's global rank, or default where torch.distributed has none."""
    try:
        return dist.get_rank() if dist is not None and dist.is_initialized() else default
    except Exception:
        return default


class Recorder:
    def __init__(self, torch):
        self.torch = torch
        self.rank = None          # lib.Rank once the first step runs
        self.failed = False       # a failure of the hook: record nothing more
        self.step_index = 0       # steps begun in this process
        self.in_step = 0
        self.described = False
        self.planned = False
        self.observed = []        # first step's compute order (a plan where none is given)
        self.pending_waits = []   # waits before the next block: (peer, t0, t1)
        self.overlap = None       # inside an overlapped action: list of blocks
        self.losses = []
        self.loss_pending = []    # (step, tensors, event) resolved without a sync
        self.opt_t0 = None
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
        # else they call the Python wrappers of the adapter
        self.fast = None
        self.cpu = False
        # (kind, stage, t, bytes): the next block of stage whose call holds
        # t ends there, the rest of it recorded as kind (a data-parallel
        # action that finishes inside the block's call; LOSS: the loss
        # computation megatron-core runs at the end of a last-stage
        # forward, with the block's micro-batch); the C wrappers' set_cut
        # where they record
        self.cut = None
        # zero_grad belongs to the step it precedes: one called between
        # steps waits here, (t0, t1), for the next step's index
        self.zero_grads = []
        # the loss as the job reduces it (loss_is_part): None until decided
        self.loss_part = None
        # issue 29 (host.py): the training thread's GC pauses and block
        # edges, set up at the first step on the thread that runs it
        self.host = None
        # the adapter's blocks go through the compiled wrappers (torch.py):
        # they sample the block edges and time the schedule's own code; an
        # adapter of Python wrappers (megatron.py) gets the edges from
        # run_block and times the schedule's code with sched_in/out
        self.compiled_blocks = False
        # an adapter of Python wrappers on the CPU (megatron.py) times the
        # schedule's own code itself: from a wrapper's exit (sched_out) to
        # the next one's entry (sched_in), within a step; 0: not in one
        self.py_sched = False
        self.sched_from = 0
        # issue 37 (heartbeat.py): the action the training thread is in
        # now through a Python wrapper, (kind, stage, mb, step, peer, t0)
        # or None, and a DDP stage's all-reduce past its last gradient,
        # (stage, kind, t) or None: stored here, read by the hook's own
        # thread, which says them in the trace and the live stream
        self.now_open = None
        self.dp_open = None
        self.heartbeat = None

    # ---- failure: never into the job ----------------------------------------
    def fail(self, what, exc):
        if not self.failed:
            self.failed = True
            self.sync_fast()
            say(f"recording stopped ({what}: {exc.__class__.__name__}: {exc}); the job runs on")

    def sync_fast(self):
        f = self.fast
        if f is not None:
            # 1: record; 2: a paused step, the calls and nothing else; 0: Python
            f.set_on((2 if self.paused else 1) if self.rank is not None and not self.failed and self.cpu
                     else 0)

    def set_paused(self, paused):
        self.paused = paused
        if paused:
            self.zero_grads.clear()   # they precede a step not recorded
        self.sync_fast()
        if self.host is not None:
            self.host.set_paused(paused)

    def current_step(self):
        """The step records belong to: the one begun last."""
        si = self.step_index
        return si - 1 if si > 0 else 0

    # ---- the rank ------------------------------------------------------------
    def open_rank(self, pipeline_rank, n_ranks, runtime, process, place, cuda, cpu):
        """Opens this process's rank: pipeline rank pipeline_rank of
        n_ranks, global rank process, place (coord, size) or None (see
        settle_place); cuda: its stages are on CUDA (CUPTI tried); cpu:
        all are on the CPU (the C wrappers may record).  None (said in one
        line) where the library refuses it."""
        if self.rank is not None or self.failed:
            return self.rank
        job = os.environ.get("PIPESCOPE_JOB") or job_from_launcher()
        trace = os.environ.get("PIPESCOPE_TRACE")
        if trace:
            # by global rank: the replicas of one pipeline rank never collide
            trace = f"{trace}.rank{process}"
        rank, err = _lib.Rank.open(job, int(pipeline_rank), int(n_ranks), runtime, trace,
                                   os.environ.get("PIPESCOPE_RANK_LISTEN"))
        if rank is None:
            self.failed = True
            say(f"not recording: {err}")
            return None
        self.rank = rank
        rank.rank_info(socket.gethostname())
        place_fn = getattr(rank, "place", None)   # a lib.py before Rank.place: records as before
        if place is not None and place_fn is not None:
            try:
                place_fn(process, *place)   # False: a library without places; the same records
            except Exception as e:
                say(f"the process's place not recorded ({e.__class__.__name__}: {e}); recording goes on")
        if cuda:
            self.start_device(rank)
        self.cpu = cpu
        self.fast = rank.fast
        if self.fast is not None:
            self.fast.set_fail(self.fail)
            self.sync_fast()
        if os.environ.get("PIPESCOPE_HEARTBEAT") != "0":
            try:
                self.heartbeat = _heartbeat.Heartbeat(self, rank, threading.get_ident(), say)
            except Exception as e:
                say(f"no heartbeat ({e.__class__.__name__}: {e}); recording goes on")
        return rank

    @staticmethod
    def settle_place(process, place, pipeline_rank):
        """The place to record of a process with global rank process and
        pipeline rank pipeline_rank, from the place (coord, size) an
        adapter read, or None: one that disagrees with the pipeline rank is
        said in one line and not recorded; one process a pipeline rank with
        global rank = pipeline rank needs none (the trace says as much
        without one, as before: its registry name and frames unchanged)."""
        if place is None:
            return None
        coord, size = place
        if coord[0] != pipeline_rank:
            say(f"the process's place not recorded (pipeline rank {coord[0]} in the stage's group, "
                f"{pipeline_rank} in the schedule); recording goes on")
            return None
        if process == pipeline_rank and all(n == 1 for n in size[1:]):
            return None
        return place

    def start_device(self, rank):
        """The library's CUPTI collector for this rank, where it can run; one
        line where it cannot, and the blocks keep their CUDA events' times."""
        if os.environ.get("PIPESCOPE_CUPTI") == "0" or not rank.has_device:
            return
        rc, why = rank.device_start()
        if rc != 0:
            say(f"kernels and copies not recorded ({why}); blocks timed by CUDA events")
            return
        self.single_thread = getattr(self.torch.autograd, "set_multithreading_enabled", None)
        self.device = True

    def describe_job(self, name, backend, n_ranks, n_microbatches, n_virtual, model):
        """The job's description (the command line is this process's)."""
        self.described = True
        cmd = " ".join(sys.argv)
        self.rank.describe(name, backend, int(n_ranks), int(n_microbatches), int(n_virtual),
                           model[:255], cmd[:1023])

    def plan(self, pipeline_rank, actions):
        """The plan of pipeline rank pipeline_rank: actions as tuples of six
        integers (kind, stage, mb, b_kind, b_stage, b_mb)."""
        self.rank.plan(int(pipeline_rank), list(actions))
        self.planned = True

    # ---- the schedule's own code (Python wrappers) -----------------------------
    def sched_in(self, t):
        """A wrapped call of the schedule's (a block, a transfer, a wait)
        begins at t: the stretch since the last one's end is HOST_SCHEDULE."""
        f = self.sched_from
        r = self.rank
        if f and t > f and r is not None:
            r.block(_lib.SPAN_HOST_SCHEDULE, -1, -1, self.current_step(), f, t)

    def sched_out(self, t):
        """The wrapped call ends at t: the schedule's code again."""
        if self.sched_from:
            self.sched_from = t

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
        cut, t_end = self.cut, t1
        if cut is not None:
            self.cut = None
            if cut[1] == stage and t0 <= cut[2] <= t1:
                t1 = cut[2]
            else:
                cut = None
        r.block(kind, stage, mb, step, t0, t1)
        if si == 1 and self.in_step:
            self.observed.append((kind, stage, mb, -1, -1, -1))
        if cut is None:
            return
        if cut[0] == _lib.SPAN_LOSS:
            r.block(_lib.SPAN_LOSS, stage, mb, step, t1, t_end)   # work of the stage, never a plan action
        else:
            self.dp_block(cut[0], stage, t1, t_end, cut[3])

    def loss_block(self, stage, mb, t0, t1):
        """The loss computation of stage's micro-batch mb (lib.SPAN_LOSS):
        the last stage's work inside the schedule's loss call, t0 to t1 on
        the host's clock; not a plan action (the analysis gives its cost to
        the stage).  Inside an overlapped action, nothing: the pair's block
        holds it."""
        r = self.rank
        if r is None or self.overlap is not None:
            return
        r.block(_lib.SPAN_LOSS, stage, mb, self.current_step(), t0, t1)

    def gpu_loss_block(self, stage, mb, e0):
        """loss_block on CUDA: timed by CUDA events (e0 recorded before
        the call, the end recorded now), resolved once they have passed."""
        if self.overlap is not None:
            return
        e1 = self.torch.cuda.Event(enable_timing=True)
        e1.record()
        self.gpu_pending.append(("block", e0, e1, (0, _lib.SPAN_LOSS, stage, mb, self.current_step())))

    def dp_nested(self, kind, stage, t0, t1, nbytes=0):
        """A data-parallel collective a framework ran inside whatever the
        process was doing (FSDP2's all-gathers in its pre-forward and
        pre-backward hooks, its reduce-scatters after a backward, megatron-
        core's bucket syncs): a span of kind (lib.SPAN_UNSHARD: parameters
        gathered; lib.SPAN_REDUCE_GRAD: gradients reduced) of stage, mb -1,
        nested in time in the block that issued it (the analysis takes it
        out of that block's compute and gives it to dp_comm).  Never a plan
        action: the schedule did not run it.  Host-timed (on CUDA the issue,
        as dp_block)."""
        r = self.rank
        if r is not None:
            r.dp_block(kind, stage, self.current_step(), t0, t1, int(nbytes))

    def dp_block(self, kind, stage, t0, t1, nbytes=0):
        """A data-parallel action of stage (lib.SPAN_UNSHARD, SPAN_RESHARD,
        SPAN_REDUCE_GRAD, SPAN_WAIT_REDUCE_GRAD; micro-batch -1) with the
        bytes it moves (0: not known); in step 0's order, as the plan where
        none is given.  Host-timed: on CUDA the issue of the work, not the
        work (a collective's wait is where its time shows on the host)."""
        r = self.rank
        if r is None:
            return
        r.dp_block(kind, stage, self.current_step(), t0, t1, int(nbytes))
        if self.step_index == 1 and self.in_step:
            self.observed.append((kind, stage, -1, -1, -1, -1))

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

    def overlap_begin(self):
        """From now to overlap_end, blocks are gathered, not recorded."""
        self.overlap = []
        if self.fast is not None:
            self.fast.set_overlap(self.overlap)

    def overlap_stop(self):
        """The blocks gathered since overlap_begin; gathering ends."""
        blocks, self.overlap = self.overlap, None
        if self.fast is not None:
            self.fast.set_overlap(None)
        return blocks or []

    def overlap_end(self, blocks):
        """Records blocks gathered in one overlapped action: its first
        forward and first backward as one overlapped pair, the rest as
        blocks."""
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
    def step_begin(self):
        """A step begins (the rank open): its index."""
        r = self.rank
        self.resolve_losses(final=False)
        self.losses = []
        idx = self.step_index
        self.step_index += 1
        if self.host is None:
            self.host = _host.Host(self)   # on the thread that runs the steps
        if self.fast is not None:
            self.fast.set_step(idx)
            if idx == 0:
                self.fast.set_observed(self.observed)   # a plan where none is given
        r.step(idx, 0, r.now())
        if self.zero_grads:
            # the zero_grad calls since the last step precede this one
            for t0, t1 in self.zero_grads:
                r.block(_lib.SPAN_HOST_ZERO_GRAD, -1, -1, idx, t0, t1)
            self.zero_grads.clear()
        if self.fast is not None and self.compiled_blocks:
            self.fast.sched(r.now())   # the schedule's own code from here
        elif self.py_sched:
            self.sched_from = r.now()
        return idx

    def step_end(self, idx, pipeline_rank):
        """Step idx ends; after step 0, with no plan written, the order it
        ran is pipeline rank pipeline_rank's plan."""
        r = self.rank
        if r is None:
            return
        if self.fast is not None and self.compiled_blocks:
            self.fast.sched(-r.now())   # the schedule's last stretch
        elif self.sched_from:
            self.sched_in(r.now())
            self.sched_from = 0
        if self.gpu_pending:
            self.resolve_gpu()
        if self.fast is not None:
            self.fast.set_observed(None)
        r.step(idx, 1, r.now())
        if idx == 0 and self.observed and not self.planned:
            self.plan(pipeline_rank, self.observed)
        self.observed = []
        if self.losses:
            self.queue_losses(idx, self.losses)
        self.losses = []

    def loss_is_part(self):
        """True where the job's loss is a sum over micro-batches and
        replicas, each micro-batch's loss already divided by the global
        token count (torchtitan 0.3 and later: its trainer logs that sum):
        the process then records COUNTER_LOSS_PART, the sum of its
        micro-batches' losses, whose sum over replicas is the job's loss.
        Elsewhere (PyTorch's own schedules' users, megatron-core, which
        average) LOSS, the mean over micro-batches, whose mean over
        replicas is the job's.  The rule: PIPESCOPE_LOSS=sum or =mean
        where the job says; else sum when the process has imported
        torchtitan of version 0.3 or later (or of a version it cannot
        tell); else mean.  Decided once, at the first step's losses (the
        trainer is imported by then); one kind for every step."""
        if self.loss_part is None:
            self.loss_part = _torchtitan_sums() if os.environ.get("PIPESCOPE_LOSS") not in ("sum", "mean") \
                else os.environ.get("PIPESCOPE_LOSS") == "sum"
        return self.loss_part

    def record_loss(self, vals, idx):
        """The step's micro-batch losses vals as the job reduces them
        (loss_is_part): their sum as COUNTER_LOSS_PART, or their mean as
        LOSS, never both."""
        r = self.rank
        if r is None or not vals:
            return
        if self.loss_is_part():
            r.counter(_lib.COUNTER_LOSS_PART, sum(vals), idx, r.now())
        else:
            r.counter(_lib.LOSS, sum(vals) / len(vals), idx, r.now())

    def queue_losses(self, idx, tensors):
        torch = self.torch
        try:
            ts = [t for t in tensors if hasattr(t, "detach")]
            if not ts:
                return
            if not ts[0].is_cuda:
                # read now (item() needs no detach): nothing kept, no op run
                vals = [t.item() if t.numel() == 1 else float(t.detach().float().mean()) for t in ts]
                self.record_loss(vals, idx)
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
            if r is not None:
                self.record_loss(vals, idx)
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
        if self.heartbeat is not None:
            self.heartbeat.close()
            self.heartbeat = None
        self.rank = None
        self.sync_fast()
        if self.host is not None:
            self.host.close()
        err = r.close()
        if err:
            say(err[len("pipescope: "):] if err.startswith("pipescope: ") else err)


def _torchtitan_sums():
    """True when this process has imported torchtitan 0.3 or later (or one
    whose version cannot be read): its trainer sums each micro-batch's loss,
    divided by the global token count, over micro-batches and replicas."""
    if "torchtitan" not in sys.modules:
        return False
    try:
        from importlib import metadata
        major, minor = (int(x) for x in metadata.version("torchtitan").split(".")[:2])
    except Exception:
        return True
    return (major, minor) >= (0, 3)


# ---- running a block: the original exactly once, its result and exceptions untouched ----

def run_block(hook, orig, kind, si, mb, cuda, args, kwargs):
    """orig(*args, **kwargs) recorded as a block of kind on stage si,
    micro-batch mb, for hook (a Recorder, recording): host clocks around it
    on the CPU; on CUDA (cuda true) CUDA events, and CUPTI's tag where it
    runs.  The hook's failures are said through hook.fail, never raised."""
    if cuda:
        # host time is launch time: the GPU's comes from events
        e0 = None
        try:
            e0 = hook.gpu_events()
        except Exception as e:
            hook.fail("a CUDA event", e)
        if hook.device and e0 is not None:
            return run_tagged(hook, orig, kind, si, mb, e0, args, kwargs)
        out = orig(*args, **kwargs)
        if e0 is not None and not hook.failed:
            try:
                hook.gpu_block(kind, si, mb, e0)
            except Exception as e:
                hook.fail("a block", e)
        return out
    now = hook.rank.now
    edges = hook.host.edge if hook.host is not None and hook.host.fd >= 0 else None
    if edges is not None:
        edges(now())
    t0 = now()
    hook.sched_in(t0)
    was = hook.now_open
    hook.now_open = (kind, si, mb, hook.step_index - 1, -1, t0)
    try:
        out = orig(*args, **kwargs)
    finally:
        hook.now_open = was
    t1 = now()
    try:
        hook.block(kind, si, mb, t0, t1)
        if edges is not None:
            edges(t1)
        hook.sched_out(now())
    except Exception as e:
        hook.fail("a block", e)
    return out


def run_tagged(hook, orig, kind, si, mb, e0, args, kwargs):
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


def opt_hooks(hook):
    """Every optimizer's step as an OPT block of the step begun last
    (torch.optim's global step hooks: whatever framework steps it)."""
    # PyTorch calls them as hook(optimizer, args, kwargs): its own
    # convention, positional, whatever the step was called with
    def pre(optimizer, args, kwargs):
        r = hook.rank
        if r is not None and not hook.failed and not hook.paused:
            try:
                hook.opt_t0 = r.now()
                hook.now_open = (_lib.OPT, -1, -1, hook.step_index - 1, -1, hook.opt_t0)
            except Exception as e:
                hook.fail("the optimizer", e)

    def post(optimizer, args, kwargs):
        hook.now_open = None
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


def close_now(hook):
    """Closes hook's rank now (the trace complete); a failure is said, never
    raised.  hook may be None (nothing instrumented)."""
    if hook is None:
        return
    try:
        hook.close()
    except Exception as e:
        say(f"closing the trace: {e}")


def close_at_exit(hook):
    """Closes hook's rank when the process exits (the trace complete)."""
    import atexit
    atexit.register(close_now, hook)
