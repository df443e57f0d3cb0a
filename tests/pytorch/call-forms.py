"""call-forms.py — a torch.distributed.pipelining job that calls the
functions pipescope's hook wraps in every form their signatures allow, for
tests/pytorch/test-torch-calls.py.

    torchrun --nproc-per-node 2 call-forms.py --schedule ScheduleGPipe --steps 5 --out DIR [--patch]

The job patches PyTorch's pipelining, after the hook (if any) has wrapped
it, as users' code does: each call the schedule makes of a stage's
forward/backward/weight chunk or get_*_ops, of _batch_p2p, _wait_batch_p2p,
the profiler label or _update_losses is made again, to the function that
was there before (the hook's wrapper, or PyTorch's own in a plain run), in
the next of the forms its real signature allows for the same values: all
positional, by keyword from any point on (self too), defaults left out.
The step itself is called bound, unbound and with self by keyword.

--patch instead patches get_fwd_recv_ops and get_bwd_recv_ops as the issue's
user did (counting the ops, calling the originals by keyword) and nothing
else.

Each rank writes DIR/rank<R>.json: every call's result digest in order,
the calls and ops a function, the forms used (how many positionally, which
by keyword), the losses and the weights' checksums.  Nothing in it knows
pipescope but --hook-off: recording stopped through the hook's own failure
path before the first step, its wrappers left in place.

    torchrun --nproc-per-node 2 call-forms.py --cases ScheduleGPipe,patch,off:ScheduleGPipe --out DIR

--cases runs several jobs one after another in the same processes (one
torch import, one process group), each writing DIR/<case>/rank<R>.json: a
schedule class, "patch" (--patch's job) or off:CLASS (recording stopped
before it, as --hook-off; it stays stopped for the cases after).  Each case
starts from scratch (seeds, stages, schedule, its patches put in and taken
out after, its counts), and each rank says "call-forms: case CASE" on
stderr before it, both ranks past a barrier before it begins, so that the
lines of a case lie between its second such line and the next case's.
"""

import argparse
import collections
import inspect
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S
from torch.distributed.pipelining.stage import _PipelineStageBase as Base

STAGE_FNS = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk",
             "get_fwd_send_ops", "get_bwd_send_ops", "get_fwd_recv_ops", "get_bwd_recv_ops")

digests = []                       # (function, digest of its result), in call order
calls = collections.Counter()      # function -> calls
ops = collections.Counter()        # get_*_ops -> ops returned
used = collections.defaultdict(set)  # function -> forms used: (positional count, keywords)


def digest(x):
    if isinstance(x, torch.Tensor):
        return float(x.detach().double().sum())
    if isinstance(x, (list, tuple)):
        return [digest(v) for v in x]
    if isinstance(x, dist.P2POp):
        return [x.op.__name__, x.peer, list(x.tensor.shape), str(x.tensor.dtype)]
    if x is None or isinstance(x, (int, float, str, bool)):
        return x
    return type(x).__name__          # a Work, a label


def forms(sig, bound):
    """Every (args, kwargs) that gives sig's function the values bound
    holds: each split of its positional-or-keyword parameters into
    positional and keyword ones, trailing ones at their defaults left out."""
    values = dict(bound.arguments)
    ps = list(sig.parameters.values())
    pos = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = [values.get(p.name, ()) for p in ps if p.kind == p.VAR_POSITIONAL]
    extra = {}
    for p in ps:
        if p.kind == p.VAR_KEYWORD:
            extra.update(values.get(p.name, {}))
        elif p.kind == p.KEYWORD_ONLY and p.name in values:
            extra[p.name] = values[p.name]
    # the first n given: past the last one the call gave, only defaults
    given = [i for i, p in enumerate(pos) if p.name in values]
    least = max(sum(1 for p in pos if p.default is p.empty), given[-1] + 1 if given else 0)
    out = []
    for n in range(least, len(pos) + 1):
        full = [values[p.name] if p.name in values else p.default for p in pos[:n]]
        for s in range(n + 1):
            if any(p.kind == p.POSITIONAL_ONLY for p in pos[s:n]):
                continue
            if star and star[0] and s < len(pos):
                continue                          # *args: all before it positional
            args = tuple(full[:s]) + (tuple(star[0]) if star and s == len(pos) else ())
            out.append((args, dict({p.name: v for p, v in zip(pos[s:n], full[s:n])}, **extra)))
    return out


