"""mesh-train.py — a job with more than one pipeline, as PyTorch users write
one: 4 processes on CPU with gloo under `torchrun --nproc-per-node 4`, an
MLP of blocks split by depth into pipeline stages, the stages replicated
or split on a DeviceMesh.  For pipescope's tests: nothing in it knows
pipescope.

    torchrun --nproc-per-node 4 mesh-train.py --layout ddp --out DIR

Layouts (P = 2 pipeline ranks of 2 processes each):
  ddp     mesh ("pp", "dp"), each stage in DistributedDataParallel over
          mesh["dp"]'s group, Schedule1F1B
  fsdp    mesh ("pp", "dp"), FSDP2's fully_shard(block, mesh=mesh["dp"])
          per block, ScheduleInterleaved1F1B (2 stages a rank); the last
          stage holds a head of its own (fully_shard too) that only the
          loss function runs, as torchtitan's chunked loss runs lm_head:
          FSDP2 all-gathers it in its pre-forward hook inside the
          schedule's loss call and in its pre-backward hook inside the
          backward
  fsdp-zbv  the same, ScheduleZBVZeroBubble (stages r and 2P-1-r of rank r)
  tp      mesh ("pp", "tp"), parallelize_module(block, mesh["tp"],
          fc1 column-wise, fc2 row-wise), Schedule1F1B (tp innermost, pp
          outermost: Megatron's order)
  dp-pp   mesh ("dp", "pp"): pp innermost, pipeline rank = global rank % P;
          DDP over mesh["dp"]'s group, Schedule1F1B
  groups  no mesh: the same layout as dp-pp from dist.new_group, DDP over
          the dp group, Schedule1F1B
  unplaced  no mesh, no data-parallel wrapping, pipelines of processes
          (0, 3) and (1, 2): two replicas that train on their own, laid out
          so that no place can be read from the groups alone

Each process writes DIR/process<G>.json (G its global rank): the losses of
every step (last stage), the parameter checksums after the last step, in
the fsdp layouts FSDP2's collectives of each step as the job counts them
itself (torch.distributed's all-gather and reduce-scatter as FSDP2 calls
them: calls and bytes, and the all-gathers inside the schedule's loss
call), the schedule's loss calls that computed a loss, a step, its
place as the job itself knows it (pp, dp, tp, cp, ep and their sizes, from
its mesh or its groups), and, with --list DIR2, the names of the files in
DIR2 once every process has stepped (a barrier).
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

P = 2
WIDTH = 16
LAYOUTS = ["ddp", "fsdp", "fsdp-zbv", "tp", "dp-pp", "groups", "unplaced"]


class Block(torch.nn.Module):
    def __init__(self, width=WIDTH):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, 2 * width)
        self.fc2 = torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return torch.tanh(self.fc2(torch.tanh(self.fc1(x))))


def hook_self_ns():
    """The hook's compiled wrappers' own time so far (ns) where it is loaded
    with them and PIPESCOPE_FAST_SELFTIME=1, else None (as train.py)."""
    fast = getattr(getattr(sys.modules.get("pipescope.torch"), "_hook", None), "fast", None)
    if fast is None or not os.environ.get("PIPESCOPE_FAST_SELFTIME"):
        return None
    return fast.state()["self_ns"]


class Head(torch.nn.Module):
    """The last stage's head in the fsdp layout: a Linear that only the
    loss function runs (the stage's forward never does)."""

    def __init__(self, block, width):
        super().__init__()
        self.block = block
        self.head = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.block(x)


class CommCount:
    """FSDP2's all-gathers and reduce-scatters as this job sees them: the
    torch.distributed functions FSDP2 calls (all_gather_single /
    reduce_scatter_single in 2.15, the *_into_tensor / *_tensor ones
    before), counted with their bytes (an all-gather's output, a
    reduce-scatter's input: the full flat parameters or gradients), the
    outermost call only; per step, and the all-gathers inside the
    schedule's loss call apart."""

    def __init__(self):
        self.depth, self.in_loss = 0, False
        self.steps = []
        self.saved = []
        for names, kind, arg in ((("all_gather_single", "all_gather_into_tensor"), "ag", 0),
                                 (("reduce_scatter_single", "reduce_scatter_tensor"), "rs", 1)):
            for name in names:
                if hasattr(dist, name):
                    self.saved.append((name, getattr(dist, name)))
                    setattr(dist, name, self.counting(getattr(dist, name), kind, arg))

    def close(self):
        """torch.distributed's functions as they were (the next case of
        --cases counts afresh)."""
        for name, fn in self.saved:
            setattr(dist, name, fn)
        self.saved = []

    def counting(self, fn, kind, arg):
        def counted(*args, **kwargs):
            if self.depth or not self.steps:
                return fn(*args, **kwargs)
            t = args[arg] if len(args) > arg else kwargs.get(("output", "input")[arg],
                                                               kwargs.get(("output_tensor", "input")[arg]))
            cur = self.steps[-1]
            cur[kind] += 1
            cur[kind + "_bytes"] += t.numel() * t.element_size()
            if kind == "ag" and self.in_loss:
                cur["ag_in_loss"] += 1
            self.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
        return counted

    def step(self):
        self.steps.append({"ag": 0, "ag_bytes": 0, "rs": 0, "rs_bytes": 0, "ag_in_loss": 0})


def place_from_mesh(mesh):
    """(coord, size) in the order pp, dp, tp, cp, ep, by the mesh's names."""
    coord, size = [0] * 5, [1] * 5
    slot = {"pp": 0, "dp": 1, "tp": 2, "cp": 3, "ep": 4}
    for name, c in zip(mesh.mesh_dim_names, mesh.get_coordinate()):
        coord[slot[name]] = c
        size[slot[name]] = mesh.size(mesh.mesh_dim_names.index(name))
    return coord, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=LAYOUTS)
    ap.add_argument("--cases", help="layouts run one after another in this one job (comma list), each "
                                    "as it runs alone, into OUT/LAYOUT (the tests' plain runs)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--list", help="a folder whose file names to note after the steps")
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=WIDTH)
    ap.add_argument("--slow-forward", metavar="G:SECONDS",
                    help="a straggler on purpose (issue 38): process G sleeps SECONDS in each of its forwards")
    ap.add_argument("--timing", action="store_true",
                    help="note each step's wall and main-thread CPU time (bench-torch)")
    ap.add_argument("--hang-process", type=int, default=-1,
                    help="this global rank sleeps for ever inside a forward of step --hang-step, "
                         "micro-batch --hang-mb (issue 37's stuck job)")
    ap.add_argument("--hang-step", type=int, default=1)
    ap.add_argument("--hang-mb", type=int, default=1)
    a = ap.parse_args()
    cases = a.cases.split(",") if a.cases else [a.layout]
    if None in cases or any(c not in LAYOUTS for c in cases):
        ap.error(f"--layout or --cases, of {', '.join(LAYOUTS)}")

    dist.init_process_group("gloo")
    for layout in cases:
        a.layout = layout
        run_case(a, os.path.join(a.out, layout) if a.cases else a.out)
    dist.destroy_process_group()


