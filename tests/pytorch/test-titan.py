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
     replicas) are the trace's, step by step, to the log's precision (the
     hook records each last-stage process's mean over its micro-batches);
  3. the schedule's loss calls: one HOST_LOSS span each, as many as the job
     counted, on each last-stage process, none elsewhere.
Skips (TAP "1..0 # SKIP") where the PyTorch environment or torchtitan is
missing (./dev.sh test installs them).
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from pp_tap import fail, ok, raw_trace, spans_of  # noqa: E402

WORLD, PP, DP = 4, 2, 2
STEPS, M = 3, 2          # steps; micro-batches a step (local batch 2, micro-batch 1)
COUNTER_LOSS = 0         # the counter kind (probe/pipescope.h)
FLAGS = ["--module", "llama3", "--config", "llama3_debugmodel",
         "--parallelism.pipeline-parallel-degree", str(PP),
         "--parallelism.data-parallel-shard-degree", str(DP),
         "--parallelism.pipeline-parallel-schedule", "1F1B",
         "--training.disable-cuda-graphs", "--training.seq-len", "64",
         # float32 parameters: FSDP2 all-gathers them in their own dtype
         "--training.mixed-precision-param", "float32",
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
    print("1..3")
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
    check_loss(trace, procs, lasts)
    check_loss_calls(by, procs, lasts)


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


def check_loss(trace, procs, lasts):
    """The trainer logs, each step, the sum over micro-batches and replicas
    of each micro-batch's loss (its loss function divides by the global
    token count).  The trace's losses (each last-stage process's mean over
    its M micro-batches) times M, added over the replicas, are that, step
    by step, to the log's precision (5 decimals)."""
    _, counters = raw_trace(trace)
    # a value a last-stage process a step, at the step's end; a replica
    # cannot start its next step's collectives before the other ends this
    # one, so in time order each step's values come together
    vals = [v for _, kind, t, v in sorted(counters, key=lambda c: c[2]) if kind == COUNTER_LOSS]
    n = len(lasts)
    got = [M * sum(vals[i * n:(i + 1) * n]) for i in range(len(vals) // n)]
    logged = procs[lasts[0]]["logged"]
    want = [float(logged[str(s)]) for s in range(1, STEPS + 1)]
    if len(vals) != n * STEPS or any(abs(x - w) > 1e-5 for x, w in zip(got, want)):
        fail(f"the trace's loss, summed over micro-batches and replicas, {got}; the trainer logged {want} "
             f"(loss values: {vals})")
    ok("the loss as the trainer logged it, every step: " + ", ".join(f"{x:.5f}" for x in got))


def span_ns(r):
    return int(r["start_ns"]), int(r["end_ns"])


def check_loss_calls(by, procs, lasts):
    """The schedule's loss call (torchtitan's chunked loss: lm_head and the
    cross-entropy, forward and backward) is recorded once a call: each
    last-stage process has, every step, one HOST_LOSS span a loss call the
    job counted (one a micro-batch), overlapping no F or B; none on the
    first stage.  The loss calls of PyTorch's metadata inference (first
    step) are not the schedule's and are not counted there."""
    n = 0
    for g, j in procs.items():
        for step in range(STEPS):
            spans = by[(g, step)]
            loss = [r for r in spans if r["kind"] == "HOST_LOSS"]
            want = j["loss_calls"][str(step + 1)] if g in lasts else 0
            if len(loss) != want or (g in lasts and want != M):
                fail(f"process {g} step {step}: {len(loss)} HOST_LOSS spans; the job counted "
                     f"{j['loss_calls'][str(step + 1)]} loss calls of the schedule")
            for r in loss:
                s, e = span_ns(r)
                if any(b["kind"] in ("F", "B") and span_ns(b)[0] < e and s < span_ns(b)[1] for b in spans):
                    fail(f"process {g} step {step}: a loss call at {s}..{e} overlaps a block")
            n += len(loss)
    ok(f"{n} loss calls recorded, the schedule's the job counted (its metadata inference's "
       f"{sum(j['inference_loss_calls'].get('1', 0) for j in procs.values())} apart)")


if __name__ == "__main__":
    main()
