#!/usr/bin/env python3
"""test-torch.py — a real torch.distributed.pipelining job under
`pipescope-cli profile`, for each of PyTorch's schedule classes given (or a
CSV schedule), 2 ranks on CPU with gloo, launched by forkrun.py
(torchrun's environment, the imports once, issue 42); the live case under
torchrun itself.

    test-torch.py CLI VAR CASE...

VAR names the variable that holds the python of the PyTorch to use
(PIPESCOPE_TORCH_PYTHON: 2.15; PIPESCOPE_TORCH211_PYTHON: 2.11, what the
GPU machine has).  A CASE is a schedule class (Schedule1F1B,
ScheduleZBVZeroBubble, ...), csv:NAME (pipescope's schedule NAME loaded
from CSV), python-hook:CLASS (the hook recording in Python,
PIPESCOPE_FAST=0: the path of every CUDA job and of a build without
python3's headers) or live (below).  Each case is one TAP line.

The plain runs of all the cases are one job (train.py --cases: one torch
import, one process group, each case from its seeds); each case is then
profiled as a job of its own (the hook describes and plans the schedule a
process runs), and it asserts:
  * the command's exit status is its own (0), and the losses and the
    weights after the last step are the plain run's, bit for bit;
  * the trace (merged by profile from the ranks' own) has both ranks, the
    description of the schedule, and every step;
  * per rank and step, the recorded compute order equals the schedule's own
    plan: pipeline_order from PyTorch's schedule object (multi-stage and
    CSV schedules), and for GPipe and 1F1B, which have no such list, the
    order the stage's calls came in, recorded by train.py itself;
  * every (stage, micro-batch) of a rank has its forward and its backward
    (B, or I and W) in every step; transfers and waits are there;
  * the plan is in the trace, and the loss counters of the last stage;
  * the plain run's torch.profiler traces import to the same orders, the
    plan timed with the blocks as imported (each planned forward the mean
    of its stage's forwards in the same trace; no time of this machine is
    compared with another run's).
Needs VAR (the virtual environment's python, which ./dev.sh test
provides); without it skips, saying so.
"""

import collections
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 3
M = 4


class Fail(Exception):
    """A case's check failed: its message."""


def fail(msg):
    raise Fail(msg)


