#!/usr/bin/env python3
"""test-torch-mesh.py — a job with more than one pipeline (4 processes: 2
pipeline ranks of 2 processes each, on CPU with gloo, launched by
forkrun.py: torchrun's environment, the imports once, issue 42) under
`pipescope-cli profile`, for each layout of tests/pytorch/mesh-train.py.

    test-torch-mesh.py CLI [LAYOUT ...]   (ddp, fsdp, fsdp-zbv, tp, dp-pp, groups, unplaced;
                                           all of them when none is named)

The plain runs of every layout are one launch (mesh-train.py
--cases: each layout from its own seeds and groups, as it runs alone; the
import of torch in 4 processes is most of a launch's cost, issue 42); each
layout is then profiled as a job of its own.  One TAP line a layout.
For each layout
it asserts:
  * profile's exit status is the command's (0), and every process's losses
    and weights after the last step are the plain run's, bit for bit;
  * the hook recorded in every process (no "not recording", no "recording
    stopped", no place it could not read; in the layout "unplaced", whose
    groups say no place, exactly one line of each process saying its
    place was not read, and the trace still made: every process in it,
    numbered by global rank and said to be "place not read");
  * 4 trace files were written, one a process, named by global rank
    (TRACE.ID.rank0 ... rank3), whatever the pipeline rank each holds;
  * the merged trace's info lists 4 processes, each at the place the job
    computed itself from its mesh (or its groups), profile counted them,
    and in the CSV export every span is its process's at that place, each
    process with a forward and a backward in every step.
The ddp job with a straggler on purpose (issue 38) is
test-straggler-jobs's: the one check of these jobs that compares measured
times runs alone, these beside other tests (issue 42).
Needs PIPESCOPE_TORCH_PYTHON; without it exits 0 with a SKIP line.
"""

import collections
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
LAYOUTS = ["ddp", "fsdp", "fsdp-zbv", "tp", "dp-pp", "groups", "unplaced"]
JOB_ARGS = ["--steps", "2", "--microbatches", "4"]
# the layout whose profiled run sets PIPESCOPE_LOSS=sum: the loss recorded
# as the job's summed part (COUNTER_LOSS_PART), as for torchtitan's trainer
LOSS_SUM_LAYOUT = "dp-pp"
LOSS, LOSS_PART = 0, 9   # counter kinds (probe/pipescope.h)

sys.path.insert(0, os.path.join(HERE, ".."))
from pp_tap import raw_trace  # noqa: E402


class Failed(Exception):
    """A layout's check failed: its TAP line says why; the others go on."""


def fail(msg):
    raise Failed(msg)