def reform(owner, name, undo):
    """Replaces owner.name: each call made again in the next form; undo
    gets what puts it back."""
    before = owner.__dict__[name]
    undo.append((owner, name, before))
    sig = inspect.signature(before)      # the wrapped function's own, through __wrapped__
    turn = [0]

    def again(*args, **kwargs):
        choices = forms(sig, sig.bind(*args, **kwargs))
        a, k = choices[turn[0] % len(choices)]
        turn[0] += 1
        used[name].add((len(a), tuple(sorted(k))))
        calls[name] += 1
        out = before(*a, **k)
        if name.startswith("get_"):
            ops[name] += len(out)
        if name != "record_function":
            digests.append((name, digest(out)))
        return out
    setattr(owner, name, again)


def count_recv(undo):
    """The issue's user: counts the receives, calls the originals by keyword."""
    for name, key in (("get_fwd_recv_ops", "fwd_chunk_id"), ("get_bwd_recv_ops", "bwd_chunk_id")):
        orig = getattr(Base, name)
        undo.append((Base, name, Base.__dict__[name]))

        def counting(self, chunk, _orig=orig, _key=key, _name=name):
            out = _orig(self, **{_key: chunk})
            calls[_name] += 1
            ops[_name] += len(out)
            return out
        setattr(Base, name, counting)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", default="ScheduleGPipe")
    ap.add_argument("--cases", help="comma-separated cases run one after another (DIR/<case>/rank<R>.json)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--patch", action="store_true", help="the issue's user's patch, nothing else")
    ap.add_argument("--hook-off", action="store_true", help="stop the hook's recording before the first step")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    if not a.cases:
        run_case(a, "patch" if a.patch else ("off:" if a.hook_off else "") + a.schedule, a.out)
    else:
        for case in a.cases.split(","):
            # one write(2) of the whole line: two ranks share the stream,
            # and a line written in pieces can interleave with the other's
            sys.stderr.flush()
            os.write(2, f"call-forms: case {case}\n".encode())
            dist.barrier()
            run_case(a, case, os.path.join(a.out, case))
    dist.destroy_process_group()


def run_case(a, case, out):
    """One job from scratch: CASE's patches in, a.steps steps, out again."""
    patch = case == "patch"
    schedule = "Schedule1F1B" if patch else case.split(":")[-1]
    for kept in (digests, calls, ops, used):
        kept.clear()
    undo = []
    if patch:
        count_recv(undo)
    else:
        for name in STAGE_FNS:
            reform(Base, name, undo)
        for name in ("_batch_p2p", "_wait_batch_p2p", "record_function"):
            if name in S.__dict__:
                reform(S, name, undo)
        reform(S._PipelineSchedule, "_update_losses", undo)
    if case.startswith("off:"):
        hook = sys.modules["pipescope.torch"]._hook
        if not hook.failed:
            hook.fail("the test", RuntimeError("recording off on purpose"))
    try:
        train(a, schedule, patch, out)
    finally:
        for owner, name, before in reversed(undo):
            setattr(owner, name, before)


def train(a, schedule, patch, out):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    multi = schedule not in ("ScheduleGPipe", "Schedule1F1B")
    v = 2 if multi else 1
    n_stages = world * v
    mine = [rank, 2 * world - 1 - rank] if "ZBV" in schedule else [rank + k * world for k in range(v)]
    layers = [torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()) for _ in range(n_stages)]
    stages = [PipelineStage(layers[s], s, n_stages, torch.device("cpu")) for s in mine]
    M = a.microbatches
    cls = getattr(S, schedule)
    sched = cls(stages if multi else stages[0], n_microbatches=M, loss_fn=torch.nn.MSELoss())
    params = [p for s in mine for p in layers[s].parameters()]
    opt = torch.optim.SGD(params, lr=0.05)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    losses_by_step = []
    for step in range(a.steps):
        opt.zero_grad()
        losses = []
        xs = (x,) if 0 in mine else ()
        kw = dict(target=y, losses=losses) if n_stages - 1 in mine else {}
        # the step bound, unbound, and with self by keyword where no input comes first
        if step % 3 == 0 or patch:
            sched.step(*xs, **kw)
        elif step % 3 == 1:
            type(sched).step(sched, *xs, **kw)
        elif xs:
            sched.step(*xs, return_outputs=True, **kw)
        else:
            type(sched).step(self=sched, **kw)
        opt.step()
        losses_by_step.append([l.item() for l in losses])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "stages": mine, "digests": digests, "calls": calls, "ops": ops,
                   "forms": {k: sorted(v) for k, v in used.items()}, "losses": losses_by_step,
                   "params": [float(p.detach().double().sum()) for p in params],
                   "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