def run_case(a, out):
    """One layout's job, from its own seeds and groups: what a process
    computes does not depend on the cases run before it."""
    g, world = dist.get_rank(), dist.get_world_size()
    mesh = None
    fsdp = a.layout in ("fsdp", "fsdp-zbv")
    if a.layout == "ddp" or fsdp:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (P, world // P), mesh_dim_names=("pp", "dp"))
    elif a.layout == "tp":
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (P, world // P), mesh_dim_names=("pp", "tp"))
    elif a.layout == "dp-pp":
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world // P, P), mesh_dim_names=("dp", "pp"))
    if a.layout == "unplaced":
        pipes = [[0, 3], [1, 2]]
        pp_group = None
        for i, ranks in enumerate(pipes):
            grp = dist.new_group(ranks)
            if g in ranks:
                pp_group, coord = grp, [ranks.index(g), i, 0, 0, 0]
        dp_group, size = None, [P, world // P, 1, 1, 1]
    elif mesh is not None:
        pp_group = mesh["pp"].get_group()
        coord, size = place_from_mesh(mesh)
        dp_group = mesh["dp"].get_group() if "dp" in mesh.mesh_dim_names else None
    else:
        # every process creates every group, in the same order
        pp_group = dp_group = None
        for d in range(world // P):
            grp = dist.new_group([d * P + p for p in range(P)])
            if g // P == d:
                pp_group = grp
        for p in range(P):
            grp = dist.new_group([d * P + p for d in range(world // P)])
            if g % P == p:
                dp_group = grp
        coord, size = [g % P, g // P, 0, 0, 0], [P, world // P, 1, 1, 1]
    pp = dist.get_rank(pp_group)
    dp = coord[1]

    torch.manual_seed(0)
    v = 2 if fsdp else 1
    n_stages = P * v
    blocks = [Block(a.width) for _ in range(n_stages)]   # the same weights in every process
    mine = [pp, n_stages - 1 - pp] if a.layout == "fsdp-zbv" else [pp + k * P for k in range(v)]
    head = None
    if a.layout == "fsdp" and n_stages - 1 in mine:
        blocks[n_stages - 1] = Head(blocks[n_stages - 1], a.width)
        head = blocks[n_stages - 1].head
    comms = CommCount() if fsdp else None
    if a.slow_forward:
        slow_g, slow_s = a.slow_forward.split(":")
        if int(slow_g) == g:
            for s in mine:
                blocks[s].register_forward_pre_hook(lambda m, i, t=float(slow_s): time.sleep(t))
    mods = []
    for s in mine:
        mod = blocks[s]
        if fsdp:
            from torch.distributed.fsdp import fully_shard
            inner = mod.block if isinstance(mod, Head) else mod
            fully_shard(inner.fc1, mesh=mesh["dp"])
            fully_shard(inner.fc2, mesh=mesh["dp"])
            if isinstance(mod, Head):
                fully_shard(mod.head, mesh=mesh["dp"])
            fully_shard(mod, mesh=mesh["dp"])
        elif a.layout == "tp":
            from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                           parallelize_module)
            parallelize_module(mod, mesh["tp"], {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        elif dp_group is not None:
            mod = torch.nn.parallel.DistributedDataParallel(mod, process_group=dp_group)
        mods.append(mod)
    stages = [PipelineStage(m, s, n_stages, torch.device("cpu"), group=pp_group) for m, s in zip(mods, mine)]
    mse = torch.nn.MSELoss()
    if head is None:
        loss_fn = mse
    else:
        def loss_fn(out, target):
            return mse(head(out), target)
    if a.layout == "fsdp":
        sched = S.ScheduleInterleaved1F1B(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    elif a.layout == "fsdp-zbv":
        sched = S.ScheduleZBVZeroBubble(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    else:
        sched = S.Schedule1F1B(stages[0], n_microbatches=a.microbatches, loss_fn=loss_fn)
    # the schedule's loss calls that compute a loss, a step, as the job sees
    # them (and FSDP2's all-gathers inside them): its own instance's
    # _maybe_compute_loss wrapped, whatever else wraps the class's
    loss_calls = []
    sched_loss = getattr(sched, "_maybe_compute_loss", None)
    if sched_loss is not None:
        def counted_loss(*args, **kwargs):
            stage = args[0] if args else kwargs.get("stage")
            if getattr(stage, "is_last", False) and loss_calls:
                loss_calls[-1] += 1
            if comms is not None:
                comms.in_loss = True
            try:
                return sched_loss(*args, **kwargs)
            finally:
                if comms is not None:
                    comms.in_loss = False
        sched._maybe_compute_loss = counted_loss
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.05)
    own_calls = [0]
    if a.layout == "tp":
        # the job's own patch of a functional collective (as a user's
        # tracer would): it must keep seeing its calls, hooked or not
        import torch.distributed._functional_collectives as funcol
        job_all_reduce = funcol.all_reduce

        def counting_all_reduce(*args, **kwargs):
            own_calls[0] += 1
            return job_all_reduce(*args, **kwargs)
        funcol.all_reduce = counting_all_reduce
    try:
        # each data-parallel replica its own batch; tensor ranks the same
        gen = torch.Generator().manual_seed(1 + dp)
        x = torch.randn(2 * a.microbatches, a.width, generator=gen)
        y = torch.randn(2 * a.microbatches, a.width, generator=gen)
        losses_by_step = []
        step_s, step_cpu_s, self_ns = [], [], []
        if a.hang_process == g:
            # the job's own bug: a forward that never returns (its mb-th of step hang_step)
            forwards = [0]
            block_forward = Block.forward

            def hanging(self, x_in):
                if len(losses_by_step) == a.hang_step:
                    forwards[0] += 1
                    if forwards[0] == a.hang_mb + 1:
                        while True:
                            time.sleep(3600)
                return block_forward(self, x_in)
            Block.forward = hanging
        for _ in range(a.steps):
            s0 = hook_self_ns() if a.timing else None
            t0, c0 = time.perf_counter(), time.thread_time()
            opt.zero_grad()
            if comms is not None:
                comms.step()
            loss_calls.append(0)
            losses = []
            kwargs = {}
            if n_stages - 1 in mine:
                kwargs.update(target=y, losses=losses)
            if 0 in mine:
                sched.step(x, **kwargs)
            else:
                sched.step(**kwargs)
            opt.step()
            step_s.append(time.perf_counter() - t0)
            step_cpu_s.append(time.thread_time() - c0)
            if s0 is not None:
                self_ns.append(hook_self_ns() - s0)
            losses_by_step.append([l.item() for l in losses])
        listed = None
        if a.list:
            dist.barrier()   # every process has stepped: its trace file is open
            listed = sorted(os.listdir(a.list))

        # the schedule's own plan of this pipeline rank: its compute actions in
        # order, and the runtime's lowered order (FSDP's actions) where it has one
        order = [str(x) for x in (getattr(sched, "pipeline_order", None) or {}).get(pp, []) if x is not None]
        lowered = getattr(sched, "pipeline_order_with_comms", None) or {}
        lowered = [str(x) for x in lowered.get(pp, [])]

        def full(p):
            return p.full_tensor() if hasattr(p, "full_tensor") else p
        checks = [float(full(p).detach().double().sum()) for p in params]
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"process{g}.json"), "w") as f:
            json.dump({"process": g, "coord": coord, "size": size, "losses": losses_by_step, "params": checks,
                       "listed": listed, "torch": torch.__version__,
                       "order": order, "lowered": lowered, "own_calls": own_calls[0],
                       "fsdp_comms": comms.steps if comms is not None else None, "loss_calls": loss_calls,
                       "step_s": step_s, "step_cpu_s": step_cpu_s, "hook_self_ns": self_ns}, f)
        dist.barrier()
    finally:
        # the job's own patches undone: the next case starts as it would alone
        if a.layout == "tp":
            funcol.all_reduce = job_all_reduce
        if comms is not None:
            comms.close()


if __name__ == "__main__":
    main()
