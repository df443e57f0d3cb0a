"""train.py — a small torch.distributed.pipelining job, for pipescope's tests
and benchmarks: an MLP split by depth into stages, trained on CPU with gloo
under `torchrun --nproc-per-node P`, in any of PyTorch's schedule classes.

    torchrun --nproc-per-node 2 train.py --schedule ZBVZeroBubble --microbatches 4 \
        --steps 3 --out DIR

Each rank writes DIR/rank<R>.json: the schedule's own plan of this rank
(pipeline_order's compute actions, from PyTorch's schedule object; for
GPipe and 1F1B none, they have no such list), the losses of every step
(last stage), and the parameter checksums after the last step.  Nothing in
it knows pipescope: the tests run it plain and under `pipescope-cli profile`.

    torchrun --nproc-per-node 2 train.py --cases ScheduleGPipe,ScheduleZBVZeroBubble,csv --csv F --out DIR

--cases runs several jobs one after another in the same processes (one
torch import, one process group): each case from scratch (seeds, stages,
schedule, optimizer), writing DIR/<case>/rank<R>.json and, with
--profile-trace T, T.<case>.rank<R>.json.  A case is a schedule class or
"csv" (the --csv file's schedule, --csv-stages-per-rank stages a rank).
What a case computes does not depend on the cases before it: the tests
compare each with a job of its own, bit for bit.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

V_SHAPED = ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")
SINGLE = ("ScheduleGPipe", "Schedule1F1B")


def _record_order(order_by_step):
    """Wraps the stage's compute calls to note (kind, stage, micro-batch) in
    the current step's list: what _step_microbatches runs."""
    from torch.distributed.pipelining.stage import _PipelineStageBase as Base

    def wrap(name, kind_of):
        orig = getattr(Base, name)

        def w(self, chunk, *args, **kwargs):
            if order_by_step:
                order_by_step[-1].append(f"{self.stage_index}{kind_of(args, kwargs)}{chunk}")
            return orig(self, chunk, *args, **kwargs)
        setattr(Base, name, w)

    wrap("forward_one_chunk", lambda a, k: "F")
    wrap("backward_one_chunk",
         lambda a, k: "B" if k.get("full_backward", a[1] if len(a) > 1 else True) else "I")
    wrap("backward_weight_one_chunk", lambda a, k: "W")