def run(cmd, env, what, timeout=300):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def main():
    cli, layouts = sys.argv[1], sys.argv[2:] or LAYOUTS
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        sys.exit(0)
    print(f"1..{len(layouts)}", flush=True)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    tmp = tempfile.mkdtemp(prefix="pp-torch-mesh-")
    failed = 0
    try:
        # every layout's plain run: one job
        plain = os.path.join(tmp, "plain")
        launcher = [py, os.path.join(HERE, "forkrun.py")]
        p = subprocess.run(launcher + ["--standalone", "--nproc-per-node", str(WORLD),
                            os.path.join(HERE, "mesh-train.py"), "--cases", ",".join(layouts)] + JOB_ARGS
                           + ["--out", plain], env=env, capture_output=True, text=True, timeout=600)
        for i, layout in enumerate(layouts, 1):
            try:
                if p.returncode != 0:
                    fail(f"the plain runs exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
                d = os.path.join(tmp, layout)
                os.mkdir(d)
                said = check(cli, py, layout, dict(env), d, os.path.join(plain, layout))
                print(f"ok {i} - {said}", flush=True)
            except (Failed, subprocess.TimeoutExpired) as e:
                failed += 1
                print(f"not ok {i} - {layout}: " + str(e).replace("\n", "\n# "), flush=True)
    finally:
        if os.environ.get("PP_TEST_KEEP"):   # to read the trace after a failure
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


def check(cli, py, layout, env, tmp, plain):
    """The layout profiled, against its plain run's files in plain; what
    the TAP line says."""
    env["XDG_RUNTIME_DIR"] = tmp   # a registry of the layout's own
    os.chmod(tmp, 0o700)
    launcher = [py, os.path.join(HERE, "forkrun.py")]
    job = launcher + ["--standalone", "--nproc-per-node", str(WORLD), os.path.join(HERE, "mesh-train.py"),
           "--layout", layout] + JOB_ARGS
    prof, traces = (os.path.join(tmp, d) for d in ("prof", "traces"))
    os.mkdir(traces)
    trace = os.path.join(traces, "job.pptrace")
    cmd = [cli, "profile", "--trace", trace, "--name", "meshtest", "--"] + job + ["--out", prof, "--list", traces]
    penv = dict(env, PIPESCOPE_LOSS="sum") if layout == LOSS_SUM_LAYOUT else env
    p = run(cmd, penv, "the profiled run")
    for bad in ("not recording", "recording stopped", "place not recorded"):
        if bad in p.stderr:
            fail(f"the hook said '{bad}':\n{p.stderr[-3000:]}")
    if layout == "unplaced":
        # groups that say no place: one line a process, each still recorded
        said = len(re.findall(r"pipescope: the process's place was not read \(the pipeline's process groups "
                              r"are not laid out regularly\): recorded as process \d of its pipeline rank, "
                              r"place not read; recording goes on\n", p.stderr))
        if said != WORLD:
            fail(f"{said} processes said their place could not be read, not {WORLD}:\n{p.stderr[-3000:]}")

    places = {}
    for g in range(WORLD):
        a = json.load(open(os.path.join(plain, f"process{g}.json")))
        b = json.load(open(os.path.join(prof, f"process{g}.json")))
        if a["losses"] != b["losses"]:
            fail(f"process {g}: losses differ under profile: {a['losses']} vs {b['losses']}")
        if a["params"] != b["params"]:
            fail(f"process {g}: weights differ under profile")
        places[g] = (b["coord"], b["size"])
    if not any(l for g in places for l in json.load(open(os.path.join(prof, f"process{g}.json")))["losses"]):
        fail("no process computed a loss")
    if len({tuple(c) for c, s in places.values()}) != WORLD:
        fail(f"the job's own places are not distinct: {places}")

    # the files every process saw once all had stepped: one a process, by global rank
    listed = json.load(open(os.path.join(prof, "process0.json")))["listed"]
    files = [f for f in listed if re.fullmatch(r"job\.pptrace\.[0-9a-f]+\.rank[0-9]+", f)]
    ranks = sorted(int(f.rsplit("rank", 1)[1]) for f in files)
    if ranks != list(range(WORLD)):
        fail(f"trace files written: {listed}; want job.pptrace.ID.rank0 ... rank{WORLD - 1}")

    info = run([cli, "info", trace], env, "info").stdout
    if layout == "unplaced":
        # the pipelines (0, 3) and (1, 2): numbered by global rank within
        # their pipeline rank, never a place guessed silently
        places = {0: ([0, 0, 0], [2, 2, 1]), 1: ([0, 1, 0], [2, 2, 1]), 2: ([1, 0, 0], [2, 2, 1]),
                  3: ([1, 1, 0], [2, 2, 1])}
        lines = [x for x in info.splitlines() if re.match(r"process \d+: ", x)]
        if len(lines) != WORLD or not all("place not read" in x for x in lines):
            fail(f"info does not say each process's place was not read:\n{info}")
    c0, s0 = places[0]
    mesh = f"(pp {s0[0]} × dp {s0[1]} × tp {s0[2]}" + ("; the place of 4 not read" if layout == "unplaced" else ")")
    want = ["ranks: 2", f"processes: {WORLD} {mesh}"]
    for g, (c, s) in places.items():
        want.append(f"process {g}: pp {c[0]} dp {c[1]} tp {c[2]} host ")
    for w in want:
        if w not in info:
            fail(f"info lacks '{w}':\n{info}")
    if len(re.findall(r"^\s*process \d+: ", info, re.M)) != WORLD:
        fail(f"info does not list {WORLD} processes:\n{info}")
    # profile's live line counts the streams its collector read, and a
    # process that opens its rank and exits within one registry scan
    # (100 ms; a 2-step job on a quiet machine) is not among them: that
    # count depends on timing (CI read 3 of 4 once).  What profile
    # recorded is its merge: every process's file, placed as info says.
    # The live line: at most every process; with every process, the mesh.
    live = re.search(r"(\d+) process(?:es)? recorded", p.stderr)
    merged = f"merged {WORLD} traces of "
    if merged not in p.stderr or live is None or int(live.group(1)) > WORLD:
        fail(f"profile did not say '{merged}...' and a live line of at most {WORLD} processes:\n{p.stderr[-3000:]}")
    said = f"{WORLD} processes recorded {mesh}"
    if int(live.group(1)) == WORLD and said not in p.stderr:
        fail(f"profile did not say '{said}':\n{p.stderr[-3000:]}")
    # every span is its process's, at its place: each process computed a
    # forward and a backward of every step under its pipeline rank
    spans = os.path.join(tmp, "spans.csv")
    run([cli, "export", trace, "--format", "csv", "-o", spans], env, "export --format csv")
    kinds = collections.defaultdict(set)
    rows = collections.defaultdict(list)   # (process, step) -> its spans
    for r in csv.DictReader(open(spans)):
        g = int(r["process"])
        c = places[g][0] if g in places else None
        if c is None or [int(r["rank"]), int(r["dp"]), int(r["tp"])] != c[:3]:
            fail(f"a span of process {g} at rank {r['rank']} dp {r['dp']} tp {r['tp']}, not {c}")
        kinds[(g, int(r["step"]))].add(r["kind"])
        rows[(g, int(r["step"]))].append(r)
    for g in places:
        for step in range(2):
            k = kinds[(g, step)]
            if "F" not in k or not ({"B", "I"} & k):
                fail(f"process {g} step {step} has only {sorted(k)}")
    said = check_actions(layout, prof, places, rows)
    said += check_loss(layout, prof, places, rows, trace)
    said += check_fsdp_comms(layout, prof, places, rows)
    said += check_collectives(cli, env, tmp, trace, layout, plain, prof, places, rows)
    return (f"{layout}: {WORLD} processes, losses and weights bit for bit, one trace file a process "
          f"by global rank, each process at the place its mesh gives it: "
          + ", ".join(f"{g}=pp{c[0]}/dp{c[1]}/tp{c[2]}" for g, (c, s) in sorted(places.items())) + said)


DP_KINDS = ("UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD")
BLOCKS = ("F", "B", "I", "W", "LOSS")


def span_ns(r):
    return int(r["start_ns"]), int(r["end_ns"])


def split_dp(g, step, spans):
    """A process-step's data-parallel spans as (actions, nested): those
    outside every block (the schedule's actions), and those inside a block
    of their own stage (FSDP2's collectives run by its hooks, issue 36) as
    (span, the block's kind).  One that overlaps a block without lying
    inside it, or lies inside another stage's, fails."""
    blocks = [r for r in spans if r["kind"] in BLOCKS]
    acts, nested = [], []
    for r in spans:
        if r["kind"] not in DP_KINDS:
            continue
        s, e = span_ns(r)
        over = [b for b in blocks if span_ns(b)[0] < e and s < span_ns(b)[1]]
        if not over:
            acts.append(r)
        elif len(over) == 1 and span_ns(over[0])[0] <= s and e <= span_ns(over[0])[1] \
                and over[0]["stage"] == r["stage"]:
            nested.append((r, over[0]["kind"]))
        else:
            fail(f"process {g} step {step}: {r['kind']} of stage {r['stage']} at {s}..{e} overlaps "
                 f"{[(b['kind'], b['stage'], b['microbatch'], span_ns(b)) for b in over]} without lying "
                 "inside one block of its stage")
    return acts, nested


def setup_end(spans):
    """Where PyTorch 2.15's metadata inference ends in a step (0 where
    it does not run): at a runtime's first step it runs a real forward
    and backward before the first action and reshards every FSDP2 module
    after it (the step's RESHARDs, which the lowered order never has);
    its FSDP2 collectives are the job's too (check_fsdp_comms counts
    them), not the schedule's actions."""
    ends = [span_ns(r)[1] for r in spans if r["kind"] == "RESHARD"]
    return max(ends) if ends else 0


def check_actions(layout, prof, places, rows):
    """Each process ran its pipeline rank's pipeline_order (its compute
    spans, in time order, are the schedule's own order of its rank: the
    job wrote it); the data-parallel actions: FSDP's (UNSHARD, REDUCE_GRAD,
    WAIT_REDUCE_GRAD of each of the process's stages, every step, as the
    runtime's lowered order has them), DDP's gradient reduction at the end
    of a single-stage step (REDUCE_GRAD of the process's stage, once a
    step), none where the job has no data parallelism.  The words said."""
    fsdp = layout.startswith("fsdp")
    ddp = layout in ("ddp", "dp-pp", "groups")
    n_dp = collections.Counter()
    for g in places:
        job = json.load(open(os.path.join(prof, f"process{g}.json")))
        lowered = collections.Counter(a.lstrip("0123456789") for a in job["lowered"])
        order = [a for a in job["order"] if re.fullmatch(r"\d+[FBIW]\d+", a)]   # its compute
        stages = {int(re.match(r"\d+", a).group()) for a in order}
        for step in range(2):
            spans = sorted(rows[(g, step)], key=lambda r: (int(r["start_ns"]), int(r["end_ns"])))
            ran = [f"{r['stage']}{r['kind']}{r['microbatch']}" for r in spans if r["kind"] in ("F", "B", "I", "W")]
            if not fsdp:
                # a single-stage schedule runs _step_microbatches, whose
                # micro-batches PyTorch 2.15's pipeline_order of 1F1B
                # numbers otherwise past rank 0 (1F1 1B0 ... 1F4): its
                # order of kinds and stages, each micro-batch once a kind
                ok = ([re.sub(r"\d+$", "", a) for a in ran] == [re.sub(r"\d+$", "", a) for a in order]
                      and sorted(ran) == sorted(f"{s}{k}{m}" for s in stages for k in "FB"
                                                for m in range(len(order) // 2)))
            else:
                ok = ran == order
            if not ok:
                fail(f"process {g} step {step} ran {ran}, its pipeline rank's pipeline_order is {order}")
            acts, _ = split_dp(g, step, spans)
            t_setup = setup_end(spans) if fsdp else 0
            acts = [r for r in acts if span_ns(r)[0] >= t_setup and r["kind"] != "RESHARD"]
            spans = [r for r in spans if r["kind"] not in DP_KINDS or r in acts]
            dp = [(r["kind"], int(r["stage"])) for r in acts]
            n_dp.update(k for k, _ in dp)
            if any(r["microbatch"] != "-1" for r in spans if r["kind"] in DP_KINDS):
                fail(f"process {g} step {step}: a data-parallel action with a micro-batch")
            got = collections.Counter(dp)
            if fsdp:
                # every UNSHARD twice: its all-gathers issued, and waited
                # for right before the stage's compute that needs them
                if sum(n for (kk, _), n in got.items() if kk == "UNSHARD") != 2 * lowered["UNSHARD"]:
                    fail(f"process {g} step {step}: {dp}; want each of the lowered order's "
                         f"{lowered['UNSHARD']} UNSHARD twice (issue, wait)")
                seq = [r for r in spans if r["kind"] in ("F", "B", "I", "W") + DP_KINDS]
                for s in stages:
                    i = next(i for i, r in enumerate(seq) if r["kind"] in ("F", "B", "I", "W")
                             and int(r["stage"]) == s)
                    if i == 0 or (seq[i - 1]["kind"], int(seq[i - 1]["stage"])) != ("UNSHARD", s):
                        fail(f"process {g} step {step}: stage {s}'s first compute is not right after "
                             f"its UNSHARD's wait: {[(r['kind'], r['stage']) for r in seq[:i + 1]]}")
                for s in stages:
                    for k in ("UNSHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD"):
                        want = 1 if k != "UNSHARD" else None
                        if not got[(k, s)] or (want and got[(k, s)] != want):
                            fail(f"process {g} step {step}: {got[(k, s)]} {k} of stage {s}; its actions {dp}")
                for k in ("REDUCE_GRAD", "WAIT_REDUCE_GRAD"):
                    if sum(n for (kk, _), n in got.items() if kk == k) != lowered[k]:
                        fail(f"process {g} step {step}: {dp}, the lowered order has {lowered[k]} {k}")
            elif ddp:
                # DDP's all-reduce, finished inside the last backward: the
                # last B ends where a REDUCE_GRAD of the stage begins; then
                # perform_reduce_grad's at the step's end
                if sorted(dp) != sorted([("REDUCE_GRAD", s) for s in stages] * 2):
                    fail(f"process {g} step {step}: data-parallel actions {dp}, not two REDUCE_GRAD of "
                         f"each stage of {sorted(stages)} (DDP's all-reduce, the gradients' scaling)")
                for s in stages:
                    last_b = [r for r in spans if r["kind"] == "B" and int(r["stage"]) == s][-1]
                    rg = [r for r in spans if r["kind"] == "REDUCE_GRAD" and int(r["stage"]) == s]
                    if (rg[0]["start_ns"] != last_b["end_ns"] or int(rg[0]["end_ns"]) < int(rg[0]["start_ns"])
                            or int(rg[1]["start_ns"]) < int(rg[0]["end_ns"])):
                        fail(f"process {g} step {step}: stage {s}'s last B {last_b} is not followed at once "
                             f"by DDP's REDUCE_GRAD {rg[0]}")
            elif dp:
                fail(f"process {g} step {step}: data-parallel actions {dp} in a job without data parallelism")
    return ("; each process ran its rank's pipeline_order"
            + ("; data-parallel actions " + ", ".join(f"{k} {n}" for k, n in sorted(n_dp.items())) if n_dp else ""))


def check_loss(layout, prof, places, rows, trace):
    """The schedule's loss call is the last stage's LOSS block (trace
    format 1.9): each process holding the last stage has, every step, one
    LOSS block a loss call the job counted (one a micro-batch), of the
    last stage, micro-batches 0 .. M-1 once each, outside every other
    block; no process has a HOST_LOSS.  zero_grad belongs to the step it
    precedes: one HOST_ZERO_GRAD a process-step (the job calls it once
    before each step, the first included), ending before the step's first
    block and, after the first step, beginning after the last step's
    optimizer.  The loss as the job reduces it: the last stage's mean over
    micro-batches as LOSS, or (LOSS_SUM_LAYOUT, PIPESCOPE_LOSS=sum) their
    sum as LOSS_PART, never both, equal to what the job computed."""
    last_stage = max(int(r["stage"]) for rs in rows.values() for r in rs if r["kind"] in ("F", "B", "I"))
    n_loss, want_vals = 0, []
    for g in places:
        job = json.load(open(os.path.join(prof, f"process{g}.json")))
        holds_last = any(job["losses"])
        for step in range(2):
            spans = rows[(g, step)]
            loss = sorted((int(r["microbatch"]) for r in spans if r["kind"] == "LOSS"))
            if any(r["kind"] == "HOST_LOSS" for r in spans):
                fail(f"process {g} step {step}: a HOST_LOSS span: the loss call is a LOSS block")
            if any(int(r["stage"]) != last_stage for r in spans if r["kind"] == "LOSS"):
                fail(f"process {g} step {step}: a LOSS block not of the last stage {last_stage}")
            want = list(range(job["loss_calls"][step])) if holds_last else []
            if loss != want or (holds_last and not want):
                fail(f"process {g} step {step}: LOSS blocks of micro-batches {loss}; the job counted "
                     f"{job['loss_calls'][step]} loss calls")
            n_loss += len(loss)
            for r in spans:
                if r["kind"] != "LOSS":
                    continue
                s, e = span_ns(r)
                if any(b["kind"] in ("F", "B", "I", "W") and span_ns(b)[0] < e and s < span_ns(b)[1] for b in spans):
                    fail(f"process {g} step {step}: LOSS of micro-batch {r['microbatch']} overlaps a block")
            zg = [r for r in spans if r["kind"] == "HOST_ZERO_GRAD"]
            first = min(span_ns(r)[0] for r in spans if r["kind"] in ("F", "B", "I", "W"))
            if len(zg) != 1 or span_ns(zg[0])[1] > first:
                fail(f"process {g} step {step}: zero_grad spans {[span_ns(r) for r in zg]}, want one ending "
                     f"before the step's first block at {first}")
            if step > 0:
                opt = [span_ns(r)[1] for r in rows[(g, step - 1)] if r["kind"] == "OPT"]
                if not opt or span_ns(zg[0])[0] < max(opt):
                    fail(f"process {g} step {step}: zero_grad at {span_ns(zg[0])} is not after step "
                         f"{step - 1}'s optimizer {opt}")
        if holds_last:
            for ls in job["losses"]:
                want_vals.append(sum(ls) if layout == LOSS_SUM_LAYOUT else sum(ls) / len(ls))
    _, counters = raw_trace(trace)
    kind, other = (LOSS_PART, LOSS) if layout == LOSS_SUM_LAYOUT else (LOSS, LOSS_PART)
    got = sorted(v for _, k, _, v in counters if k == kind)
    if got != sorted(want_vals) or any(k == other for _, k, _, _ in counters):
        fail(f"{'loss_part' if kind == LOSS_PART else 'loss'} counters {got}, the job's "
             f"{sorted(want_vals)}; counters of the other kind: "
             f"{[v for _, k, _, v in counters if k == other]}")
    return (f"; {n_loss} LOSS blocks (the job's loss calls), one zero_grad a step before it, "
            f"{'loss_part' if kind == LOSS_PART else 'loss'} {len(got)} values as the job's")


def check_fsdp_comms(layout, prof, places, rows):
    """FSDP2's collectives counted against the job's own (mesh-train.py
    counts the torch.distributed all-gathers and reduce-scatters FSDP2
    calls, with their bytes): in every process-step the UNSHARD spans'
    bytes (the schedule's actions', PyTorch's set-up's, and those nested
    in blocks) add up to the bytes the job all-gathered, the REDUCE_GRAD
    and WAIT_REDUCE_GRAD spans' (FSDP2's asynchronous finalize reduces in
    the wait) to what it reduce-scattered: each collective recorded once,
    none missed; the all-gathers the job saw inside the schedule's loss
    call are as many UNSHARD issues nested in LOSS blocks; and in the fsdp
    layout (FSDP2 re-gathers what it resharded after a forward) every
    process-step has all-gathers nested in an F and in a B."""
    if not layout.startswith("fsdp"):
        return ""
    n_nested = collections.Counter()
    for g in places:
        comms = json.load(open(os.path.join(prof, f"process{g}.json")))["fsdp_comms"]
        for step in range(2):
            spans = rows[(g, step)]
            job = comms[step]
            ag = sum(int(r["bytes"]) for r in spans if r["kind"] == "UNSHARD")
            rs = sum(int(r["bytes"]) for r in spans if r["kind"] in ("REDUCE_GRAD", "WAIT_REDUCE_GRAD"))
            if (ag, rs) != (job["ag_bytes"], job["rs_bytes"]) or not job["ag"] or not job["rs"]:
                fail(f"process {g} step {step}: UNSHARD bytes {ag}, (WAIT_)REDUCE_GRAD bytes {rs}; the job's "
                     f"{job['ag']} all-gathers moved {job['ag_bytes']}, its {job['rs']} reduce-scatters "
                     f"{job['rs_bytes']}")
            _, nested = split_dp(g, step, spans)
            issued = collections.Counter(kind for r, kind in nested if r["kind"] == "UNSHARD" and int(r["bytes"]))
            n_nested.update(issued)
            if issued["LOSS"] != job["ag_in_loss"]:
                fail(f"process {g} step {step}: {issued['LOSS']} all-gathers nested in LOSS blocks; the job saw "
                     f"{job['ag_in_loss']} inside the schedule's loss call")
            if layout == "fsdp" and (not issued["F"] or not issued["B"]):
                fail(f"process {g} step {step}: all-gathers nested in blocks {dict(issued)}: want some in an F "
                     "and in a B (FSDP2's pre-forward and pre-backward hooks)")
    return ("; FSDP2's collectives' bytes as the job counted them, all-gathers nested in blocks "
            + ", ".join(f"{k} {n}" for k, n in sorted(n_nested.items())))


def check_collectives(cli, env, tmp, trace, layout, plain, prof, places, rows):
    """The tensor-parallel collectives the hook counted: in the tp layout
    one COLLECTIVE_CALLS and one COLLECTIVE_BYTES value per step per
    process (the Chrome export's counter tracks), calls > 0 and the same
    in both processes of a tp pair; none in a job without tp.  The job's
    own wrapper of funcol.all_reduce (tp layout) saw the same calls plain
    and under profile."""
    out = os.path.join(tmp, "chrome.json")
    run([cli, "export", trace, "--format", "chrome", "-o", out], env, "export --format chrome")
    d = json.load(open(out))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    pid_of = {}
    for e in ev:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            m = re.search(r"\(process (\d+)\)", e["args"]["name"])
            if m:
                pid_of[e["pid"]] = int(m.group(1))
    if layout.startswith("fsdp"):
        # the plan has an UNSHARD and a REDUCE_GRAD for each action
        # measured (UNSHARD: issue and wait): the simulator's mean of them
        # adds up to their time; FSDP2's collectives nested in blocks and
        # PyTorch's set-up's are no actions of the schedule (split_dp)
        acts = collections.Counter()
        for (g, step), spans in rows.items():
            a, _ = split_dp(g, step, spans)
            t_setup = setup_end(spans)
            acts.update((r["kind"], g) for r in a if span_ns(r)[0] >= t_setup)
        track = {}
        for e in ev:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                m = re.match(r"plan · pp (\d+) ", e["args"]["name"])
                track[e["pid"]] = ("plan", int(m.group(1))) if m else ("process", pid_of.get(e["pid"]))
        for kind in ("UNSHARD", "REDUCE_GRAD"):
            n = collections.Counter(track.get(e["pid"]) for e in ev
                                    if e.get("ph") == "X" and re.fullmatch(r"\d*" + kind, e.get("name", "")))
            for g, (c, _) in places.items():
                if not acts[(kind, g)] or acts[(kind, g)] != n[("plan", c[0])]:
                    fail(f"process {g}: {acts[(kind, g)]} {kind} actions, its pipeline rank's plan "
                         f"{n[('plan', c[0])]}")
    calls = collections.defaultdict(list)
    mib = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") == "C" and e["name"] == "collective calls a step":
            calls[pid_of.get(e["pid"])].append(e["args"]["calls"])
        elif e.get("ph") == "C" and e["name"] == "collective bytes a step (MiB)":
            mib[pid_of.get(e["pid"])].append(e["args"]["MiB"])
    if layout != "tp":
        if calls or mib:
            fail(f"collectives counted in a job without tensor parallelism: {dict(calls)}")
        return ""
    for g in places:
        if len(calls[g]) != 2 or len(mib[g]) != 2 or not all(c > 0 for c in calls[g]) or not all(
                b > 0 for b in mib[g]):
            fail(f"process {g}: collective calls a step {calls[g]}, MiB {mib[g]}: want 2 steps, each > 0")
    for g in places:
        for h in places:
            if places[g][0][0] == places[h][0][0] and (calls[g], mib[g]) != (calls[h], mib[h]):
                fail(f"processes {g} and {h} of one tp pair counted {calls[g]}/{mib[g]} and {calls[h]}/{mib[h]}")
    for g in places:
        a = json.load(open(os.path.join(plain, f"process{g}.json")))["own_calls"]
        b = json.load(open(os.path.join(prof, f"process{g}.json")))["own_calls"]
        if a != b or not a:
            fail(f"process {g}: the job's own funcol.all_reduce wrapper saw {a} calls plain, {b} under profile")
    return "; tp collectives a step " + ", ".join(f"{g}={calls[g]}" for g in sorted(places))


if __name__ == "__main__":
    main()
