#!/usr/bin/env python3
"""test-titan.py — torchtitan 0.3.0's own trainer (llama3's debug model,
PP 2 x FSDP2 2, Schedule1F1B, 4 processes on CPU with gloo) under
`pipescope-cli profile`:

    test-titan.py CLI

The job is tests/pytorch/titan-train.py (torchtitan.train with the shims a
CPU run needs, and the job's own witness of what it did), on a tokenizer
and text of tests/pytorch/titan-data.py; 3 steps of 2 micro-batches, short
sequences.  It asserts:
  1. the job trained (the trainer logged a loss every step) and profile
     recorded its 4 processes, each at the place torchtitan's own mesh gives
     it (pp, dp), every span of a process at that place, each process-step
     with an F and a B of every micro-batch;
  2. the loss: the losses the trainer logged (the sum over micro-batches and
     replicas) are the trace's, step by step, to the log's precision, and
     info's headline;
  3. the schedule's loss calls: one LOSS block of the last stage each, as
     many as the job counted, on each last-stage process;
  4. FSDP2's all-gathers and reduce-scatters, wherever they run, counted
     against the job's own calls of FSDP's foreach_all_gather and
     foreach_reduce, every process-step, the first's metadata inference
     included: the all-gathers one UNSHARD span each with its bytes (bf16
     parameters, torchtitan's default: the bytes gathered, half the float32
     storage's), those inside the loss calls nested in LOSS blocks; the
     reduce-scatters inside the loss calls one REDUCE_GRAD nested in LOSS
     each with its bytes, all reduce-scatters' bytes;
  5. the analysis (export --format why) of every step analysed: the whole
     step holds every process's blocks, loss calls, FSDP2 work and
     optimizer step; each rank's dp_comm with its replica_late is its
     data-parallel spans' time; the last rank's idle leaves out its LOSS
     blocks (work, not host_loss).
Skips (TAP "1..0 # SKIP") where the PyTorch environment or torchtitan is
missing (./dev.sh test installs them).
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from pp_tap import fail, ok, raw_trace, spans_of  # noqa: E402

WORLD, PP, DP = 4, 2, 2
STEPS, M = 3, 2          # steps; micro-batches a step (local batch 2, micro-batch 1)
FSDP_FROM = 0            # the first step whose FSDP2 collectives are compared (see 4.)
COUNTER_LOSS, COUNTER_LOSS_PART = 0, 9   # counter kinds (probe/pipescope.h)
FLAGS = ["--module", "llama3", "--config", "llama3_debugmodel",
         "--parallelism.pipeline-parallel-degree", str(PP),
         "--parallelism.data-parallel-shard-degree", str(DP),
         "--parallelism.pipeline-parallel-schedule", "1F1B",
         "--training.disable-cuda-graphs", "--training.seq-len", "64",
         "--training.local-batch-size", str(M), "--training.steps", str(STEPS),
         "--override.imports", "__main__.eager_attention"]


def run(cmd, env, what, timeout=600, cwd=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def main():
    cli = os.path.abspath(sys.argv[1])
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        return
    has = subprocess.run([py, "-c", "import importlib.util as u; "
                          "print(all(u.find_spec(m) for m in ('torchtitan', 'tokenizers')))"],
                         capture_output=True, text=True)
    if has.stdout.strip() != "True":
        print(f"1..0 # SKIP torchtitan is not installed in {py} (./dev.sh test installs it)")
        return
    print("1..5")
    tmp = tempfile.mkdtemp(prefix="pp-titan-")
    try:
        check(cli, py, tmp)
    finally:
        if os.environ.get("PP_TEST_KEEP"):   # to read the trace after a failure
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def check(cli, py, tmp):
    os.chmod(tmp, 0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp,   # a registry of the test's own
               PATH=os.path.dirname(py) + ":" + os.environ.get("PATH", ""),
               PYTHONWARNINGS="ignore", HF_HOME=os.path.join(tmp, "hf"), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1",
               # torchtitan compiles its BlockMask maker: no compiler run on CPU here
               TORCH_COMPILE_DISABLE="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    assets, out = os.path.join(tmp, "assets"), os.path.join(tmp, "out")
    run([py, os.path.join(HERE, "titan-data.py"), assets], env, "titan-data.py")
    trace = os.path.join(tmp, "job.pptrace")
    job = [os.path.join(os.path.dirname(py), "torchrun"), "--standalone", "--nproc-per-node", str(WORLD),
           os.path.join(HERE, "titan-train.py"), out] + FLAGS + [
           "--hf-assets-path", os.path.join(assets, "tokenizer"),
           "--dataloader.dataset-path", os.path.join(assets, "text"),
           "--dump-folder", os.path.join(tmp, "dump")]
    p = run([cli, "profile", "--trace", trace, "--name", "titan", "--"] + job, env, "the profiled run", cwd=tmp)
    for bad in ("not recording", "recording stopped", "place not recorded"):
        if bad in p.stderr:
            fail(f"the hook said '{bad}':\n{p.stderr[-3000:]}")
    procs = {}
    for g in range(WORLD):
        path = os.path.join(out, f"process{g}.json")
        if not os.path.exists(path):
            fail(f"process {g} wrote no {path}:\n{p.stdout[-3000:]}")
        procs[g] = json.load(open(path))
    info = run([cli, "info", trace], env, "info").stdout
    rows = spans_of(cli, trace, tmp)
    by = collections.defaultdict(list)   # (process, step) -> its spans
    for r in rows:
        by[(int(r["process"]), int(r["step"]))].append(r)
    lasts = check_trained(p, info, rows, by, procs)
    check_loss(trace, info, procs, lasts)
    check_loss_calls(by, procs, lasts)
    check_fsdp(by, procs)
    check_analysis(cli, env, trace, tmp, by, procs)


def check_trained(p, info, rows, by, procs):
    """The job trained, every process recorded at its place.  Returns the
    processes of the last pipeline rank."""
    lasts = [g for g, j in procs.items() if j["place"][0] == PP - 1]
    for g, j in procs.items():
        if j["microbatches"] != M:
            fail(f"process {g}: {j['microbatches']} micro-batches a step, not {M}")
        if g in lasts:
            logged = [float(j["logged"].get(str(s), "nan")) for s in range(1, STEPS + 1)]
            if not all(0 < x < 100 for x in logged):
                fail(f"process {g}: the trainer logged {j['logged']}, want a loss for steps 1..{STEPS}")
    if sorted(tuple(j["place"]) for j in procs.values()) != [(a, b) for a in range(PP) for b in range(DP)]:
        fail(f"the job's own places are not pp {PP} x dp {DP}: {[j['place'] for j in procs.values()]}")
    said = f"{WORLD} processes recorded (pp {PP} × dp {DP} × tp 1)"
    if said not in p.stderr:
        fail(f"profile did not say '{said}':\n{p.stderr[-3000:]}")
    want = [f"processes: {WORLD} (pp {PP} × dp {DP} × tp 1)", f"schedule: 1F1B (P={PP}, M={M}, V=1)"]
    want += [f"process {g}: pp {j['place'][0]} dp {j['place'][1]} tp 0 host " for g, j in procs.items()]
    for w in want:
        if w not in info:
            fail(f"info lacks '{w}':\n{info}")
    for r in rows:
        g = int(r["process"])
        if [int(r["rank"]), int(r["dp"])] != procs[g]["place"]:
            fail(f"a span of process {g} at pp {r['rank']} dp {r['dp']}, the job's place {procs[g]['place']}")
    for g in procs:
        for step in range(STEPS):
            for k in ("F", "B"):
                mbs = sorted(int(r["microbatch"]) for r in by[(g, step)] if r["kind"] == k)
                if mbs != list(range(M)):
                    fail(f"process {g} step {step}: {k} of micro-batches {mbs}, not 0..{M - 1}")
    ok(f"the job trained ({STEPS} steps, losses logged "
       + " -> ".join(procs[lasts[0]]["logged"][str(s)] for s in (1, STEPS))
       + f"); {WORLD} processes at their mesh's places "
       + ", ".join(f"{g}=pp{j['place'][0]}/dp{j['place'][1]}" for g, j in sorted(procs.items())))
    return lasts


def check_loss(trace, info, procs, lasts):
    """The trainer logs, each step, the sum over micro-batches and replicas
    of each micro-batch's loss (its loss function divides by the global
    token count).  The trace's loss parts (each last-stage process's sum
    over its micro-batches) added over the replicas are that, step by step,
    to the log's precision (5 decimals)."""
    _, counters = raw_trace(trace)
    # a value a last-stage process a step, at the step's end; a replica
    # cannot start its next step's collectives before the other ends this
    # one, so in time order each step's values come together
    vals = [v for _, kind, t, v in sorted(counters, key=lambda c: c[2]) if kind == COUNTER_LOSS_PART]
    n = len(lasts)
    got = [sum(vals[i * n:(i + 1) * n]) for i in range(len(vals) // n)]
    logged = procs[lasts[0]]["logged"]
    want = [float(logged[str(s)]) for s in range(1, STEPS + 1)]
    if len(vals) != n * STEPS or any(abs(x - w) > 1e-5 for x, w in zip(got, want)):
        fail(f"the trace's loss, summed over replicas, {got}; the trainer logged {want} "
             f"(loss_part values: {vals}; counters of kind loss: "
             f"{[v for _, k, _, v in counters if k == COUNTER_LOSS]})")
    # the headline (info): the job's loss, reduced over replicas as the job does
    m = re.search(r"^loss: (\S+) -> (\S+) \((\d+) values", info, re.M)
    if not m or int(m.group(3)) != STEPS or any(abs(float(m.group(i + 1)) - want[k]) > 1e-5
                                                for i, k in enumerate((0, STEPS - 1))):
        fail(f"info's loss line {m.group(0) if m else None!r}; the trainer logged {want}")
    ok("the loss as the trainer logged it, every step: " + ", ".join(f"{x:.5f}" for x in got)
       + f"; info's headline {m.group(1)} -> {m.group(2)}")


def span_ns(r):
    return int(r["start_ns"]), int(r["end_ns"])


def check_loss_calls(by, procs, lasts):
    """The schedule's loss call (torchtitan's chunked loss: lm_head and the
    cross-entropy, forward and backward) is the last stage's LOSS block:
    each last-stage process has, every step, one LOSS block a loss call the
    job counted (micro-batches 0 .. M-1), of the last stage, overlapping no
    F or B; no HOST_LOSS anywhere, no LOSS on the first stage.  The loss
    calls of PyTorch's metadata inference (first step) are not the
    schedule's and are not counted there."""
    n = 0
    for g, j in procs.items():
        for step in range(STEPS):
            spans = by[(g, step)]
            loss = [r for r in spans if r["kind"] == "LOSS"]
            want = list(range(j["loss_calls"][str(step + 1)])) if g in lasts else []
            if sorted(int(r["microbatch"]) for r in loss) != want or (g in lasts and want != list(range(M))):
                fail(f"process {g} step {step}: LOSS blocks of micro-batches "
                     f"{sorted(int(r['microbatch']) for r in loss)}; the job counted "
                     f"{j['loss_calls'][str(step + 1)]} loss calls of the schedule")
            if any(r["kind"] == "HOST_LOSS" for r in spans) or any(int(r["stage"]) != PP - 1 for r in loss):
                fail(f"process {g} step {step}: a HOST_LOSS span, or a LOSS block not of stage {PP - 1}")
            for r in loss:
                s, e = span_ns(r)
                if any(b["kind"] in ("F", "B") and span_ns(b)[0] < e and s < span_ns(b)[1] for b in spans):
                    fail(f"process {g} step {step}: LOSS of micro-batch {r['microbatch']} overlaps a block")
            n += len(loss)
    ok(f"{n} LOSS blocks, the schedule's loss calls the job counted (its metadata inference's "
       f"{sum(j['inference_loss_calls'].get('1', 0) for j in procs.values())} apart)")


def check_fsdp(by, procs):
    """FSDP2's collectives, wherever they run (its pre-forward and
    pre-backward hooks inside F, B and the loss call, its reduce-scatters
    after backward and inside the loss call), against the job's own count of
    FSDP's foreach_all_gather and foreach_reduce, every process-step from
    FSDP_FROM (the first, its metadata inference of PyTorch included):
      * as many UNSHARD spans carrying bytes as the job's all-gathers, with
        their bytes; those nested in LOSS blocks as many as the job's
        all-gathers inside the schedule's loss calls, with their bytes;
      * as many REDUCE_GRAD spans with bytes nested in LOSS blocks as the
        job's reduce-scatters inside the loss calls, with their bytes; all
        REDUCE_GRAD spans' bytes the job's reduce-scatters' (the schedule's
        REDUCE_GRAD action is one span for several)."""
    tot = collections.Counter()
    for g, j in procs.items():
        for step in range(FSDP_FROM, STEPS):
            s = str(step + 1)
            spans = by[(g, step)]
            loss = [span_ns(r) for r in spans if r["kind"] == "LOSS"]

            def nested(kind, in_loss=False, with_bytes=True):
                return [int(r["bytes"]) for r in spans if r["kind"] == kind and (int(r["bytes"]) or not with_bytes)
                        and (not in_loss or any(a <= span_ns(r)[0] and span_ns(r)[1] <= b for a, b in loss))]
            ag, ag_loss = nested("UNSHARD"), nested("UNSHARD", True)
            rs, rs_loss = nested("REDUCE_GRAD", with_bytes=False), nested("REDUCE_GRAD", True)
            for what, got, want in (
                    ("UNSHARD spans (count, bytes)", (len(ag), sum(ag)),
                     (j["all_gathers"][s], j["all_gathers_bytes"][s])),
                    ("UNSHARD spans in LOSS blocks (count, bytes)", (len(ag_loss), sum(ag_loss)),
                     (j["all_gathers_in_loss"][s], j["all_gathers_in_loss_bytes"][s])),
                    ("REDUCE_GRAD spans in LOSS blocks (count, bytes)", (len(rs_loss), sum(rs_loss)),
                     (j["reduce_scatters_in_loss"][s], j["reduce_scatters_in_loss_bytes"][s])),
                    ("REDUCE_GRAD spans' bytes", sum(rs), j["reduce_scatters_bytes"][s])):
                if got != want:
                    fail(f"process {g} step {step}: {what} {got}; the job's FSDP2 {want}; the job counted "
                         f"{j['all_gathers'][s]} all-gathers, {j['reduce_scatters'][s]} reduce-scatters; the "
                         f"trace's UNSHARD bytes {ag}, REDUCE_GRAD bytes {rs}")
            if not j["all_gathers"][s] or not j["reduce_scatters"][s]:
                fail(f"process {g} step {step}: the job counted no FSDP2 collective: {j}")
            tot.update({"ag": len(ag), "ag_loss": len(ag_loss), "rs_loss": len(rs_loss), "rs": j["reduce_scatters"][s]})
    ok(f"FSDP2's collectives as the job counted them: {tot['ag']} all-gathers ({tot['ag_loss']} in loss calls), "
       f"{tot['rs']} reduce-scatters' bytes ({tot['rs_loss']} in loss calls), {WORLD} processes, steps "
       f"{FSDP_FROM}..{STEPS - 1}")


WORK = ("F", "B", "LOSS", "UNSHARD", "RESHARD", "REDUCE_GRAD", "OPT")
DP_KINDS = ("UNSHARD", "RESHARD", "REDUCE_GRAD")


def check_analysis(cli, env, trace, tmp, by, procs):
    """The one analysis on this job, step by step (the steps analysed; the
    replica whose steps it reports), against the spans:
      * the whole step: its length covers the replica's F, B, LOSS, FSDP2
        spans and optimizer steps of every pipeline rank;
      * dp_comm: each rank's, with the wait for a slower replica inside
        those collectives (replica_late), is its process's data-parallel
        spans' time, those nested in blocks included;
      * the loss call is work: the last rank's idle is at most the step less
        its blocks' compute (F, B and LOSS, less the FSDP2 spans nested in
        them); counted as host_loss it would be that much more."""
    out = os.path.join(tmp, "why.json")
    run([cli, "export", trace, "--format", "why", "-o", out], env, "export --format why")
    why = json.load(open(out))
    q = why["replicas"]["steps_of_replica"]
    place = {tuple(j["place"]): g for g, j in procs.items()}
    said = []
    for st in why["steps"]:
        step, length = st["step"], st["length"]
        work = [r for rank in range(PP) for r in by[(place[(rank, q)], step)] if r["kind"] in WORK]
        t0 = min(span_ns(r)[0] for r in work)
        t1 = max(span_ns(r)[1] for r in work)
        if length < (t1 - t0) / 1e9 - 1e-6:
            fail(f"step {step}: the analysis's step is {length:.6f} s, replica dp {q}'s work spans "
                 f"{(t1 - t0) / 1e9:.6f} s (blocks, loss calls, FSDP2, optimizer): not the whole step")
        for rank in range(PP):
            spans = by[(place[(rank, q)], step)]
            # the time the process was in data-parallel work: the union of
            # its dp spans (an all-gather and an async reduce-scatter may
            # overlap, and the analysis counts that time once)
            dp, end = 0, None
            for a, b in sorted(span_ns(r) for r in spans if r["kind"] in DP_KINDS):
                if end is None or a > end:
                    dp, end = dp + b - a, b
                elif b > end:
                    dp, end = dp + b - end, b
            dp /= 1e9
            idle = st["idle"][rank]
            late = idle.get("runtime_parts", {}).get("replica_late", 0)
            # equal on every rank, the last stage's included: a wait for
            # a slower replica in the plan's bubble is replica_late, not
            # the bubble's schedule idle (test-why-mesh's
            # replica-wait-in-bubble)
            if abs(idle["dp_comm"] + late - dp) > 1e-6:
                fail(f"step {step} rank {rank}: dp_comm {idle['dp_comm']:.6f} s and replica_late {late:.6f} s, "
                     f"its data-parallel spans {dp:.6f} s")
        spans = by[(place[(PP - 1, q)], step)]
        blocks = [r for r in spans if r["kind"] in ("F", "B", "LOSS")]
        nested = [r for r in spans if r["kind"] in DP_KINDS
                  and any(span_ns(b)[0] <= span_ns(r)[0] and span_ns(r)[1] <= span_ns(b)[1] for b in blocks)]
        compute = (sum(span_ns(b)[1] - span_ns(b)[0] for b in blocks)
                   - sum(span_ns(r)[1] - span_ns(r)[0] for r in nested)) / 1e9
        loss = sum(span_ns(b)[1] - span_ns(b)[0] for b in blocks if b["kind"] == "LOSS") / 1e9
        idle = st["idle"][PP - 1]["idle"]
        if idle > length - compute + 1e-6:
            fail(f"step {step}: the last rank's idle {idle:.6f} s exceeds the step {length:.6f} s less its "
                 f"compute {compute:.6f} s (its LOSS blocks {loss:.6f} s): the loss call counted idle")
        said.append(f"step {step} {length * 1e3:.0f} ms, last rank's LOSS {loss * 1e3:.0f} ms busy")
    if not said:
        fail(f"the analysis reports no step: {why.get('analysis')}")
    ok("the analysis: " + "; ".join(said) + "; dp_comm and replica_late its data-parallel spans'")


if __name__ == "__main__":
    main()
