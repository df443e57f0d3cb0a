#!/usr/bin/env python3
"""test-megatron.py — a real megatron-core job (tests/pytorch/megatron-train.py,
CPU, gloo, forkrun.py) under `pipescope-cli profile`, for each layout named,
one TAP line a layout:

    test-megatron.py CLI PYTHON_VARIABLE LAYOUT...

    1f1b           2 processes, pp 2, 1F1B (forward_backward_pipelining_without_interleaving)
    interleaved    2 processes, pp 2, V 2 (..._with_interleaving, overlap_p2p_comm)
    interleaved4   4 processes, pp 4, V 2, 8 micro-batches
    dp             4 processes, pp 2 x dp 2, 1F1B, megatron-core's DistributedDataParallel
                   (overlap_grad_reduce) and finalize_model_grads, calculate_per_token_loss
                   (the loss a sum over tokens, its count beside)
    unknown        a megatron-core version the hook does not know: one line, nothing wrapped;
                   the autoload engages the adapter on the schedules' import only
    (PYTHON_VARIABLE PIPESCOPE_TORCH211_PYTHON: the older megatron-core line, 1F1B)

It runs each layout's job twice, plain and under profile.  The plain runs
come first and share launches: the layouts of one world size run one after
the other in one launch (megatron-train.py --case; importing
megatron-core's schedules costs a process about 9 s of CPU), each exactly
as its own launch would run it; a world size with one layout runs it as
its own launch.  Then each layout's profiled run, alone, and its checks; a
layout that fails is "not ok" and the others still run.  It asserts:
  * profile exits 0 and the hook engaged in every process (no "not
    recording", no "recording stopped");
  * every process's losses and weights after the last step are the plain
    run's, bit for bit;
  * one trace holds every process (info: its processes, or ranks), the
    schedule named as megatron-core's (Megatron-1F1B, Megatron-Interleaved
    with its group size), the loss recorded equal to the job's, and
    info's headline the job's loss as megatron reduces it (the mean of
    the micro-batches' reports, then over the replicas);
  * each process's F and B blocks of every step, in the order of their
    start, are (kind, virtual stage, micro-batch) exactly as megatron-core
    ran them (the job's own witness: the calls megatron-core made of its
    forward_step_func and the backwards autograd ran, virtual stage =
    chunk x P + pp rank), and so is each rank's plan (Chrome export);
  * the loss computation (0.16's forward_step_calc_loss): one LOSS
    block of the last stage a micro-batch, beginning where its F ends;
  * finalize_model_grads one REDUCE_GRAD a process-step outside every
    block; each gradient sync megatron-core's DDP issued in a backward
    (the job's count) a REDUCE_GRAD nested in a B of its stage;
  * sends and receives: as many SEND_F as RECV_F and SEND_B as RECV_B,
    with micro-batches; waits recorded; the optimizer's steps;
  * render --plan draws it into a PNG.
The dp job with a straggler on purpose (issue 38) is test-straggler-jobs's:
the one check of these jobs that compares measured times runs alone, these
beside other tests (issue 42).
Skips (TAP "1..0 # SKIP") where the PyTorch environment or megatron-core
is missing.
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
LAYOUTS = {   # world, pp, vp, micro-batches
    "1f1b": (2, 2, 1, 4),
    "interleaved": (2, 2, 2, 4),
    "interleaved4": (4, 4, 2, 8),
    "dp": (4, 2, 1, 4),
}


class Failed(Exception):
    """A layout's check failed: its TAP line says why."""


def fail(msg):
    raise Failed(msg)


def run(cmd, env, what, timeout=400):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def job_args(layout):
    """megatron-train.py's options for a layout's job (less --out)."""
    W, P, V, M = LAYOUTS[layout]
    args = ["--pp", str(P), "--vp", str(V), "--microbatches", str(M), "--steps", "2"]
    if layout == "dp":
        args += ["--per-token", "--megatron-ddp"]
    return args


