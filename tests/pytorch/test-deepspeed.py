#!/usr/bin/env python3
"""test-deepspeed.py — real DeepSpeed pipeline jobs (tests/pytorch/
deepspeed-train.py, CPU, gloo, forkrun.py) under `pipescope-cli profile`, every
case in one test, a TAP line a case:

    test-deepspeed.py CLI [PYVAR [CASE...]]

PYVAR names the variable that gives the PyTorch environment's python
(PIPESCOPE_TORCH_PYTHON: DeepSpeed 0.19; PIPESCOPE_TORCH211_PYTHON: the older
line the hook knows, 0.16); CASEs choose among the cases (all by default).

    pp2dp2      4 processes, PipelineEngine (TrainSchedule), pp 2 x dp 2
    pp4         4 processes, PipelineEngine (TrainSchedule), pp 4, M 6
    dualpipev   4 processes, DualPipeVEngine, pp 2 (4 stages) x dp 2, M 4
    unknown     a DeepSpeed version the hook does not know: one line, nothing
                wrapped; the autoload engages the adapter on the pipe engine's
                import (import deepspeed makes it) and not before (no torchrun)
    slots       `schedule -s DeepSpeed-1F1B --format instructions` against
                DeepSpeed's own TrainSchedule over shapes (no torchrun)

Each job runs twice, plain and under profile (the three plain runs one after
the other in one launch: deepspeed-train.py --jobs); asserted:
  * profile exits 0 and the hook engaged in every process (nothing said);
  * every process's losses and weights after the last step are the plain
    run's, bit for bit;
  * one trace holds every process at the place DeepSpeed's grid gives it,
    the schedule named as DeepSpeed runs it (DeepSpeed-1F1B, DeepSpeed-DualPipeV);
  * every instruction the engine executed in the first step (the job's own
    witness, read from DeepSpeed's schedule objects) is the span it maps to,
    in the order of their start, with its stage and micro-batch: F, B, the
    four transfers (DualPipeV's at the CommitP2P that runs them), HOST_DATA,
    REDUCE_GRAD, OPT; and as many of each in every later step;
  * each pipeline rank's plan is the order of ForwardPass and BackwardPass
    its schedule runs (Chrome export's plan lane);
  * the loss recorded each step is what train_batch returned;
  * render --plan (the app's drawing) draws it;
  * suggest offers only what DeepSpeed's engine runs (TrainSchedule, 1F1B,
    at other gradient_accumulation_steps), said in its terms.
Skips (TAP "1..0 # SKIP") where the PyTorch environment or DeepSpeed is missing.
"""

import collections
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DS_LINE = "?"   # the DeepSpeed line under test ("0.19"), read from the environment
STEPS = 3
CASES = {   # world, pp, micro-batches, DualPipeV
    "pp2dp2": (4, 2, 4, False),
    "pp4": (4, 4, 6, False),
    "dualpipev": (4, 2, 4, True),
}
# an instruction -> the span kind it becomes (CommitP2P: none of its own)
KIND = {"ForwardPass": "F", "BackwardPass": "B", "SendActivation": "SEND_F", "RecvActivation": "RECV_F",
        "SendGrad": "SEND_B", "RecvGrad": "RECV_B", "LoadMicroBatch": "HOST_DATA",
        "ReduceTiedGrads": "REDUCE_GRAD", "ReduceGrads": "REDUCE_GRAD", "OptimizerStep": "OPT"}
TRANSFERS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
n_case = 0


class Failed(Exception):
    pass


