#!/usr/bin/env python3
"""titan-train.py — torchtitan 0.3.0's own trainer (`torchtitan.train`), run
on CPU with gloo under torchrun, with the few shims the job needs there, and
the job's own witness of what it did:

    torchrun --nproc-per-node 4 titan-train.py OUT [torchtitan.train flags...]

The flags go to torchtitan unchanged; add
`--override.imports __main__.eager_attention` for the attention below.

The shims are the job's (a user running torchtitan on CPU needs them too),
never pipescope's hook's:
  * torchtitan picks `cuda` when it finds no accelerator
    (torchtitan/tools/utils.py): it sees `cpu` while that module is imported;
  * torch.cpu as its device module lacks an index for its barrier's
    device_ids (current_device() says "cpu") and what its memory monitor
    asks (get_device_name, get_device_properties, memory_stats, ...);
  * gloo refuses FSDP2's PREMUL_SUM: every FSDP module reduces with sums
    (FSDP2's own set_force_sum_reduction_for_comms(True); the gradients are
    the same);
  * torch 2.15's FlexAttention has no backward on CPU: `eager_attention`, an
    override of torchtitan's own (`--override.imports`), computes the same
    block-causal attention with the BlockMask's mask_mod made dense and
    scaled_dot_product_attention.

What the job writes, OUT/process{RANK}.json:
  place        [pp, dp]: the process's coordinates in torchtitan's own mesh
  logged       {step: loss}: the losses the trainer logged ("step: N  loss: X")
  loss_calls   {step: n}: the calls of the loss function (ChunkedLossWrapper)
               the schedule made;
  inference_loss_calls  those of PyTorch's metadata inference (first step)
  all_gathers, reduce_scatters  {step: n}: FSDP2's foreach_all_gather and
               foreach_reduce calls (each one all-gather / reduce-scatter of a
               parameter group), counted by wrapping FSDP's own functions;
  all_gathers_bytes, reduce_scatters_bytes  {step: n}: their bytes;
  *_in_loss, *_in_loss_bytes  those inside the schedule's loss calls
  microbatches the pipeline's micro-batches a step
"""

import collections
import json
import logging
import os
import re
import sys


def shim_device():
    """torchtitan.tools.utils decides its device at import: no accelerator
    means `cuda` there.  Make it see `cpu` for that import only."""
    import torch
    import torch._utils as tu
    orig = tu._get_available_device_type
    tu._get_available_device_type = lambda: "cpu"
    try:
        import torchtitan.tools.utils as tt_utils
    finally:
        tu._get_available_device_type = orig
    assert tt_utils.device_type == "cpu", tt_utils.device_type
    tt_utils.device_module = CpuModule(torch.cpu)


class CpuModule:
    """torch.cpu as torchtitan's device module: what its barrier and its
    memory monitor ask of it and torch.cpu lacks (an index for
    barrier(device_ids=...), where torch.cpu.current_device() says "cpu"; a
    name, the machine's memory, no statistics); the rest is torch.cpu's."""

    def __init__(self, cpu):
        self._cpu = cpu
        self._total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def __getattr__(self, name):
        return getattr(self._cpu, name)

    def current_device(self):
        return 0

    def get_device_name(self, *args):
        return "cpu"

    def get_device_properties(self, *args):
        import types
        return types.SimpleNamespace(total_memory=self._total)

    def memory_stats(self, *args):
        return {}

    def reset_peak_memory_stats(self, *args):
        pass

    def empty_cache(self):
        pass


COUNTS = collections.Counter()   # this step's, keyed by what was counted
INSIDE = collections.Counter()   # the counted calls running now


def count_calls(owner, name, key, count=None):
    """owner.name wrapped: its outermost calls counted under COUNTS[key],
    or count(args, kwargs) called for each of them instead."""
    orig = getattr(owner, name)

    def counted(*args, **kwargs):
        if not INSIDE[key]:
            if count:
                count(args, kwargs)
            else:
                COUNTS[key] += 1
                if INSIDE["loss"] and not INSIDE["inference"]:
                    COUNTS[key + "_in_loss"] += 1
        INSIDE[key] += 1
        try:
            return orig(*args, **kwargs)
        finally:
            INSIDE[key] -= 1
    counted.__wrapped__ = orig
    setattr(owner, name, counted)