def plain_runs(py, layouts, env, root):
    """The plain runs, ROOT/<layout>/process<G>.json: one launch a world
    size.  Returns {layout: why its plain run failed}."""
    launcher = [py, os.path.join(HERE, "forkrun.py"), "--framework", "megatron"]
    by_world = collections.defaultdict(list)
    for layout in layouts:
        by_world[LAYOUTS[layout][0]].append(layout)
    failed = {}
    for W, group in by_world.items():
        cmd = launcher + ["--standalone", "--nproc-per-node", str(W), os.path.join(HERE, "megatron-train.py")]
        if len(group) == 1:
            cmd += job_args(group[0]) + ["--out", os.path.join(root, group[0])]
        else:
            for layout in group:
                cmd += ["--case", layout + ":" + " ".join(job_args(layout))]
            cmd += ["--out", root]
        what = f"the plain run ({', '.join(group)} in one launch)" if len(group) > 1 else "the plain run"
        try:
            run(cmd, env, what, timeout=400 * len(group))
        except (Failed, subprocess.TimeoutExpired) as e:
            failed.update((layout, str(e)) for layout in group)
    return failed


def main():
    cli, var, layouts = sys.argv[1], sys.argv[2], sys.argv[3:]
    bad = [l for l in layouts if l not in LAYOUTS and l != "unknown"]
    if not layouts or bad or len(set(layouts)) != len(layouts):
        print(f"usage: test-megatron.py CLI PYTHON_VARIABLE LAYOUT... (each once, of "
              f"{', '.join(list(LAYOUTS) + ['unknown'])}){': not ' + ', '.join(bad) if bad else ''}",
              file=sys.stderr)
        sys.exit(2)
    py = os.environ.get(var)
    if not py or not os.path.exists(py):
        print(f"1..0 # SKIP {var} is not set (./dev.sh test installs PyTorch and megatron-core and sets it)")
        sys.exit(0)
    if subprocess.run([py, "-c", "import megatron.core.pipeline_parallel.schedules"],
                      capture_output=True).returncode != 0:
        print(f"1..0 # SKIP megatron-core is not installed in {py} (./dev.sh test installs it)")
        sys.exit(0)
    print(f"1..{len(layouts)}", flush=True)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "ignore"
    tmp = tempfile.mkdtemp(prefix="pp-megatron-")
    n_failed = 0
    try:
        os.chmod(tmp, 0o700)
        plain = os.path.join(tmp, "plain")
        plain_failed = plain_runs(py, [l for l in layouts if l != "unknown"],
                                  dict(env, XDG_RUNTIME_DIR=tmp), plain)
        for i, layout in enumerate(layouts, 1):
            try:
                if layout in plain_failed:
                    fail(plain_failed[layout])
                if layout == "unknown":
                    said = unknown(cli, py, dict(env))
                else:
                    own = os.path.join(tmp, layout)
                    os.mkdir(own)
                    said = check(cli, py, layout, dict(env), own, os.path.join(plain, layout))
                print(f"ok {i} - {said}", flush=True)
            except Exception as e:   # a layout's failure, whatever it is, leaves the others to run
                n_failed += 1
                why = str(e) if isinstance(e, Failed) else f"{type(e).__name__}: {e}"
                print(f"not ok {i} - {layout}: " + why.replace("\n", "\n# "), flush=True)
    finally:
        if os.environ.get("PP_TEST_KEEP"):   # to read the trace after a failure
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if n_failed else 0)


UNKNOWN = r"""
import sys
from megatron.core import package_info
package_info.MINOR, package_info.__version__ = 99, "0.99.0"
from megatron.core.pipeline_parallel import schedules, p2p_communication
before = (schedules.forward_step, schedules.backward_step, p2p_communication._p2p_ops,
          schedules.forward_backward_pipelining_with_interleaving)
import pipescope.megatron
ok = pipescope.megatron.instrument()
after = (schedules.forward_step, schedules.backward_step, p2p_communication._p2p_ops,
         schedules.forward_backward_pipelining_with_interleaving)
print("instrumented" if ok else "left alone", "untouched" if before == after else "wrapped")
"""