def run(cmd, env, what, timeout=400):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise Failed(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def expected(cmds, pp, P, dualpipev):
    """The spans (kind, stage, mb) the witnessed instructions become, in
    order: DualPipeV's transfers where the CommitP2P that runs them is."""
    out, queued = [], []
    for name, mb, phase in cmds:
        if name == "CommitP2P":
            out += queued
            queued = []
            continue
        kind = KIND[name]
        if kind in ("F", "B") + TRANSFERS:
            item = (kind, pp if not phase else 2 * P - 1 - pp, mb)
        else:   # a data-parallel block is its pipeline rank's (stage: the rank's first); host, OPT: none
            item = (kind, pp if kind == "REDUCE_GRAD" else -1, -1)
        (queued if dualpipev and kind in TRANSFERS else out).append(item)
    return out + queued


def plans_of(events):
    """{pipeline rank: [(kind, stage, mb)]} of the Chrome export's plan
    lanes ("plan rank R"), step 0's copy, in time order."""
    lane = {}
    for e in events:
        name = e.get("name") == "thread_name" and str(e["args"].get("name", ""))
        if name and name.startswith("plan rank "):
            lane[(e["pid"], e["tid"])] = int(name.split()[2])
    plans = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "plan" and e.get("ph") == "X" and e["args"].get("step", 0) == 0:
            plans[lane.get((e["pid"], e["tid"]), -1)].append(
                (e["ts"], e["args"]["kind"], e["args"]["stage"], e["args"]["microbatch"]))
    return {r: [(k, s, m) for _, k, s, m in sorted(v)] for r, v in plans.items()}


def plain_runs(py, env, out, names):
    """The plain run of every case in names, one after the other in one
    launch (every case has W processes) into out/NAME/."""
    launcher = [py, os.path.join(HERE, "forkrun.py")]
    cases = {n: c for n, c in CASES.items() if n in names}
    if not cases:
        return
    W = {c[0] for c in cases.values()}
    assert len(W) == 1, "the plain runs share one launch: every case has as many processes"
    jobs = ",".join(f"{n}:{P}:{M}" + (":dualpipev" if v else "") for n, (_, P, M, v) in cases.items())
    run(launcher + ["--standalone", "--nproc-per-node", str(W.pop()), os.path.join(HERE, "deepspeed-train.py"),
         "--steps", str(STEPS), "--jobs", jobs, "--out", out], env, "the plain runs")


def case(cli, py, name, env, tmp, plain):
    W, P, M, dualpipev = CASES[name]
    launcher = [py, os.path.join(HERE, "forkrun.py")]
    job = launcher + ["--standalone", "--nproc-per-node", str(W), os.path.join(HERE, "deepspeed-train.py"),
           "--pp", str(P), "--microbatches", str(M), "--steps", str(STEPS)] + (["--dualpipev"] if dualpipev else [])
    plain = os.path.join(plain, name)
    prof = os.path.join(tmp, "prof")
    trace = os.path.join(tmp, "job.pptrace")
    p = run([cli, "profile", "--trace", trace, "--name", "dstest", "--"] + job + ["--out", prof],
            env, "the profiled run")
    said = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
    if said:
        raise Failed("the hook said:\n" + "\n".join(said))

    procs = {}
    for g in range(W):
        a = json.load(open(os.path.join(plain, f"process{g}.json")))
        b = json.load(open(os.path.join(prof, f"process{g}.json")))
        if (a["losses"], a["weights"]) != (b["losses"], b["weights"]):
            raise Failed(f"process {g}: losses or weights differ under profile: {a['losses']} vs {b['losses']}")
        procs[g] = b

    info = run([cli, "info", trace], env, "info").stdout
    sched = "DeepSpeed-DualPipeV" if dualpipev else "DeepSpeed-1F1B"
    want = [f"schedule: {sched} (P={P}, M={M}, V={2 if dualpipev else 1})", f"ranks: {P}", f"DeepSpeed {DS_LINE}."]
    if W > P:
        want.append(f"processes: {W} (pp {P} × dp {W // P}")
        want += [f"process {g}: pp {b['place']['pp']} dp {b['place']['dp']} tp {b['place']['tp']} host "
                 for g, b in procs.items()]
    missing = [w for w in want if w not in info]
    if missing:
        raise Failed(f"info lacks {missing}:\n{info}")

    spans = os.path.join(tmp, "spans.csv")
    run([cli, "export", trace, "--format", "csv", "-o", spans], env, "export --format csv")
    by = collections.defaultdict(list)   # (process, step) -> spans in file order
    for r in csv.DictReader(open(spans)):
        if r["kind"] in KIND.values():
            who = int(r["process"]) if r["process"] else int(r["rank"])
            by[(who, int(r["step"]))].append(r)
    n_first = 0
    for g, b in procs.items():
        pp = b["place"]["pp"]
        want0 = expected(b["cmds"], pp, P, dualpipev)
        n_first += len(want0)
        for step in range(STEPS):
            rows = sorted(by[(g, step)], key=lambda r: int(r["start_ns"]))   # stable: ties in file order
            got = [(r["kind"], int(r["stage"]), int(r["microbatch"])) for r in rows]
            if step == 0 and got != want0:
                raise Failed(f"process {g} step 0: recorded {got}\nthe engine executed {want0}")
            if collections.Counter(got) != collections.Counter(want0):
                raise Failed(f"process {g} step {step}: recorded {sorted(got)}\nnot the first step's {sorted(want0)}")

    chrome = os.path.join(tmp, "c.json")
    run([cli, "export", trace, "--format", "chrome", "-o", chrome], env, "export --format chrome")
    ev = json.load(open(chrome))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    plans = plans_of(ev)
    for g, b in procs.items():
        pp = b["place"]["pp"]
        ran = [x for x in expected(b["cmds"], pp, P, dualpipev) if x[0] in ("F", "B")]
        if plans.get(pp) != ran:
            raise Failed(f"rank {pp}'s plan {plans.get(pp)}\nthe schedule ran {ran}")
    # the loss: the loss stage's processes each record train_batch's value a step
    loss_pp = 0 if dualpipev else P - 1
    got = sorted(e["args"]["loss"] for e in ev if e.get("ph") == "C" and e.get("name") == "loss")
    want = sorted(x for b in procs.values() if b["place"]["pp"] == loss_pp for x in b["losses"])
    if len(got) != len(want) or any(abs(a - w) > 1e-6 * max(1.0, abs(w)) for a, w in zip(got, want)):
        raise Failed(f"the losses recorded {got} are not train_batch's {want}")
    # the app's drawing (render: the one function the window, the exports and the tests share)
    png = os.path.join(tmp, "job.png")
    run([cli, "render", trace, "--plan", "-o", png], env, "render --plan")
    with open(png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
            raise Failed("render --plan wrote no image")
    # What if offers what DeepSpeed's engine runs: TrainSchedule (1F1B) at other micro-batch counts
    out = run([cli, "suggest", trace], env, "suggest").stdout
    rows = [l.split()[1] for l in out.splitlines() if l[:4].strip().isdigit()]
    if not rows or set(rows) != {"1F1B"} or "gradient_accumulation_steps=" not in out:
        raise Failed(f"suggest offers {sorted(set(rows))}, not DeepSpeed's TrainSchedule alone:\n{out}")
    return (f"{name}: {W} processes, pp {P} M {M} ({sched}): losses and weights bit for bit, every process at "
            f"its grid's place, the first step's {n_first} instructions as spans in the engine's order and "
            f"as many each later step, each rank's plan, {len(got)} losses as train_batch returned them, "
            f"drawn with its plan, What if in DeepSpeed's terms")


SLOTS = r"""
import sys
from deepspeed.runtime.pipe.schedule import TrainSchedule
for P, M in ((2, 1), (2, 4), (3, 2), (3, 7), (4, 4), (4, 9), (5, 3), (8, 16)):
    lines = []
    for r in range(P):
        for i, cmds in enumerate(TrainSchedule(micro_batches=M, stages=P, stage_id=r).steps()):
            if cmds:
                lines.append(f"rank {r} slot {i}: " + " ".join(repr(c) for c in cmds))
    print(f"== {P} {M}")
    print("\n".join(lines))
"""


def slots(cli, py, env):
    """`schedule -s DeepSpeed-1F1B --format instructions` is DeepSpeed's own
    TrainSchedule, slot by slot, over shapes (DeepSpeed's code, run here)."""
    p = subprocess.run([py, "-c", SLOTS], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise Failed(f"DeepSpeed's TrainSchedule: {p.stderr[-2000:]}")
    shapes = [blk.split("\n", 1) for blk in p.stdout.split("== ")[1:]]
    for head, theirs in shapes:
        P, M = head.split()
        ours = run([cli, "schedule", "-s", "DeepSpeed-1F1B", "-p", P, "-m", M, "--format", "instructions"],
                   env, f"schedule -s DeepSpeed-1F1B -p {P} -m {M}").stdout
        if ours.strip() != theirs.strip():
            raise Failed(f"P {P} M {M}: pipescope's slots\n{ours}\nDeepSpeed's TrainSchedule\n{theirs}")
    return (f"schedule -s DeepSpeed-1F1B --format instructions: DeepSpeed's TrainSchedule slot by slot, every "
            f"rank, {len(shapes)} shapes (P 2 to 8, M 1 to 16)")


UNKNOWN = r"""
from importlib import metadata
real = metadata.version
metadata.version = lambda name: "0.99.0" if name == "deepspeed" else real(name)
from deepspeed.runtime.pipe import engine, schedule
before = (engine.PipelineEngine.train_batch, dict(engine.PipelineEngine._INSTRUCTION_MAP), schedule.TrainSchedule.steps)
import pipescope.deepspeed
ok = pipescope.deepspeed.instrument()
after = (engine.PipelineEngine.train_batch, dict(engine.PipelineEngine._INSTRUCTION_MAP), schedule.TrainSchedule.steps)
print("instrumented" if ok else "left alone", "untouched" if before == after else "wrapped")
"""


def unknown(cli, py, env):
    """A version the hook does not know: one line, nothing wrapped; and the
    autoload engages the adapter when, and only when, the process imports
    DeepSpeed's pipe engine (which import deepspeed does), not for a
    process of torch alone."""
    pkg = os.path.join(HERE, "..", "..", "probe", "python")
    p = subprocess.run([py, "-c", UNKNOWN], env=dict(env, PYTHONPATH=pkg), capture_output=True, text=True,
                       timeout=300)
    lines = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
    want = ("pipescope: not recording: DeepSpeed 0.99.0 is not one this hook knows (0.16 to 0.19); "
            "set PIPESCOPE_DEEPSPEED_ANY=1 to try; the job runs untouched")
    if p.returncode != 0 or p.stdout.strip() != "left alone untouched" or lines != [want]:
        raise Failed(f"an unknown DeepSpeed: exit {p.returncode}, {p.stdout.strip()!r}, said {lines}:\n"
                     f"{p.stderr[-2000:]}")
    lib = os.path.join(os.path.dirname(cli), "..", "..", "probe", "libpipescope-probe.so")
    auto = dict(env, PYTHONPATH=os.path.join(pkg, "pipescope", "_autoload"), PIPESCOPE_PYTHON=pkg,
                PIPESCOPE_JOB="dstest", PIPESCOPE_LIB=lib)
    probe = ("import sys; import {}; e = sys.modules.get('deepspeed.runtime.pipe.engine'); "
             "print('pipescope.deepspeed' in sys.modules, "
             "hasattr(e.PipelineEngine.train_batch, '__wrapped__') if e else None)")
    for mod, out in (("torch", ["False", "None"]), ("deepspeed", ["True", "True"])):
        p = subprocess.run([py, "-c", probe.format(mod)], env=auto, capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or p.stdout.split() != out or "pipescope:" in p.stderr:
            raise Failed(f"import {mod}: {p.stdout!r}, want {out}: {p.stderr[-2000:]!r}")
    return ("unknown: DeepSpeed 0.99.0 left alone, said in one line, nothing wrapped; the autoload engages the "
            "adapter when the pipe engine is imported (import deepspeed does), not for torch alone")


def main():
    global n_case
    global DS_LINE
    cli = sys.argv[1]
    var = sys.argv[2] if len(sys.argv) > 2 else "PIPESCOPE_TORCH_PYTHON"
    py = os.environ.get(var)
    if not py or not os.path.exists(py):
        print(f"1..0 # SKIP {var} is not set (./dev.sh test installs PyTorch and DeepSpeed and sets it)")
        return 0
    env = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONWARNINGS="ignore")
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    if subprocess.run([py, "-c", "import deepspeed.runtime.pipe.engine"], env=env,
                      capture_output=True).returncode != 0:
        print(f"1..0 # SKIP DeepSpeed is not installed in {py} (./dev.sh test installs it)")
        return 0
    v = subprocess.run([py, "-c", "from importlib import metadata; print(metadata.version('deepspeed'))"],
                       env=env, capture_output=True, text=True)
    DS_LINE = ".".join(v.stdout.strip().split(".")[:2])
    names = sys.argv[3:] or list(CASES) + ["unknown", "slots"]
    print(f"1..{len(names)}")
    failed = 0
    plain = tempfile.mkdtemp(prefix="pp-deepspeed-plain-")
    plain_failed = None
    try:
        plain_runs(py, env, plain, names)
    except (Failed, subprocess.TimeoutExpired, OSError) as e:
        plain_failed = e
    for i, name in enumerate(names, 1):
        tmp = tempfile.mkdtemp(prefix="pp-deepspeed-")
        os.chmod(tmp, 0o700)
        try:
            if name in ("unknown", "slots"):
                msg = (unknown if name == "unknown" else slots)(cli, py, env)
            elif plain_failed is not None:
                raise Failed(f"no plain run to compare with: {plain_failed}")
            else:
                msg = case(cli, py, name, dict(env, XDG_RUNTIME_DIR=tmp), tmp, plain)
            print(f"ok {i} - {msg}")
        except (Failed, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as e:
            failed += 1
            print(f"not ok {i} - {name}: " + str(e).replace("\n", "\n# "))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
    shutil.rmtree(plain, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
