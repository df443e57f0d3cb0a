#!/usr/bin/env python3
"""gen-kineto-fixtures.py — the torch.profiler traces under tests/data/kineto/.

Each fixture is a real 2-rank job: `torchrun --nproc-per-node 2` on the CPU
with gloo, a tiny model (one Linear per stage) split into stages with
torch.distributed.pipelining, M=4 micro-batches, torch.profiler (CPU
activities) around 2 training steps, one trace per rank.  What the traces
hold is what `pipescope-cli import` reads:

  gpipe/       ScheduleGPipe: `Forward i` / `Backward i` ranges
               (prof.export_chrome_trace, gzip'd afterwards)
  interleaved/ ScheduleInterleaved1F1B, 2 stages per rank: `PP:<action>`
               ranges (tensorboard_trace_handler(use_gzip=True))
  zbv/         ScheduleZBVZeroBubble (V-shaped, I and W): `PP:<action>`
  dualpipev/   ScheduleDualPipeV: `PP:(0F2;3B1)OVERLAP_F_B` ranges
  1f1b/        Schedule1F1B: no pipelining labels at all (import refuses it)
  fsdp/        a PP 2 x DP 2 job of 4 processes (`--nproc-per-node 4`): a
               DeviceMesh ("pp", "dp"), each stage in FSDP2's fully_shard
               over mesh["dp"], ScheduleInterleaved1F1B: `PP:<action>` with
               FSDP's PP:0UNSHARD, PP:1RESHARD, PP:0REDUCE_GRAD, ...; one
               trace per global rank, process<G>.json.gz

(tests/test-import.py gunzips one into a temporary folder for the plain
JSON that export_chrome_trace writes before anyone compresses it.)

Usage:
  tools/gen-kineto-fixtures.py [--python PY] [--out tests/data/kineto]
PY is a python with torch 2.15 (default ~/.cache/pipescope/torch-2.15.0/bin/python);
torchrun is taken from beside it.  Run as a torchrun worker (the script
starts itself that way) it trains and writes one rank's trace.
"""
import argparse
import glob
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

SCHEDULES = {
    # name: (class, stages per rank, writer, gzip, profiler schedule)
    # A profiler schedule (warm-up 1, active 2) gives ProfilerStep#N ranges;
    # without one the trace has none (import then finds the steps itself).
    "gpipe": ("ScheduleGPipe", 1, "export", True, False),
    "interleaved": ("ScheduleInterleaved1F1B", 2, "tensorboard", True, True),
    "zbv": ("ScheduleZBVZeroBubble", 2, "export", True, True),
    "dualpipev": ("ScheduleDualPipeV", 2, "export", True, True),
    "1f1b": ("Schedule1F1B", 1, "export", True, True),
    "fsdp": ("ScheduleInterleaved1F1B", 2, "export", True, True),
}
# jobs on a mesh: name -> processes (P = 2 pipeline ranks, the rest replicas)
MESH = {"fsdp": 4}
P_MESH = 2
M = 4
STEPS = 2
WIDTH = 8
BATCH = 8


def worker(name, out):
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining as pp
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

    from torch.profiler import schedule as prof_schedule

    cls_name, V, writer, use_gzip, stepped = SCHEDULES[name]
    dist.init_process_group("gloo")
    rank, P = dist.get_rank(), dist.get_world_size()
    grank, mesh, group = rank, None, None
    if name in MESH:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (P_MESH, P // P_MESH), mesh_dim_names=("pp", "dp"))
        group = mesh["pp"].get_group()
        rank, P = dist.get_rank(group), P_MESH
    torch.manual_seed(0)
    n_stages = P * V
    if cls_name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        ids = [rank, 2 * P - 1 - rank]      # V-shaped placement
    else:
        ids = [rank + P * v for v in range(V)]
    stages = []
    for s in ids:
        torch.manual_seed(s)
        mod = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())
        if mesh is not None:
            from torch.distributed.fsdp import fully_shard
            fully_shard(mod, mesh=mesh["dp"])
        stages.append(pp.PipelineStage(mod, s, n_stages, torch.device("cpu"), group=group))
    cls = getattr(pp, cls_name)
    loss_fn = torch.nn.MSELoss()
    sched = cls(stages[0] if V == 1 else stages, n_microbatches=M, loss_fn=loss_fn)
    opts = [torch.optim.SGD(st.submod.parameters(), lr=0.01) for st in stages]

    def one_step():
        torch.manual_seed(1000)
        x = torch.randn(BATCH, WIDTH)
        y = torch.randn(BATCH, WIDTH)
        has_first = 0 in ids
        has_last = n_stages - 1 in ids
        args = (x,) if has_first else ()
        kwargs = {"target": y, "losses": []} if has_last else {}
        sched.step(*args, **kwargs)
        for o in opts:
            o.step()
            o.zero_grad()

    one_step()  # warm-up, outside the profile
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"process{grank}.json" if mesh is not None else f"rank{rank}.json")

    def export(p):
        p.export_chrome_trace(path)
        if use_gzip:
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
            os.unlink(path)

    handler = tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True) \
        if writer == "tensorboard" else export
    kw = {"schedule": prof_schedule(wait=0, warmup=1, active=STEPS, repeat=1)} if stepped else {}
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler, **kw) as prof:
        for _ in range(STEPS + (1 if stepped else 0)):
            one_step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main():
    if os.environ.get("PP_GEN_KINETO_WORKER"):
        worker(os.environ["PP_GEN_KINETO_WORKER"], os.environ["PP_GEN_KINETO_OUT"])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.path.expanduser("~/.cache/pipescope/torch-2.15.0/bin/python"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "kineto"))
    ap.add_argument("names", nargs="*", default=list(SCHEDULES))
    a = ap.parse_args()
    torchrun = os.path.join(os.path.dirname(a.python), "torchrun")
    for name in a.names:
        dest = os.path.join(a.out, name)
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PP_GEN_KINETO_WORKER=name, PP_GEN_KINETO_OUT=tmp,
                       OMP_NUM_THREADS="1")
            subprocess.run([torchrun, "--nproc-per-node", str(MESH.get(name, 2)), "--master-port", "29517",
                            os.path.abspath(__file__)], env=env, check=True)
            os.makedirs(dest, exist_ok=True)
            for old in glob.glob(os.path.join(dest, "*")):
                os.unlink(old)
            for f in sorted(glob.glob(os.path.join(tmp, "*"))):
                base = os.path.basename(f)
                if base.startswith("rank") and ".pt.trace." in base:
                    # tensorboard_trace_handler: rank0.<ms>.pt.trace.json.gz
                    base = base.split(".")[0] + ".pt.trace.json.gz"
                shutil.copy(f, os.path.join(dest, base))
                print(f"{name}: {base}: {os.path.getsize(f)} bytes")


if __name__ == "__main__":
    sys.exit(main())