def run(cmd, env, what, timeout=240):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def live(cli, py, env, tmp):
    """One job, live: while a profiled job trains (1F1B loaded from
    pipescope's CSV, a schedule no name rebuilds), `jobs` shows it as one
    line with both ranks and its schedule, `record` by its name and by the
    pid of rank 1 alone each get every rank's spans, and the collector's
    stream holds the plan timed with the costs measured so far (built from
    the ranks' plans)."""
    import time
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    csvf = os.path.join(tmp, "live.csv")
    with open(csvf, "w") as f:
        subprocess.run([cli, "schedule", "-s", "1F1B", "-p", "2", "-m", "4", "--format", "csv"],
                       stdout=f, check=True)
    job = [torchrun, "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"),
           "--csv", csvf, "--stages-per-rank", "1", "--microbatches", "4", "--steps", "100000",
           "--out", os.path.join(tmp, "live")]
    prof = subprocess.Popen([cli, "profile", "--name", "torchlive", "--no-trace", "--"] + job, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + 180
        while time.monotonic() < deadline and prof.poll() is None:
            out = subprocess.run([cli, "jobs"], env=env, capture_output=True, text=True).stdout
            lines = [l for l in out.splitlines() if "torchlive" in l]
            if lines and "ranks 2/2" in lines[0]:
                line = lines[0]
                break
            time.sleep(0.5)
        if not line:
            fail(f"jobs never showed torchlive with ranks 2/2:\n{out}")
        if len(lines) != 1:
            fail(f"jobs shows the job on {len(lines)} lines:\n{out}")
        # the schedule a rank described, not "pytorch" (what the collector
        # knew when it registered): "PID  NAME  SCHEDULE  ..."
        while time.monotonic() < deadline and prof.poll() is None and line.split()[2] != "CSV":
            time.sleep(0.5)
            out = subprocess.run([cli, "jobs"], env=env, capture_output=True, text=True).stdout
            line = ([l for l in out.splitlines() if "torchlive" in l] or [line])[0]
        if line.split()[2] != "CSV":
            fail(f"jobs does not name the job's schedule:\n{line}")
        reg = os.path.join(tmp, "pipescope")
        rank1 = None
        for f in os.listdir(reg):
            if f.endswith(".job"):
                text = open(os.path.join(reg, f)).read()
                if "name=torchlive.r1\n" in text:
                    rank1 = f[:-4]
        if rank1 is None:
            fail(f"no registry entry for rank 1 in {os.listdir(reg)}")
        recs = []
        for spec in ("torchlive", rank1):
            out = os.path.join(tmp, f"rec-{spec}.pptrace")
            recs.append((spec, out, subprocess.Popen([cli, "record", spec, "-o", out], env=env,
                                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                     text=True)))
        deadline = time.monotonic() + 180   # a hang guard, as above
        # Ctrl-C once the recordings are attached (each has written the
        # job's description) and the stream has carried both ranks and a
        # timed plan (the collector times it every 5 s): a short record of
        # it, attached later, holds them, so the earlier ones do too.  Not
        # a sleep: on a loaded machine 8 s did not always hold the plan.
        while time.monotonic() < deadline and prof.poll() is None and \
                not all(os.path.exists(out) and os.path.getsize(out) > 0 for _, out, _ in recs):
            time.sleep(0.2)
        probe = os.path.join(tmp, "rec-probe.pptrace")
        while time.monotonic() < deadline and prof.poll() is None:
            subprocess.run([cli, "record", "torchlive", "-o", probe, "--duration", "1"], env=env,
                           capture_output=True, text=True, timeout=120)
            info = subprocess.run([cli, "info", probe], env=env, capture_output=True, text=True).stdout
            if "rank 0 bubble" in info and "rank 1 bubble" in info and "bubble, plan at measured costs" in info:
                break
        prof.send_signal(2)   # Ctrl-C: the command stops, the recordings end
        prof.wait(timeout=120)
        for spec, out, rp in recs:
            o, e = rp.communicate(timeout=60)
            info = subprocess.run([cli, "info", out], env=env, capture_output=True, text=True).stdout
            if "ranks: 2" not in info or "rank 0 bubble" not in info or "rank 1 bubble" not in info:
                fail(f"record {spec} did not get both ranks:\n{o}\n{e}\n{info}")
            # the collector times the plan every 5 s; the stream held one before Ctrl-C
            if spec == "torchlive" and "bubble, plan at measured costs" not in info:
                fail(f"record {spec}: the live stream has no timed plan of the CSV schedule:\n{info}")
    finally:
        if prof.poll() is None:
            prof.kill()
            prof.wait()
    return ("live: one line in jobs with ranks 2/2 and the schedule; record by name and by rank 1's pid "
            "got both ranks; the collector's stream has the CSV schedule's plan, timed")


def main():
    cli, var, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    py = os.environ.get(var)
    if not py or not os.path.exists(py):
        print(f"1..0 # SKIP {var} is not set (./dev.sh test installs PyTorch and sets it)")
        sys.exit(0)
    print(f"1..{len(cases)}")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    tmp = tempfile.mkdtemp(prefix="pp-torch-")
    env["XDG_RUNTIME_DIR"] = tmp   # a registry of the test's own
    os.chmod(tmp, 0o700)
    launcher = [py, os.path.join(HERE, "forkrun.py")]   # forkrun: issue 42
    launches = 0

    # every recorded case's plain run, under torch.profiler too: one job
    csvs = [c[4:] for c in cases if c.startswith("csv:")]
    if len(csvs) > 1:
        sys.exit("test-torch.py: one csv: case at most (train.py takes one --csv file)")
    csvf = os.path.join(tmp, "schedule.csv")
    plain, kineto = os.path.join(tmp, "plain"), os.path.join(tmp, "kineto")
    train_cases = []
    for c in cases:
        t = "csv" if c.startswith("csv:") else c.split(":")[-1]
        if c != "live" and t not in train_cases:
            train_cases.append(t)
    plain_failed = None
    if train_cases:
        try:
            if csvs:
                with open(csvf, "w") as f:
                    subprocess.run([cli, "schedule", "-s", csvs[0], "-p", "2", "-m", str(M), "--format", "csv"],
                                   stdout=f, check=True)
            launches += 1
            run(launcher + ["--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"),
                 "--cases", ",".join(train_cases), "--microbatches", str(M), "--steps", str(STEPS),
                 "--record-order", "--out", plain, "--profile-trace", kineto]
                + (["--csv", csvf, "--csv-stages-per-rank", "1"] if csvs else []),
                env, "the plain runs (under torch.profiler), " + ", ".join(train_cases), timeout=600)
        except (Fail, subprocess.SubprocessError) as e:
            plain_failed = str(e)

    failed = False
    for i, case in enumerate(cases, 1):
        d = os.path.join(tmp, f"case{i}")
        os.makedirs(d)
        try:
            if case == "live":
                launches += 1
                said = live(cli, py, env, tmp)   # its registry: XDG_RUNTIME_DIR
            elif plain_failed is not None:
                fail(plain_failed)
            else:
                launches += 1
                said = check(cli, case, launcher, env, d, csvf, plain, kineto)
            print(f"ok {i} - {said}")
        except (Fail, subprocess.SubprocessError) as e:
            failed = True
            print(f"not ok {i} - {case}: " + str(e).replace("\n", "\n# "))
        sys.stdout.flush()
    print(f"# {launches} launches for {len(cases)} cases")
    sys.exit(1 if failed else 0)