NO_PIPELINE = r"""
import pipescope.megatron
from megatron.core.pipeline_parallel import schedules
print("instrumented" if pipescope.megatron.instrument() else "left alone")
for _ in range(2):
    try:
        schedules.forward_backward_no_pipelining()   # megatron-core's own TypeError, not ours
    except TypeError as e:
        print("passed", "forward_backward_no_pipelining" in str(e))
"""


def unknown(cli, py, env):
    """A version the hook does not know: instrument() says so in one line
    and wraps nothing.  And the autoload (what profile puts on PYTHONPATH)
    engages the adapter when, and only when, the process imports
    megatron-core's schedules."""
    pkg = os.path.join(HERE, "..", "..", "probe", "python")
    env["PYTHONPATH"] = pkg
    p = subprocess.run([py, "-c", UNKNOWN], env=env, capture_output=True, text=True, timeout=300)
    lines = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
    want = ("pipescope: not recording: megatron-core 0.99.0 is not one this hook knows (0.13 to 0.16); "
            "set PIPESCOPE_MEGATRON_ANY=1 to try; the job runs untouched")
    if p.returncode != 0 or p.stdout.strip() != "left alone untouched" or lines != [want]:
        fail(f"an unknown megatron-core: exit {p.returncode}, {p.stdout.strip()!r}, said {lines}:\n{p.stderr[-2000:]}")
    lib = os.path.join(os.path.dirname(cli), "..", "..", "probe", "libpipescope-probe.so")
    auto = dict(env, PYTHONPATH=os.path.join(pkg, "pipescope", "_autoload"), PIPESCOPE_PYTHON=pkg,
                PIPESCOPE_JOB="megtest", PIPESCOPE_LIB=lib)
    probe = ("import sys; import {}; print('pipescope.megatron' in sys.modules, "
             "hasattr(sys.modules['megatron.core.pipeline_parallel.schedules'].forward_step, '__wrapped__') "
             "if 'megatron.core.pipeline_parallel.schedules' in sys.modules else None)")
    p = subprocess.run([py, "-c", probe.format("torch")], env=auto, capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or p.stdout.split() != ["False", "None"]:
        fail(f"a process that never imports megatron-core: {p.stdout!r} {p.stderr[-2000:]!r}")
    p = subprocess.run([py, "-c", probe.format("megatron.core.pipeline_parallel")], env=auto,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or p.stdout.split() != ["True", "True"] or "pipescope:" in p.stderr:
        fail(f"a process that imports megatron-core's schedules was not instrumented: {p.stdout!r} "
             f"{p.stderr[-2000:]!r}")
    # a job whose pipeline_model_parallel_size is 1: megatron-core runs
    # forward_backward_no_pipelining; said once (else profile ends with no
    # trace and no reason), the call and its exception megatron-core's own
    p = subprocess.run([py, "-c", NO_PIPELINE], env=dict(auto, PYTHONPATH=pkg), capture_output=True,
                       text=True, timeout=300)
    lines = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
    want = ("pipescope: megatron-core ran forward_backward_no_pipelining (pipeline_model_parallel_size 1): "
            "no pipeline there to record; profile a job with pipeline_model_parallel_size 2 or more")
    if p.returncode != 0 or p.stdout.split() != ["instrumented", "passed", "True", "passed", "True"] \
            or lines != [want]:
        fail(f"no pipelining: exit {p.returncode}, {p.stdout!r}, said {lines}:\n{p.stderr[-2000:]}")
    return ("unknown: megatron-core 0.99.0 left alone, said in one line, nothing wrapped; the autoload "
            "engages the adapter when the schedules are imported, not before; forward_backward_no_pipelining "
            "said once")


def check(cli, py, layout, env, tmp, plain):
    """A layout's profiled run against its plain run's
    json in PLAIN; returns its TAP line's text."""
    env["XDG_RUNTIME_DIR"] = tmp   # a registry of the layout's own
    os.chmod(tmp, 0o700)
    W, P, V, M = LAYOUTS[layout]
    launcher = [py, os.path.join(HERE, "forkrun.py"), "--framework", "megatron"]
    job = launcher + ["--standalone", "--nproc-per-node", str(W), os.path.join(HERE, "megatron-train.py")] \
        + job_args(layout)
    prof, traces = (os.path.join(tmp, d) for d in ("prof", "traces"))
    os.mkdir(traces)
    trace = os.path.join(traces, "job.pptrace")
    p = run([cli, "profile", "--trace", trace, "--name", "megtest", "--"] + job + ["--out", prof],
            env, "the profiled run")
    for bad in ("not recording", "recording stopped", "not recorded"):
        if bad in p.stderr:
            fail(f"the hook said '{bad}':\n{p.stderr[-3000:]}")

    procs = {}
    for g in range(W):
        a = json.load(open(os.path.join(plain, f"process{g}.json")))
        b = json.load(open(os.path.join(prof, f"process{g}.json")))
        if a["losses"] != b["losses"]:
            fail(f"process {g}: losses differ under profile: {a['losses']} vs {b['losses']}")
        if a["params"] != b["params"]:
            fail(f"process {g}: weights differ under profile")
        procs[g] = b
    lasts = [g for g, b in procs.items() if b["pp_rank"] == P - 1]
    if not all(procs[g]["losses"][0] for g in lasts):
        fail("the last stage computed no loss")

    info = run([cli, "info", trace], env, "info").stdout
    name = "Megatron-1F1B" if V == 1 else f"Megatron-Interleaved:group={P}"
    want = [f"schedule: {name} (P={P}, M={M}, V={V})", f"ranks: {P}", "megatron-core "]
    if W > P:
        # each process at the place parallel_state gave it (tp innermost, pp outermost)
        want.append(f"processes: {W} (pp {P} × dp {W // P}")
        want += [f"process {g}: pp {b['coord'][0]} dp {b['coord'][1]} tp {b['coord'][2]} host "
                 for g, b in procs.items()]
    for w in want:
        if w not in info:
            fail(f"info lacks '{w}':\n{info}")
    spans = os.path.join(tmp, "spans.csv")
    run([cli, "export", trace, "--format", "csv", "-o", spans], env, "export --format csv")
    rows = list(csv.DictReader(open(spans)))
    by = collections.defaultdict(list)   # (process or rank, step) -> spans
    counts = collections.Counter()
    for r in rows:
        who = int(r["process"]) if r["process"] else int(r["rank"])
        by[(who, int(r["step"]))].append(r)
        counts[r["kind"]] += 1
    for g, b in procs.items():
        for step in range(2):
            got = [(r["kind"], int(r["stage"]), int(r["microbatch"]))
                   for r in sorted(by[(g, step)], key=lambda r: int(r["start_ns"])) if r["kind"] in ("F", "B")]
            ran = [(k, c * P + b["pp_rank"], mb) for k, c, mb in b["orders"][step]]
            if got != ran:
                fail(f"process {g} step {step}: recorded {got}\nmegatron-core ran {ran}")
    # the loss computation (0.16's forward_step_calc_loss, where the job's
    # loss function runs): a LOSS block of the last virtual stage a
    # micro-batch, right where its F ends (side by side, never nested:
    # F's time is its forward alone); 0.13 has no such call (none)
    n_loss = 0
    for g, b in procs.items():
        for step in range(2):
            fwd = {(int(r["stage"]), int(r["microbatch"])): r for r in by[(g, step)] if r["kind"] == "F"}
            loss = [r for r in by[(g, step)] if r["kind"] == "LOSS"]
            want = list(range(M)) if g in lasts and b["calc_loss"] else []
            if sorted(int(r["microbatch"]) for r in loss) != want \
                    or any(int(r["stage"]) != P * V - 1 for r in loss):
                fail(f"process {g} step {step}: LOSS blocks {[(r['stage'], r['microbatch']) for r in loss]}, "
                     f"want the last stage's micro-batches {want}")
            for r in loss:
                f = fwd.get((int(r["stage"]), int(r["microbatch"])))
                if f is None or f["end_ns"] != r["start_ns"] or int(r["end_ns"]) < int(r["start_ns"]):
                    fail(f"process {g} step {step}: LOSS of micro-batch {r['microbatch']} at "
                         f"{r['start_ns']}..{r['end_ns']} does not begin where its F ends ({f and f['end_ns']})")
            n_loss += len(loss)
    if "HOST_LOSS" in counts:
        fail(f"{counts['HOST_LOSS']} HOST_LOSS spans: the loss computation is a LOSS block")
    n_blocks = W * 2 * M * V
    if counts["F"] != n_blocks or counts["B"] != n_blocks:
        fail(f"{counts['F']} F and {counts['B']} B recorded, not {n_blocks} each: {dict(counts)}")
    # every transfer between pipeline ranks, both ends (P 2 V 1: F out of
    # rank 0, grads out of rank 1; each pair of ranks per micro-batch and chunk)
    n_xfer = W // P * (P * V - 1) * M * 2
    for k in ("SEND_F", "RECV_F", "SEND_B", "RECV_B"):
        if counts[k] != n_xfer:
            fail(f"{counts[k]} {k} recorded, not {n_xfer}: {dict(counts)}")
    if any(int(r["microbatch"]) < 0 for r in rows if r["kind"] in ("SEND_F", "RECV_F", "SEND_B", "RECV_B")):
        fail("a transfer without its micro-batch")
    if counts["WAIT"] == 0 or counts["OPT"] != W * 2:
        fail(f"waits {counts['WAIT']}, optimizer steps {counts['OPT']} (want some, and {W * 2}): {dict(counts)}")
    # finalize_model_grads one REDUCE_GRAD a process-step, outside every
    # block (no bytes: it is a call, not one collective); megatron-core's
    # DDP (layout dp) issues its buckets' gradient syncs from the backward
    # hooks of the last micro-batch, or, for what is left, from the
    # schedule's grad_sync_func after the last backward: each one the job
    # counted is a REDUCE_GRAD with its buckets' bytes, inside a B of its
    # stage or outside every block
    n_fin = n_nested = n_sync = 0
    for g, b in procs.items():
        for step in range(2):
            spans = by[(g, step)]
            blocks = [r for r in spans if r["kind"] in ("F", "B", "LOSS")]
            fin = nested = sync = 0
            for r in spans:
                if r["kind"] != "REDUCE_GRAD":
                    continue
                s0, e0 = int(r["start_ns"]), int(r["end_ns"])
                sync += int(r["bytes"]) > 0
                over = [x for x in blocks if int(x["start_ns"]) < e0 and s0 < int(x["end_ns"])]
                if not over:
                    fin += int(r["bytes"]) == 0
                elif int(r["bytes"]) and (len(over) == 1 and over[0]["kind"] == "B" and over[0]["stage"] == r["stage"]
                      and int(over[0]["start_ns"]) <= s0 and e0 <= int(over[0]["end_ns"])):
                    nested += 1
                else:
                    fail(f"process {g} step {step}: REDUCE_GRAD {s0}..{e0} of stage {r['stage']} overlaps "
                         f"{[(x['kind'], x['stage'], x['microbatch']) for x in over]} without lying inside a B "
                         "of its stage")
            if "REDUCE_GRAD" in counts and fin != 1:
                fail(f"process {g} step {step}: {fin} REDUCE_GRAD outside blocks, not finalize_model_grads' one")
            if sync != b["grad_syncs"][step]:
                fail(f"process {g} step {step}: {sync} bucket gradient syncs recorded ({nested} nested in a B); "
                     f"the job counted {b['grad_syncs'][step]} issued outside finalize_model_grads")
            n_fin, n_nested, n_sync = n_fin + fin, n_nested + nested, n_sync + sync
    if layout == "dp" and not n_nested:
        fail("megatron-core's DDP issued no gradient sync inside a backward (overlap_grad_reduce)")

    # the plan of each rank: megatron-core's order
    chrome = os.path.join(tmp, "c.json")
    run([cli, "export", trace, "--format", "chrome", "-o", chrome], env, "export --format chrome")
    ev = json.load(open(chrome))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    # the loss recorded: each last-stage process's mean loss of each step
    got = sorted(e["args"]["loss"] for e in ev if e.get("ph") == "C" and e.get("name") == "loss")
    want = sorted(sum(x) / len(x) for g in lasts for x in procs[g]["losses"])
    if len(got) != len(want) or any(abs(a - b) > 1e-4 * max(1.0, abs(b)) for a, b in zip(got, want)):
        fail(f"the losses recorded {got} are not the job's {want}")
    # the headline (info): the job's loss as megatron reduces it, each
    # step the mean of its micro-batches' reports, then the mean over the
    # data-parallel replicas (Megatron-LM's average over the dp group)
    info = run([cli, "info", trace], env, "info").stdout
    reduced = [sum(sum(procs[g]["losses"][s]) / len(procs[g]["losses"][s]) for g in lasts) / len(lasts)
           for s in range(len(procs[lasts[0]]["losses"]))]
    m = re.search(r"^loss: (\S+) -> (\S+) \((\d+) values?", info, re.M)
    if not m or int(m.group(3)) != len(reduced) or any(abs(float(m.group(i + 1)) - reduced[k]) > 1e-5 * max(1.0, abs(reduced[k]))
                                                   for i, k in enumerate((0, len(reduced) - 1))):
        fail(f"info's loss line {m.group(0) if m else None!r}; the job's loss, reduced as megatron does, {reduced}")
    # the plan lanes: the track named "plan rank R" (one a pipeline rank)
    lane = {}
    for e in ev:
        m = e.get("name") == "thread_name" and str(e["args"].get("name", ""))
        if m and m.startswith("plan rank "):
            lane[(e["pid"], e["tid"])] = int(m.split()[2])
    plans = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") == "plan" and e.get("ph") == "X" and e["args"].get("step", 0) == 0:
            plans[lane.get((e["pid"], e["tid"]), -1)].append(
                (e["ts"], e["args"]["kind"], e["args"]["stage"], e["args"]["microbatch"]))
    for g, b in procs.items():
        if g >= P and W > P:
            continue   # one replica's plan per pipeline rank is enough
        r = b["pp_rank"]
        plan = [(k, s, mb) for _, k, s, mb in sorted(plans.get(r, []))]
        ran = [(k, c * P + r, mb) for k, c, mb in b["orders"][0]]
        if plan != ran:
            fail(f"rank {r}'s plan {plan}\nmegatron-core ran {ran}")

    png = os.path.join(tmp, "job.png")
    run([cli, "render", trace, "--plan", "-o", png], env, "render --plan")
    with open(png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
            fail("render --plan wrote no image")
    keep = os.environ.get("PIPESCOPE_MEGATRON_KEEP")
    if keep:   # for the README's screenshot: KEEP-<layout>.pptrace and .png
        shutil.copy(trace, f"{keep}-{layout}.pptrace")
        shutil.copy(png, f"{keep}-{layout}.png")
    return (f"{layout}: {W} processes, pp {P} V {V} M {M} ({name}): losses and weights bit for bit, "
          f"one trace, every process's {n_blocks // W} F and B a step in megatron-core's order and its plan, "
          f"{n_xfer} of each transfer, {counts['WAIT']} waits, {counts['OPT']} optimizer steps, "
          f"{n_loss} LOSS blocks each where its F ends"
          + (f", {n_fin} REDUCE_GRAD of finalize_model_grads, {n_sync} of DDP's buckets as the job counted "
             f"({n_nested} nested in a B)"
             if "REDUCE_GRAD" in counts else ""))


if __name__ == "__main__":
    main()
