#!/usr/bin/env python3
"""gc-train.py — a 2-rank CPU job whose bookkeeping makes Python reference
cycles, so that the garbage collector pauses its training thread (issue 29).

Run under torchrun (gloo); each rank writes OUT/rank<R>.json with its own
measure of the collector's pauses on the training thread (gc.callbacks,
start -> stop on time.monotonic_ns, CLOCK_MONOTONIC as pipescope's) and
its steps' times.  The cycles are what real jobs' bookkeeping makes: a
record a micro-batch whose entries point back at it, built in the loss
(the last stage) and by the stage when the schedule asks it for a
micro-batch's sends (every stage: a subclass of PipelineStage that keeps a
record of what it sends), so every rank collects between its blocks.

--thread-gc N: a helper thread (a job's data loader or logger would be one)
makes cycles and runs gc.collect(1) N times, spread over the steps after the
first (the hook records from the first step on) and done before the last
ends; the job's callback records every collection another thread runs, on
which thread (its native id), into "other_gc".
"""

import argparse
import gc
import json
import os
import threading
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S


def cycles(n, tag):
    """n records that point at each other: freed only by the collector."""
    head = {"tag": tag}
    prev = head
    for i in range(n):
        rec = {"i": i, "up": prev, "meta": [prev]}
        prev["down"] = rec
        prev = rec
    prev["head"] = head   # closes the ring


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--cycles", type=int, default=400, help="records the loss makes a micro-batch")
    ap.add_argument("--send-cycles", type=int, default=150, help="records a stage's sends make a micro-batch")
    ap.add_argument("--thread-gc", type=int, default=0, help="collections a helper thread runs")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    # the job's own measure of its pauses, registered first: the hook's
    # callback (at the first step) runs after it at start and at stop
    main_thread = threading.get_ident()
    pauses, began = [], [0]
    other, other_began = [], {}

    def on_gc(phase, info):
        if threading.get_ident() != main_thread:
            me = threading.get_native_id()
            if phase == "start":
                other_began[me] = time.monotonic_ns()
            elif me in other_began:
                other.append((other_began.pop(me), time.monotonic_ns(), me))
            return
        if phase == "start":
            began[0] = time.monotonic_ns()
        elif began[0]:
            pauses.append((began[0], time.monotonic_ns(), info.get("generation", -1)))
            began[0] = 0
    gc.callbacks.append(on_gc)

    go, done = threading.Event(), threading.Event()

    def helper():
        go.wait()
        for _ in range(a.thread_gc):
            if done.is_set():
                break
            cycles(a.cycles, "helper")
            # the young generations: a full collection of a process that
            # imported torch takes 0.4-0.6 s here, and would make the job's
            # steps the helper's
            gc.collect(1)
            time.sleep(0.01)   # the training thread runs between collections
    collector = threading.Thread(target=helper, name="gc-helper", daemon=True)
    if a.thread_gc > 0:
        collector.start()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.Tanh(),
                                  torch.nn.Linear(a.width, a.width)) for _ in range(world)]
    mod = layers[rank]

    class BookkeepingStage(PipelineStage):
        def get_fwd_send_ops(self, fwd_chunk_id):
            cycles(a.send_cycles, "send")
            return super().get_fwd_send_ops(fwd_chunk_id)

        def get_bwd_send_ops(self, bwd_chunk_id):
            cycles(a.send_cycles, "send")
            return super().get_bwd_send_ops(bwd_chunk_id)

    stage = BookkeepingStage(mod, rank, world, torch.device("cpu"))
    mse = torch.nn.MSELoss()

    def loss_fn(out, target):
        cycles(a.cycles, "loss")
        return mse(out, target)

    sched = S.Schedule1F1B(stage, n_microbatches=a.microbatches, loss_fn=loss_fn)
    opt = torch.optim.SGD(mod.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4 * a.microbatches, a.width, generator=g)
    y = torch.randn(4 * a.microbatches, a.width, generator=g)
    steps = []
    for i in range(a.steps):
        if i == a.steps - 1 and a.thread_gc > 0:
            done.set()
            collector.join()   # its collections all inside the recorded steps
        t0 = time.monotonic_ns()
        opt.zero_grad()
        if rank == 0:
            sched.step(x)
        else:
            sched.step(target=y, losses=[])
        opt.step()
        steps.append((t0, time.monotonic_ns()))
        go.set()   # the hook is recording (it opened at the first step)
    dist.barrier()
    gc.callbacks.remove(on_gc)
    until = time.monotonic_ns()   # the hook may record collections after this
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "gc": pauses, "other_gc": other, "steps": steps, "until": until,
                   "helper": collector.native_id if a.thread_gc > 0 else None}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