def check(cli, case, launcher, env, tmp, csvf, plain_all, kineto_all):
    """One recorded case, profiled as a job of its own, against its plain
    run (plain_all/<case>, kineto_all.<case>): what it said, or Fail."""
    python_hook = case.startswith("python-hook:")
    how = ", hook in Python" if python_hook else ""
    sched = case.split(":", 1)[1] if python_hook else case
    if python_hook:
        env = dict(env, PIPESCOPE_FAST="0")
    args = ["--microbatches", str(M), "--steps", str(STEPS), "--record-order"]
    if sched.startswith("csv:"):
        args += ["--csv", csvf, "--stages-per-rank", "1"]
        pyname = f"_PipelineScheduleRuntime ({sched})"
        train_case = "csv"
    else:
        args += ["--schedule", sched]
        pyname = sched
        train_case = sched
    job = launcher + ["--standalone", "--nproc-per-node", "2",
           os.path.join(HERE, "train.py")] + args
    plain, prof = os.path.join(plain_all, train_case), os.path.join(tmp, "prof")
    kineto = f"{kineto_all}.{train_case}"
    trace = os.path.join(tmp, "job.pptrace")
    p = run([cli, "profile", "--trace", trace, "--name", "torchtest", "--"] + job + ["--out", prof],
            env, "the profiled run")
    # a CSV schedule too: the analysis builds it from the ranks' plans
    if "planned " not in p.stderr:
        fail(f"profile did not time the plan with the job's costs:\n{p.stdout}\n{p.stderr[-2000:]}")
    # train.py prints nothing: profile's own lines are on stderr only
    if p.stdout != "":
        fail(f"profile wrote to the job's stdout:\n{p.stdout[-2000:]}")
    if "recorded" not in p.stderr:
        fail(f"profile said nothing of what it recorded:\n{p.stderr[-2000:]}")
    if "not recording" in p.stderr or "recording stopped" in p.stderr:
        fail(f"the hook did not record:\n{p.stderr[-2000:]}")

    res = {}
    for r in (0, 1):
        a = json.load(open(os.path.join(plain, f"rank{r}.json")))
        b = json.load(open(os.path.join(prof, f"rank{r}.json")))
        if a["losses"] != b["losses"]:
            fail(f"rank {r}: losses differ under profile: {a['losses']} vs {b['losses']}")
        if a["params"] != b["params"]:
            fail(f"rank {r}: weights differ under profile")
        if a["order"] != b["order"]:
            fail(f"rank {r}: the schedule ran another order under profile")
        res[r] = b
    if not any(res[r]["losses"] and res[r]["losses"][0] for r in res):
        fail("no rank computed a loss")

    # the Chrome export: every flow (a transfer's arrow) ends after it starts
    chrome = os.path.join(tmp, "job.json")
    run([cli, "export", trace, "--format", "chrome", "-o", chrome], env, "the Chrome export")
    with open(chrome) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    starts = {e["id"]: e["ts"] for e in events if e.get("cat") == "flow" and e.get("ph") == "s"}
    ends = {e["id"]: e["ts"] for e in events if e.get("cat") == "flow" and e.get("ph") == "f"}
    back = [i for i in ends if i in starts and ends[i] < starts[i]]
    if not starts or back:
        fail(f"Chrome export: {len(starts)} flows, {len(back)} end before they start")
    if any(e.get("ts", 0) < 0 for e in events):
        fail("Chrome export: an event before time 0")
    info = run([cli, "info", trace], env, "info").stdout
    wants = ["ranks: 2", f"steps: {STEPS}", "rank 0: host", "rank 1: host", "PyTorch",
             "bubble, plan at measured costs (the last plan of each rank", "idle by cause (a step, the mean over the",
             "critical path (share of the step", "median step: ",
             # the one analysis's steps (issue 30): the whole steps after the first
             f"steps analysed: steps 1\u2013{STEPS - 1} ({STEPS - 1} steps: whole steps after the first",
             f"({STEPS} values, as the job computed it)"]
    for want in wants:
        if want not in info:
            fail(f"info lacks '{want}':\n{info}")
    csvp = os.path.join(tmp, "spans.csv")
    run([cli, "export", trace, "--format", "csv", "-o", csvp], env, "export")
    spans = list(csv.DictReader(open(csvp)))
    blocks = collections.defaultdict(list)
    kinds = collections.Counter()
    for s in spans:
        kinds[s["kind"]] += 1
        if s["kind"] in ("F", "B", "I", "W", "OVERLAP_F_B"):
            blocks[(int(s["rank"]), int(s["step"]))].append(s)
    for k in ("SEND_F", "RECV_F", "SEND_B", "RECV_B", "WAIT", "OPT"):
        if kinds[k] == 0:
            fail(f"no {k} span in the trace: {dict(kinds)}")

    for r in (0, 1):
        if res[r]["plan"]:
            want = [label_of_plan(x) for x in res[r]["plan"]]
            source = "pipeline_order"
        else:
            want = res[r]["order"][0]
            source = "the stage's calls"
        if not want:
            fail(f"rank {r}: nothing to compare with")
        for step in range(STEPS):
            got = [label_of_span(s) for s in sorted(blocks[(r, step)], key=lambda s: int(s["start_ns"]))]
            if got != want:
                fail(f"rank {r} step {step}: recorded {got}\n  {source} says {want}")
            have = collections.defaultdict(set)
            for s in blocks[(r, step)]:
                have[(int(s["stage"]), int(s["microbatch"]))].add(s["kind"])
            for st in res[r]["stages"]:
                for mb in range(M):
                    k = have.get((st, mb), set())
                    ok = "F" in k and ("B" in k or {"I", "W"} <= k)
                    if not ok and "OVERLAP_F_B" not in "".join(sorted(k)):
                        # an overlapped pair holds this stage's F or B: its other half is elsewhere
                        if not any(label_covers(x, st, mb) for x in want):
                            fail(f"rank {r} step {step}: stage {st} micro-batch {mb} has only {sorted(k)}")
    # the analysis builds the schedule from the plan frames (a CSV one has
    # no name pipescope knows)
    run([cli, "export", trace, "--format", "why", "-o", os.path.join(tmp, "why.json")], env,
        "export --format why")

    # The plain run's torch.profiler traces, imported: the same orders.
    imported = os.path.join(tmp, "imported.pptrace")
    ip = subprocess.run([cli, "import", f"{kineto}.rank0.json", f"{kineto}.rank1.json", "-o", imported],
                        env=env, capture_output=True, text=True, timeout=120)
    if sched == "Schedule1F1B":
        # 1F1B labels nothing for the profiler: refused, pointing to profile
        if ip.returncode != 2 or "profile" not in ip.stderr or len(ip.stderr.strip().splitlines()) != 1:
            fail(f"import of a 1F1B profiler trace: exit {ip.returncode}, {ip.stderr!r}")
    else:
        if ip.returncode != 0:
            fail(f"import exited {ip.returncode}: {ip.stderr}")
        icsv = os.path.join(tmp, "imported.csv")
        run([cli, "export", imported, "--format", "csv", "-o", icsv], env, "export of the import")
        iblocks = collections.defaultdict(list)
        ikinds = collections.Counter()
        for s in csv.DictReader(open(icsv)):
            ikinds[s["kind"]] += 1
            if s["kind"] in ("F", "B", "I", "W", "OVERLAP_F_B"):
                iblocks[(int(s["rank"]), int(s["step"]))].append(s)
        # the same job's transfers, counted alike: the shapes
        # _initialize_stages sends before the first action are set-up,
        # which import leaves out and profile never sees
        xfer = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
        if [ikinds[k] for k in xfer] != [kinds[k] for k in xfer]:
            fail(f"import counts {[ikinds[k] for k in xfer]} {xfer}, profile {[kinds[k] for k in xfer]}")
        for r in (0, 1):
            want = [label_of_plan(x) for x in res[r]["plan"]] or res[r]["order"][0]
            steps = sorted(st for (rr, st) in iblocks if rr == r)
            if len(steps) != STEPS:
                fail(f"import: rank {r} has steps {steps}, not {STEPS}")
            for st in steps:
                got = [label_of_span(s) for s in sorted(iblocks[(r, st)], key=lambda s: int(s["start_ns"]))]
                if got != want:
                    fail(f"import: rank {r} step {st}: {got}\n  the schedule's: {want}")
        # the import's plan is timed with its blocks as imported (their
        # compute, the waits their labels hold left out): each planned
        # forward lasts the mean of the imported forwards of its stage, in
        # the same trace, whatever this machine's load (with the labels' raw
        # ranges it was about 10 times that).  Forwards only: the cost
        # model's backward is one B = I + W a stage, which a stage that runs
        # both B and I/W (DualPipeV) cannot match kind by kind
        ichrome = os.path.join(tmp, "imported.json")
        run([cli, "export", imported, "--format", "chrome", "-o", ichrome], env, "the import's Chrome export")
        with open(ichrome) as f:
            iev = json.load(f)
        iev = iev["traceEvents"] if isinstance(iev, dict) else iev
        durs = collections.defaultdict(list)
        planned = {}
        for e in iev:
            k = (e.get("args") or {}).get("stage"), e.get("cat")
            if e.get("cat") in ("F", "B", "I", "W") and e.get("ph") == "X":
                durs[k].append(e["dur"])
            elif e.get("cat") == "plan" and e.get("ph") == "X" and e["args"].get("kind") == "F":
                planned[(e["args"]["stage"], e["args"]["kind"])] = e["dur"]
        if not planned:
            fail("the import has no timed plan")
        for (st, kind), d in sorted(planned.items()):
            got = durs.get((st, kind))
            mean = sum(got) / len(got) if got else None
            if mean is None or abs(d - mean) > 0.01 * mean + 0.01:
                fail(f"import: the plan's {st}{kind} lasts {d} us, its imported blocks {mean} us on average")
    return (f"{pyname} (PyTorch {res[0]['torch']}{how}): 2 ranks, {STEPS} steps, {len(spans)} spans, orders as "
            f"the schedule's, losses and weights bit for bit against the plain run; its torch.profiler trace "
            f"imports to the same orders")


def label_of_plan(x):
    """A PyTorch _Action repr as our label: '0F1', '(0F3;3B2)OVERLAP_F_B' -> 'OVL0F3+3B2'."""
    if x.endswith("OVERLAP_F_B"):
        inner = x[x.index("(") + 1:x.index(")")].split(";")
        return "OVL" + "+".join(inner)
    return x


def label_of_span(s):
    if s["kind"] == "OVERLAP_F_B":
        sub = s.get("sub", "")
        return "OVL" + f"{s['stage']}F{s['microbatch']}" + (f"+{sub}" if sub else "")
    return f"{s['stage']}{s['kind']}{s['microbatch']}"


def label_covers(label, stage, mb):
    return label.startswith("OVL") and (f"{stage}F{mb}" in label or f"{stage}B{mb}" in label
                                        or f"{stage}I{mb}" in label)


if __name__ == "__main__":
    main()