def count_fsdp_comms():
    """FSDP2's own all-gathers and reduce-scatters: its foreach_all_gather
    and foreach_reduce (one a parameter group), and the bytes of the
    torch.distributed collectives they call (an all-gather's output, a
    reduce-scatter's input: the group's flat unsharded parameters or
    gradients)."""
    import torch.distributed as dist
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as pg
    count_calls(pg, "foreach_all_gather", "all_gathers")
    count_calls(pg, "foreach_reduce", "reduce_scatters")

    def add_bytes(outer, arg, names):
        def count(args, kwargs):
            if INSIDE[outer]:
                t = args[arg] if len(args) > arg else next(kwargs[n] for n in names if n in kwargs)
                COUNTS[outer + "_bytes"] += t.numel() * t.element_size()
                if INSIDE["loss"] and not INSIDE["inference"]:
                    COUNTS[outer + "_in_loss_bytes"] += t.numel() * t.element_size()
        return count
    for name in ("all_gather_single", "all_gather_into_tensor"):
        if hasattr(dist, name):
            count_calls(dist, name, "dist_ag", add_bytes("all_gathers", 0, ("output", "output_tensor")))
    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        if hasattr(dist, name):
            count_calls(dist, name, "dist_rs", add_bytes("reduce_scatters", 1, ("input",)))


def count_loss_calls():
    """The loss function's calls (torchtitan's ChunkedLossWrapper), and
    apart those PyTorch's pipelining makes in its metadata inference (the
    first step's probe of the last stage's backward), not the schedule."""
    from torch.distributed.pipelining import stage
    from torchtitan.components.loss import ChunkedLossWrapper
    owner = next((c for c in stage.PipelineStage.__mro__ if "_backward_metadata_inference" in vars(c)), None)
    if owner is not None:
        count_calls(owner, "_backward_metadata_inference", "inference")

    def count(args, kwargs):
        COUNTS["inference_loss_calls" if INSIDE["inference"] else "loss_calls"] += 1
    count_calls(ChunkedLossWrapper, "__call__", "loss", count)


def eager_attention_module():
    """The override: FlexAttention's config and masks, computed eagerly."""
    from dataclasses import dataclass

    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_mask
    from torchtitan.config import derive, override
    from torchtitan.models.common.attention import FlexAttention

    class EagerBlockCausalAttention(FlexAttention):
        """FlexAttention's inputs and BlockMask; its mask_mod evaluated
        densely and handed to scaled_dot_product_attention, which has a
        backward on CPU."""

        @dataclass(kw_only=True, slots=True)
        class Config(FlexAttention.Config):
            pass

        def forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks, score_mod=None, scale=None,
                    enable_gqa=False, out_transform=None, **kwargs):
            assert score_mod is None and out_transform is None, "not needed by llama3's debug model"
            q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))
            B, _, L, _ = q.shape
            mask = create_mask(attention_masks.mask_mod, B, 1, L, k.shape[2], device=q.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)
            return out.transpose(1, 2)

    @override(target=FlexAttention.Config, description="eager block-causal attention (CPU backward)")
    def eager_attention(cfg):
        return derive(cfg, EagerBlockCausalAttention.Config)

    return eager_attention


def main():
    out = sys.argv[1]
    sys.argv = ["torchtitan.train"] + sys.argv[2:]
    rank = int(os.environ["RANK"])
    shim_device()
    globals()["eager_attention"] = eager_attention_module()

    from torch.distributed.fsdp import FSDPModule
    from torchtitan.trainer import Trainer
    import torchtitan.train

    count_fsdp_comms()
    count_loss_calls()

    # the trainer's log lines, as it printed them (its logger is the root
    # logger; init_logger replaces its handlers, not its filters)
    logged = {}

    def witness(record):
        text = re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage())   # its colours off
        m = re.search(r"step:\s*(\d+)\s.*?loss:\s*([-+0-9.eEnaif]+)", text)
        if m:
            logged[int(m.group(1))] = m.group(2)
        return True
    logging.getLogger().addFilter(witness)

    counted = ["loss_calls", "inference_loss_calls"] + [k + w for k in ("all_gathers", "reduce_scatters")
                                                         for w in ("", "_bytes", "_in_loss", "_in_loss_bytes")]
    job = {"place": None, "logged": logged, "microbatches": None, **{k: {} for k in counted}}
    orig_train, orig_step = Trainer.train, Trainer.train_step

    def train(self):
        for part in self.model_parts:
            for m in part.modules():
                if isinstance(m, FSDPModule):
                    m.set_force_sum_reduction_for_comms(True)
        pd = self.parallel_dims
        job["place"] = [pd.get_mesh("pp").get_local_rank(), pd.get_mesh("dp_shard").get_local_rank()]
        job["microbatches"] = self.num_pipeline_parallel_microbatches
        return orig_train(self)

    def train_step(self, *args, **kwargs):
        COUNTS.clear()
        try:
            return orig_step(self, *args, **kwargs)
        finally:
            for key in counted:
                job[key][self.step] = COUNTS[key]

    Trainer.train, Trainer.train_step = train, train_step
    torchtitan.train.main()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"process{rank}.json"), "w") as f:
        json.dump(job, f)


if __name__ == "__main__":
    main()
