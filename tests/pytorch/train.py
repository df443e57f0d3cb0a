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
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

V_SHAPED = ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")
SINGLE = ("ScheduleGPipe", "Schedule1F1B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", default="Schedule1F1B")
    ap.add_argument("--csv", help="a pipescope-cli schedule --format csv file (the CSV runtime)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2, help="linear layers per stage")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--stages-per-rank", type=int, default=None)
    ap.add_argument("--profile-trace", help="also run torch.profiler and write its Chrome trace here")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    multi = a.csv is not None or a.schedule not in SINGLE
    v = a.stages_per_rank or (2 if multi else 1)
    n_stages = world * v
    if a.schedule in V_SHAPED:
        mine = [rank, 2 * world - 1 - rank]
    else:
        mine = [rank + k * world for k in range(v)]
    layers = [torch.nn.Sequential(*[m for _ in range(a.layers)
                                    for m in (torch.nn.Linear(a.width, a.width), torch.nn.Tanh())])
              for _ in range(n_stages)]
    stages = [PipelineStage(layers[s], s, n_stages, torch.device("cpu")) for s in mine]
    loss_fn = torch.nn.MSELoss()
    M = a.microbatches
    if a.csv:
        sched = S._PipelineScheduleRuntime(stages, n_microbatches=M, loss_fn=loss_fn)
        sched._load_csv(a.csv, "compute_only")
    else:
        cls = getattr(S, a.schedule)
        sched = cls(stages if multi else stages[0], n_microbatches=M, loss_fn=loss_fn)
    params = [p for s in mine for p in layers[s].parameters()]
    opt = torch.optim.SGD(params, lr=0.05)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(a.batch, a.width, generator=g)
    y = torch.randn(a.batch, a.width, generator=g)
    losses_by_step = []
    times = []
    prof = None
    if a.profile_trace:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    for step in range(a.steps):
        opt.zero_grad()
        losses = []
        t0 = time.perf_counter()
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
        if prof is not None:
            prof.step()
        losses_by_step.append([l.item() for l in losses])
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(f"{a.profile_trace}.rank{rank}.json")

    plan = []
    order = getattr(sched, "pipeline_order", None)
    if isinstance(order, dict):
        r = getattr(sched, "rank", rank)
        plan = [repr(x) for x in order[r] if x is not None and x.is_compute_op]
    checks = [float(p.detach().double().sum()) for p in params]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "stages": mine, "plan": plan,
                   "losses": losses_by_step, "params": checks, "step_s": times,
                   "torch": torch.__version__}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
