#!/usr/bin/env python3
"""megatron-train.py — a small megatron-core job on CPU (gloo, torchrun), the
kind `pipescope-cli profile` must record with nothing changed: a GPT of plain
modules split as Megatron splits layers (virtual stage = chunk x P + pp rank
holds layers [vs L / (P V), (vs + 1) L / (P V))), trained through
megatron-core's own get_forward_backward_func(): 1F1B (--vp 1) or its
interleaved schedule (--vp V); with --megatron-ddp each chunk in
megatron-core's DistributedDataParallel (overlap_grad_reduce) and its
finalize_model_grads, the job counting the gradient syncs its buckets
issue outside finalize_model_grads.

    torchrun --nproc-per-node W megatron-train.py --pp P [--vp V] --out DIR
    torchrun --nproc-per-node W megatron-train.py --case 'NAME:ARGS' ... --out ROOT

The second form runs several jobs of the same world size in one launch, one
after the other (the test suite's plain reference runs: two imports of
megatron-core a launch cost seconds of CPU each): each case as a launch of
ARGS alone would run it, writing ROOT/NAME/; between cases megatron-core's
global state is torn down (parallel_state, the micro-batch calculator, the
RNG tracker) and the default generator set back to the state the process
started with, so that a case's losses and weights are those of its own
launch bit for bit.

Each process writes DIR/process<G>.json: its losses (the last stage's, a
step), a checksum of its weights after the last step (bit for bit: the
float32 bytes' hash), its place (pp, dp, tp as megatron-core's
parallel_state says), and the order megatron-core ran its compute in, a step:
the forwards as megatron-core called this job's forward_step_func (chunk
and micro-batch read from the data iterator it was handed), the backwards as
autograd ran them through an identity marker at each chunk's output — the
job's own witness, independent of the hook.

CUDA shims, in this job only (never in the hook): megatron-core's schedules
allocate receive buffers on torch.cuda.current_device(), synchronize after
batched p2p, and make a total-token counter with device="cuda" (0.13:
with .cuda()).
"""

import argparse
import hashlib
import json
import os
import shlex
import sys
import time

import torch
import torch.distributed as dist


def cpu_shims():
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda *a, **k: None
    zeros = torch.zeros

    def zeros_cpu(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return zeros(*args, **kwargs)
    torch.zeros = zeros_cpu
    torch.Tensor.cuda = lambda self, *a, **k: self   # 0.13's total-token counter


class Witness(torch.autograd.Function):
    """Identity whose backward logs (chunk, mb): when autograd runs it, the
    backward of that chunk and micro-batch is running."""

    @staticmethod
    def forward(ctx, x, log, tag):
        ctx.log, ctx.tag = log, tag
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.log.append(("B",) + ctx.tag)
        return g, None, None


class Block(torch.nn.Module):
    """A pre-norm residual MLP layer (a transformer layer less attention)."""

    def __init__(self, h):
        super().__init__()
        self.norm = torch.nn.LayerNorm(h)
        self.up = torch.nn.Linear(h, 4 * h)
        self.down = torch.nn.Linear(4 * h, h)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Chunk(torch.nn.Module):
    """Virtual stage vs of the GPT: the embedding on the first, the head and
    the loss on the last; megatron-core hands it its input tensor."""

    def __init__(self, config, vs, n_vs, layers, vocab, chunk, log):
        super().__init__()
        from megatron.core.enums import ModelType
        self.config = config
        self.model_type = ModelType.encoder_or_decoder
        self.vp_stage = chunk
        self.first, self.last = vs == 0, vs == n_vs - 1
        # what megatron-core's finalize_model_grads reads of a GPT chunk
        self.pre_process, self.post_process = self.first, self.last
        self.share_embeddings_and_output_weights = False
        h = config.hidden_size
        per = layers // n_vs
        torch.manual_seed(1000 + vs)   # the same weights in every run
        self.embed = torch.nn.Embedding(vocab, h) if self.first else None
        self.layers = torch.nn.ModuleList(Block(h) for _ in range(per))
        self.head = torch.nn.Linear(h, vocab) if self.last else None
        self.input_tensor = None
        self.chunk, self.log = chunk, log

    def set_input_tensor(self, t):
        self.input_tensor = t[0] if isinstance(t, list) else t

    def forward(self, tokens, mb):
        x = self.embed(tokens).transpose(0, 1).contiguous() if self.first else self.input_tensor
        for layer in self.layers:
            x = layer(x)
        if self.last:
            x = self.head(x)   # [s, b, vocab]
        return Witness.apply(x, self.log, (self.chunk, mb))


def batches(step, m, mb_size, seq, vocab):
    g = torch.Generator().manual_seed(7 + step)
    for i in range(m):
        tokens = torch.randint(0, vocab, (mb_size, seq + 1), generator=g)
        yield {"mb": i, "tokens": tokens[:, :-1], "labels": tokens[:, 1:]}


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--vp", type=int, default=1)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--group", type=int, default=0, help="microbatch_group_size_per_vp_stage (0: P)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hang-process", type=int, default=-1,
                    help="this global rank sleeps for ever inside its forward of step 1, micro-batch 1 "
                         "(issue 37's stuck job)")
    ap.add_argument("--per-token", action="store_true",
                    help="calculate_per_token_loss: loss_func returns (sum over tokens, tokens, report)")
    ap.add_argument("--megatron-ddp", action="store_true",
                    help="each chunk in megatron-core's DistributedDataParallel (overlap_grad_reduce), "
                         "its finalize_model_grads; the job counts the gradient syncs it issues in backward")
    ap.add_argument("--slow-forward", metavar="G:SECONDS",
                    help="a straggler on purpose (issue 38): process G sleeps SECONDS in each of its forwards")
    ap.add_argument("--list", help="after the last step, write the names in this folder to the json")
    ap.add_argument("--case", action="append", metavar="NAME:ARGS",
                    help="run the job ARGS (these options) as case NAME, writing OUT/NAME/; "
                         "several --case run one after the other in this launch")
    return ap


