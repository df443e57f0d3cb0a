#!/usr/bin/env python3
"""deepspeed-train.py — a small DeepSpeed pipeline job on CPU (gloo,
torchrun), the kind `pipescope-cli profile` must record with nothing changed:
a stack of small MLP layers in a PipelineModule, trained by DeepSpeed's own
PipelineEngine (TrainSchedule) or DualPipeVEngine through train_batch().

    torchrun --nproc-per-node W deepspeed-train.py --pp P [--dualpipev] --out DIR
    torchrun --nproc-per-node W deepspeed-train.py --jobs NAME:P:M[:dualpipev],... --out DIR

W = P x dp.  --jobs runs several jobs one after the other in one launch (a
test's plain reference runs: one interpreter and one DeepSpeed import for
all), each from the same seeds as alone, into DIR/NAME/.  Each process writes DIR/process<G>.json: the losses train_batch
returned (one a step), a checksum of its weights after the last step (bit for
bit: the float32 bytes' hash), its place as DeepSpeed's grid says it (stage,
data-parallel id, slice rank and their sizes), and the instructions its
engine executed in the first step, in order, each with its micro-batch as the
schedule maps it (the job's own witness, read from DeepSpeed's schedule
objects, independent of the hook), and each step's wall and main-thread
CPU seconds (bench-deepspeed).  --hang-process G makes global rank G sleep
for ever in a forward (test-deepspeed's stuck case).

DeepSpeed on CPU, in this job only (never in the hook): DS_ACCELERATOR=cpu,
gloo, a torch optimizer handed to the engine (a config "Adam" builds
FusedAdam, a compiled op), and DeepSpeed's shared-memory all-reduce op left
out (deepspeed.comm JIT-builds it at init_distributed: 4-5 minutes of C++
once; gloo does the same reductions without it).
"""

import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


class Layer(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


def witness(engine_mod, schedule_mod, log):
    """Logs each (instruction, micro-batch, phase) the engine executes in
    its first train_batch: the schedule's own steps as the engine's
    _exec_schedule iterates them (not another reader's, the hook's plan)."""
    def micro_batch(sched, cmd, step_id, prev):
        b = cmd.kwargs.get("buffer_id")
        if b is None:
            return -1
        if isinstance(sched, getattr(schedule_mod, "DualPipeVSchedule", ())):
            return b % sched.micro_batches
        cur, _ = sched._step_to_micro_batch(step_id)
        send = type(cmd).__name__ in ("SendActivation", "SendGrad")
        return prev if send else cur

    for cls in (schedule_mod.TrainSchedule, getattr(schedule_mod, "DualPipeVSchedule", None)):
        if cls is None:
            continue
        orig = cls.steps

        def steps(self, _orig=orig):
            prev = -1
            for i, cmds in enumerate(_orig(self)):
                if log["on"] and log["exec"]:
                    for c in cmds:
                        log["cmds"].append((type(c).__name__, micro_batch(self, c, i, prev),
                                            c.kwargs.get("phase", 0)))
                if not isinstance(self, getattr(schedule_mod, "DualPipeVSchedule", ())):
                    prev = self._step_to_micro_batch(i)[0]
                yield cmds
        cls.steps = steps

    run = engine_mod.PipelineEngine._exec_schedule

    def exec_schedule(self, *args, **kwargs):
        log["exec"] = True
        try:
            return run(self, *args, **kwargs)
        finally:
            log["exec"] = False
    engine_mod.PipelineEngine._exec_schedule = exec_schedule


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2, help="samples a micro-batch")
    ap.add_argument("--dualpipev", action="store_true")
    ap.add_argument("--jobs", default="", help="NAME:P:M[:dualpipev],... run one after the other")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hang-process", type=int, default=-1,
                    help="this global rank sleeps for ever inside its first forward of step --hang-step "
                         "(issue 37's stuck job)")
    ap.add_argument("--hang-step", type=int, default=1)
    a = ap.parse_args()

    import deepspeed
    from deepspeed.runtime.pipe import engine as ds_engine
    from deepspeed.runtime.pipe import schedule as ds_schedule

    import deepspeed.ops
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False   # no JIT build: gloo reduces
    deepspeed.init_distributed(dist_backend="gloo")
    log = {"on": True, "exec": False, "cmds": []}
    witness(ds_engine, ds_schedule, log)
    if not a.jobs:
        train(a, a.pp, a.microbatches, a.dualpipev, a.out, log)
    for job in filter(None, a.jobs.split(",")):
        name, pp, m, *v = job.split(":")
        log.update(on=True, exec=False, cmds=[])
        train(a, int(pp), int(m), v == ["dualpipev"], os.path.join(a.out, name), log)
    dist.destroy_process_group()


def train(a, pp, microbatches, dualpipev, out, log):
    """One job: a pipeline of pp stages (DualPipeV's 2 x pp when dualpipev),
    microbatches a step, a.steps steps; its record into out/process<G>.json."""
    import deepspeed
    from deepspeed.runtime.pipe import PipelineModule, LayerSpec
    g, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    specs = [LayerSpec(Layer, a.hidden) for _ in range(a.layers)]
    loss_fn = torch.nn.MSELoss()
    if dualpipev:
        from deepspeed.runtime.pipe.dualpipev import DualPipeVModule
        model = DualPipeVModule(layers=specs, num_stages=pp, loss_fn=loss_fn, partition_method="uniform")
    else:
        model = PipelineModule(layers=specs, num_stages=pp, loss_fn=loss_fn, partition_method="uniform")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    dp = world // pp
    config = {
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": microbatches,
        "train_batch_size": a.batch * microbatches * dp,
        "steps_per_print": 10 ** 9,
        "wall_clock_breakdown": False,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config,
                                           model_parameters=[p for p in model.parameters()])

    def batches():
        gen = torch.Generator().manual_seed(99 + engine.grid.get_data_parallel_id())
        while True:
            x = torch.randn(a.batch, a.hidden, generator=gen)
            yield x, torch.sin(x)

    data = batches()
    losses, step_s, cpu_s = [], [], []
    if a.hang_process == g:
        # the job's own bug: a forward that never returns (this process's first of step hang_step)
        layer_forward = Layer.forward

        def hanging(self, x):
            if len(losses) == a.hang_step:
                while True:
                    time.sleep(3600)
            return layer_forward(self, x)
        Layer.forward = hanging
    for s in range(a.steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        loss = engine.train_batch(data_iter=data)
        step_s.append(time.perf_counter() - t0)
        cpu_s.append(time.thread_time() - c0)
        log["on"] = False
        losses.append(float(loss))

    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().contiguous().numpy().tobytes())
    grid = engine.grid
    place = {"pp": grid.get_stage_id(), "dp": grid.get_data_parallel_id(),
             "tp": grid.get_slice_parallel_rank(), "P": grid.get_pipe_parallel_world_size(),
             "D": grid.get_data_parallel_world_size(), "T": grid.get_slice_parallel_world_size()}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"process{g}.json"), "w") as f:
        json.dump({"losses": losses, "weights": h.hexdigest(), "place": place,
                   "cmds": log["cmds"], "M": microbatches, "step_s": step_s, "cpu_s": cpu_s}, f)
    dist.barrier()


if __name__ == "__main__":
    sys.exit(main())