def thread_cpu_s():
    """CPU seconds this process's threads have used, summed by thread name
    (Linux /proc; empty elsewhere), the main thread as "main": bench-torch
    reads it, and pp-drain and pp-live, the recording's own threads."""
    out = {}
    try:
        tick = os.sysconf("SC_CLK_TCK")
        tids = os.listdir("/proc/self/task")
    except (OSError, ValueError):
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = "main" if tid == str(os.getpid()) else f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue   # the thread ended meanwhile
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def hook_self_ns():
    """The hook's compiled wrappers' own time so far, in ns, when the hook
    is loaded with them and PIPESCOPE_FAST_SELFTIME=1; else None."""
    hook = getattr(sys.modules.get("pipescope.torch"), "_hook", None)
    fast = getattr(hook, "fast", None)
    if fast is None or not os.environ.get("PIPESCOPE_FAST_SELFTIME"):
        return None
    return fast.state()["self_ns"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", default="Schedule1F1B")
    ap.add_argument("--csv", help="a pipescope-cli schedule --format csv file (the CSV runtime)")
    ap.add_argument("--csv-format", default="compute_only", choices=["compute_only", "compute_comms"],
                    help="the --csv file's format as PyTorch's _load_csv takes it (compute_comms: "
                         "its sends and receives as written, e.g. a deadlock)")
    ap.add_argument("--cases", help="comma-separated schedule classes or 'csv', run one after another "
                                    "(DIR/<case>/rank<R>.json each)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--last-microbatches", type=int, default=None,
                    help="the last pipeline rank runs this many micro-batches of the same size instead "
                         "(ranks that disagree: a job that hangs, issue 37)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2, help="linear layers per stage")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--stages-per-rank", type=int, default=None)
    ap.add_argument("--csv-stages-per-rank", type=int, default=None,
                    help="with --cases, the csv case's stages a rank (default --stages-per-rank)")
    ap.add_argument("--profile-trace", help="also run torch.profiler and write its Chrome trace here")
    ap.add_argument("--record-order", action="store_true",
                    help="record the compute order the schedule runs (the stage's own calls), "
                         "independently of pipescope, into the output")
    ap.add_argument("--params-every-step", action="store_true",
                    help="also the parameter checksums after every step (params_by_step)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (one GPU: every rank's stages on it)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hold", help="after step 0, wait until this file exists (a test attaches to the "
                                   "running job meanwhile; 300 s at most)")
    a = ap.parse_args()
    order_by_step = []
    if a.record_order:
        _record_order(order_by_step)

    dist.init_process_group("gloo")
    if not a.cases:
        run_case(a, a.schedule, a.csv, a.stages_per_rank, a.out, a.profile_trace, order_by_step)
    else:
        for case in a.cases.split(","):
            if case == "csv" and not a.csv:
                sys.exit("train.py: the case csv needs --csv FILE")
            del order_by_step[:]
            csv_case = case == "csv"
            run_case(a, a.schedule if csv_case else case, a.csv if csv_case else None,
                     (a.csv_stages_per_rank or a.stages_per_rank) if csv_case else a.stages_per_rank,
                     os.path.join(a.out, case), a.profile_trace and f"{a.profile_trace}.{case}", order_by_step)
            dist.barrier()
    if a.last_microbatches:
        dist.barrier()   # the job's own end (a checkpoint's): ranks that disagree hang, not crash
    dist.destroy_process_group()


def run_case(a, schedule, csv_file, stages_per_rank, out, profile_trace, order_by_step):
    """One job: stages, schedule and optimizer from the seeds, a.steps steps,
    OUT/rank<R>.json."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    multi = csv_file is not None or schedule not in SINGLE
    v = stages_per_rank or (2 if multi else 1)
    n_stages = world * v
    if schedule in V_SHAPED:
        mine = [rank, 2 * world - 1 - rank]
    else:
        mine = [rank + k * world for k in range(v)]
    layers = [torch.nn.Sequential(*[m for _ in range(a.layers)
                                    for m in (torch.nn.Linear(a.width, a.width), torch.nn.Tanh())])
              for _ in range(n_stages)]
    dev = torch.device(a.device)
    layers = [l.to(dev) for l in layers]
    stages = [PipelineStage(layers[s], s, n_stages, dev) for s in mine]
    loss_fn = torch.nn.MSELoss()
    M = a.microbatches
    batch = a.batch
    if a.last_microbatches and rank == world - 1:
        batch = a.batch // M * a.last_microbatches
        M = a.last_microbatches
    if csv_file:
        sched = S._PipelineScheduleRuntime(stages, n_microbatches=M, loss_fn=loss_fn)
        sched._load_csv(csv_file, a.csv_format)
    else:
        cls = getattr(S, schedule)
        sched = cls(stages if multi else stages[0], n_microbatches=M, loss_fn=loss_fn)
    params = [p for s in mine for p in layers[s].parameters()]
    opt = torch.optim.SGD(params, lr=0.05)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, a.width, generator=g).to(dev)
    y = torch.randn(batch, a.width, generator=g).to(dev)
    losses_by_step = []
    params_by_step = []
    times, cpu_times = [], []
    prof = None
    if profile_trace and os.environ.get("PIPESCOPE_BENCH_ALTERNATE"):
        # the benchmark's paired steps: torch.profiler on every other step
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                      schedule=torch.profiler.schedule(wait=1, warmup=0, active=1))
        prof.__enter__()
    elif profile_trace:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    self_ns = []   # the hook's C wrappers' own time a step (PIPESCOPE_FAST_SELFTIME=1)
    for step in range(a.steps):
        s0 = hook_self_ns()
        order_by_step.append([])
        opt.zero_grad()
        losses = []
        t0, c0 = time.perf_counter(), time.thread_time()
        kwargs = {}
        is_last = any(s == n_stages - 1 for s in mine)
        if is_last:
            kwargs.update(target=y, losses=losses)
        if any(s == 0 for s in mine):
            sched.step(x, **kwargs)
        else:
            sched.step(**kwargs)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.thread_time() - c0)
        if s0 is not None:
            self_ns.append(hook_self_ns() - s0)
        if prof is not None:
            prof.step()
        if a.params_every_step:
            params_by_step.append([float(p.detach().double().sum()) for p in params])
        if a.hold and step == 0:
            until = time.monotonic() + 300
            while not os.path.exists(a.hold) and time.monotonic() < until:
                time.sleep(0.05)
        losses_by_step.append([l.item() for l in losses])
    if prof is not None:
        prof.__exit__(None, None, None)
        if not os.environ.get("PIPESCOPE_BENCH_ALTERNATE"):
            prof.export_chrome_trace(f"{profile_trace}.rank{rank}.json")

    plan = []
    order = getattr(sched, "pipeline_order", None)
    # Single-stage schedules run their own _step_microbatches; the
    # pipeline_order some of them carry (for the visualizer) is not what
    # runs (2.15's Schedule1F1B lists 1F1 before 1B0 on the last rank).
    if isinstance(order, dict) and isinstance(sched, S.PipelineScheduleMulti):
        r = getattr(sched, "rank", rank)
        plan = [repr(x) for x in order[r] if x is not None and x.is_compute_op]
    checks = [float(p.detach().double().sum()) for p in params]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "stages": mine, "plan": plan,
                   "losses": losses_by_step, "order": order_by_step, "params": checks, "step_s": times,
                   "step_cpu_s": cpu_times, "threads_cpu_s": thread_cpu_s(), "torch": torch.__version__,
                   "hook_self_ns": self_ns, "params_by_step": params_by_step}, f)


if __name__ == "__main__":
    main()