def cases(ap, a):
    """The jobs this launch runs: (name, options) in order; name None for
    the launch's one job."""
    if not a.case:
        return [(None, a)]
    out, seen = [], set()
    for spec in a.case:
        name, sep, rest = spec.partition(":")
        if not sep or not name or "/" in name or name in seen:
            ap.error(f"--case {spec!r}: want NAME:ARGS, each NAME once and without '/'")
        seen.add(name)
        c = ap.parse_args(shlex.split(rest) + ["--out", os.path.join(a.out, name)])
        if c.case:
            ap.error(f"--case {spec!r}: a case holds no --case")
        out.append((name, c))
    return out


def reset_megatron():
    """megatron-core's global state back to a fresh process's: the groups
    and buffers parallel_state keeps, the micro-batch calculator, the RNG
    tracker (this job sets neither of the last two; a case must not
    inherit them all the same)."""
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
    import megatron.core.num_microbatches_calculator as nmc
    nmc.unset_num_microbatches_calculator()
    from megatron.core.tensor_parallel import random as tp_random
    tp_random._CUDA_RNG_STATE_TRACKER = None
    tp_random._CUDA_RNG_STATE_TRACKER_INITIALIZED = False


def main():
    ap = parser()
    jobs = cases(ap, ap.parse_args())
    cpu_shims()
    dist.init_process_group("gloo")
    rng = torch.get_rng_state()   # what a fresh process starts each job with
    for i, (_, a) in enumerate(jobs):
        if i:
            reset_megatron()
            torch.set_rng_state(rng)
        run(a)
    dist.destroy_process_group()


def run(a):
    """One job: megatron-core's groups set up, a.steps steps, the json."""
    from megatron.core import parallel_state as ps
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer import TransformerConfig

    P, V = a.pp, a.vp
    ps.initialize_model_parallel(pipeline_model_parallel_size=P,
                                 virtual_pipeline_model_parallel_size=V if V > 1 else None)
    kw = dict(num_layers=a.layers, hidden_size=a.hidden, num_attention_heads=2,
              pipeline_model_parallel_size=P, pipeline_dtype=torch.float32,
              bf16=False, fp16=False, params_dtype=torch.float32)
    if V > 1:
        # with batched p2p on P 2 the next and the previous peer are one rank
        # and tensors swap (Megatron-LM #750): overlapped, unbatched p2p
        kw.update(virtual_pipeline_model_parallel_size=V, overlap_p2p_comm=True, batch_p2p_comm=False)
        if a.group:
            kw["microbatch_group_size_per_vp_stage"] = a.group
    if a.per_token:
        kw["calculate_per_token_loss"] = True
    config = TransformerConfig(**kw)
    r, dp_group = ps.get_pipeline_model_parallel_rank(), ps.get_data_parallel_group()
    vocab, mb_size = 64, 2
    log = []
    chunks = [Chunk(config, c * P + r, P * V, a.layers, vocab, c, log) for c in range(V)]

    def finalize(model_chunks, *args, **kwargs):
        # the data-parallel gradient reduction (megatron-core's
        # finalize_model_grads needs its own DDP wrapper; this job's is plain)
        n = dist.get_world_size(dp_group)
        for m in model_chunks:
            for p in m.parameters():
                if p.grad is not None and n > 1:
                    dist.all_reduce(p.grad, group=dp_group)
                    p.grad /= n
    config.finalize_model_grads_func = finalize
    grad_syncs = []   # a step: the bucket groups' gradient syncs issued outside finalize_model_grads
    if a.megatron_ddp:
        from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                               finalize_model_grads)
        ddp_config = DistributedDataParallelConfig(overlap_grad_reduce=True, use_distributed_optimizer=False)
        chunks = [DistributedDataParallel(config=config, ddp_config=ddp_config, module=c) for c in chunks]
        in_finalize = [False]

        def counted_sync(sync):
            def start_grad_sync(*args, **kwargs):
                if not in_finalize[0] and grad_syncs:
                    grad_syncs[-1] += 1
                return sync(*args, **kwargs)
            return start_grad_sync
        for c in chunks:
            c.chunk = c.module.chunk
            for bg in c.bucket_groups:
                bg.start_grad_sync = counted_sync(bg.start_grad_sync)

        def finalize_counted(*args, **kwargs):
            in_finalize[0] = True
            try:
                return finalize_model_grads(*args, **kwargs)
            finally:
                in_finalize[0] = False
        config.finalize_model_grads_func = finalize_counted
        config.no_sync_func = [c.no_sync for c in chunks] if V > 1 else chunks[0].no_sync
        config.grad_sync_func = [c.start_grad_sync for c in chunks] if V > 1 else chunks[0].start_grad_sync
    # a loss summed over tokens has gradients as many times larger
    lr = 0.05 / (a.seq * mb_size) if a.per_token else 0.05
    opt = torch.optim.SGD([p for c in chunks for p in c.parameters()], lr=lr)

    def loss_func(labels, out):
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, vocab), labels.transpose(0, 1).reshape(-1))
        if a.per_token:
            # Megatron-LM's form: the sum and its token count (megatron-core leaves it undivided)
            n = torch.tensor(labels.numel(), dtype=torch.int)
            return loss * labels.numel(), n, {"lm loss": loss.detach().clone()}
        return loss, {"lm loss": loss.detach().clone()}   # before Megatron scales it in place

    slow_s = 0.0
    if a.slow_forward and int(a.slow_forward.split(":")[0]) == dist.get_rank():
        slow_s = float(a.slow_forward.split(":")[1])

    def forward_step(data_iterator, model):
        b = next(data_iterator)
        if a.hang_process == dist.get_rank() and len(losses) == 1 and b["mb"] == 1:
            while True:   # the job's own bug: a forward that never returns
                time.sleep(3600)
        log.append(("F", model.chunk, b["mb"]))
        if slow_s:
            time.sleep(slow_s)
        out = model(b["tokens"], b["mb"])
        from functools import partial
        return out, partial(loss_func, b["labels"])

    dp_rank = ps.get_data_parallel_rank()
    losses, orders, step_s, cpu_s = [], [], [], []
    fb = get_forward_backward_func()
    for step in range(a.steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.zero_grad()
        grad_syncs.append(0)
        if a.megatron_ddp:
            for c in chunks:
                c.zero_grad_buffer()
        log.clear()
        # each replica its own data: dp rank in the seed
        iters = [batches(step * 10 + dp_rank, a.microbatches, mb_size, a.seq, vocab) for _ in range(V)]
        out = fb(forward_step_func=forward_step, data_iterator=iters if V > 1 else iters[0],
                 model=chunks if V > 1 else chunks[0], num_microbatches=a.microbatches,
                 seq_length=a.seq, micro_batch_size=mb_size, forward_only=False)
        if a.megatron_ddp:
            # megatron-core's DDP reduces into main_grad; this job's plain SGD steps on it
            for c in chunks:
                for p in c.parameters():
                    p.grad = p.main_grad
        opt.step()
        losses.append([float(d["lm loss"]) for d in out] if out else [])
        orders.append([list(x) for x in log])
        step_s.append(time.perf_counter() - t0)
        cpu_s.append(time.thread_time() - c0)

    h = hashlib.sha256()
    for c in chunks:
        for p in c.parameters():
            h.update(p.detach().numpy().tobytes())
    g = dist.get_rank()
    rec = {"losses": losses, "params": h.hexdigest(), "orders": orders,
           "coord": [r, dp_rank, ps.get_tensor_model_parallel_rank()],
           "size": [P, ps.get_data_parallel_world_size(), ps.get_tensor_model_parallel_world_size()],
           "vp": V, "pp_rank": r, "step_s": step_s, "cpu_s": cpu_s, "grad_syncs": grad_syncs,
           # 0.16 runs the loss function in forward_step_calc_loss (0.13 inside forward_step)
           "calc_loss": hasattr(sys.modules["megatron.core.pipeline_parallel.schedules"],
                                "forward_step_calc_loss")}
    dist.barrier()
    if a.list:
        rec["listed"] = sorted(os.listdir(a.list))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"process{g}.json"), "w") as f:
        json.dump(rec, f)


if __name__ == "__main__":
    sys.exit(main())
