#!/usr/bin/env python3
"""test-one-analysis.py CLI DATA_DIR — issue 30, one analysis: a trace read
through every CLI view carries the same numbers (runtime/pp-analysis.h).

- `run` (a ZBV run of 20 steps with --trace) numbers its console steps
  0..19, as the trace does, and prints the steps analysed, the measured
  bubble a step per rank and the median step;
- `info`, `export --format why` and `suggest`'s row marked '← measured'
  read the saved trace: the same steps (4..19: whole steps after the first,
  the last 16), the same median step and the same bubbles, to the printed
  precision; the why report's steps and step length are the analysis's;
- `run`'s idle by cause and runtime's parts (read back from the trace it
  wrote) are `info`'s on that trace, line for line; a run without a trace
  says in one line why it prints no parts;
- a PyTorch job (tests/data/kineto/zbv, imported): `suggest` offers no
  DualPipe (torch.distributed.pipelining has none), and its measured row
  shows info's median step and mean bubble, not a prediction;
- issue 36: a PP 2 x DP 2 job whose median copy is dp 1 (pp-synth-mesh):
  info, export --format why and render's header carry that copy's step and
  bubbles and one plan bubble.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CLI, DATA = sys.argv[1], sys.argv[2]
n_test = 0


def ok(cond, what):
    global n_test
    n_test += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n_test, what))
    return cond


def cli(*args):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        print("# %s: rc %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def info_numbers(text):
    steps = re.search(r"^steps analysed: steps (\d+)\u2013(\d+) \((\d+) steps", text, re.M)
    med = re.search(r"^median step: ([\d.]+) ms", text, re.M)
    bub = [float(x) for x in re.findall(r"^  rank \d+ bubble: ([\d.]+)%", text, re.M)]
    mean = re.search(r"^mean bubble a step: ([\d.]+)%", text, re.M)
    return (steps and (int(steps.group(1)), int(steps.group(2)), int(steps.group(3))),
            med and med.group(1), bub, mean and float(mean.group(1)))


def why_lines(text):
    """The idle by cause rows and the runtime-by-part lines, as printed."""
    rows = re.findall(r"^ +\d+ +[\d.]+ ms +[\d.]+ ms .*$", text, re.M)
    parts = re.findall(r"^  rank \d+: [\d.]+ ms = .*$", text, re.M)
    return rows, parts


def measured_row(text):
    m = re.search(r"^\s*\d+\s+(\S+)\s+\d+\s+\d+\s+([\d.]+)\s+([\d.]+)%\s+[\d.]+\s+\u2190 measured$", text, re.M)
    return m and (m.group(1), m.group(2), float(m.group(3)))


tmp = tempfile.mkdtemp(prefix="pp-one-analysis-")
try:
    trace = os.path.join(tmp, "zbv.pstrace")
    out = cli("run", "-s", "ZBV", "-p", "2", "-m", "4", "--steps", "20", "--backend", "cpu",
              "--no-live", "--trace", trace)
    printed = [int(x) for x in re.findall(r"^step (\d+)  loss", out, re.M)]
    ok(printed and printed[0] == 0 and printed[-1] == 19, "run numbers its steps 0..19 (%s)" % printed[-1:])
    run_steps = re.search(r"^steps (\d+)\u2013(\d+) \((\d+) steps: whole steps after the first", out, re.M)
    run_bub = [float(x) for x in re.findall(r"^\s+\d+\s+([\d.]+)%\s+[\d.]+%\s+\S+$", out, re.M)]
    run_plan = re.findall(r"^\s+\d+\s+[\d.]+%\s+([\d.]+%)\s+\S+$", out, re.M)
    run_med = re.search(r"^median step ([\d.]+) ms", out, re.M)

    info = cli("info", trace)
    steps, med, bub, mean = info_numbers(info)
    ok(steps == (4, 19, 16), "info analyses steps 4..19, 16 steps (%s)" % (steps,))
    ok(run_steps is not None and (int(run_steps.group(1)), int(run_steps.group(2))) == (4, 19),
       "run analyses the same steps")
    ok(len(bub) == 2 and run_bub == bub, "run's bubble a step per rank is info's (%s, %s)" % (run_bub, bub))
    info_plan = re.search(r"^bubble, plan at measured costs \(the last plan of each rank, one step [\d.]+ ms\): "
                          r"rank 0 ([\d.]+%), rank 1 ([\d.]+%)$", info, re.M)
    ok(re.search(r"^rank  measured bubble a step  plan at measured costs  closed form \(F=1, B=2\)$", out, re.M)
       is not None, "run names its three bubbles as every view does")
    ok(info_plan is not None and run_plan == list(info_plan.groups()),
       "run's plan at measured costs is info's (the plan it served live is the one it saved) (%s, %s)"
       % (run_plan, info_plan and info_plan.groups()))
    ok(run_med is not None and med is not None and run_med.group(1) == med,
       "run's median step is info's (%s, %s)" % (run_med and run_med.group(1), med))
    ok(re.search(r"^idle by cause \(a step, the mean over the 16 steps analysed", info, re.M) is not None,
       "info's idle by cause counts the same 16 steps")
    run_rows, run_parts = why_lines(out)
    info_rows, info_parts = why_lines(info)
    ok(len(run_parts) == 2 and all("descheduled" in p for p in run_parts),
       "run prints runtime's parts of both ranks, descheduled measured (%s)" % run_parts)
    ok(run_parts == info_parts, "run's runtime parts are info's on its trace (%s; info %s)" % (run_parts, info_parts))
    ok(len(run_rows) == 2 and run_rows == info_rows, "run's idle by cause is info's (%s; info %s)" % (run_rows, info_rows))
    bare = cli("run", "-s", "ZBV", "-p", "2", "-m", "4", "--steps", "4", "--backend", "cpu", "--no-live")
    ok(not why_lines(bare)[1] and len(re.findall(r"^runtime by part: not printed: .*--trace FILE", bare, re.M)) == 1,
       "run without a trace says in one line why no parts are printed")

    why = json.loads(cli("export", "--format", "why", trace, "-o", "-"))
    a = why.get("analysis", {})
    ok(a.get("steps") == list(range(4, 20)), "export --format why: the analysis's steps")
    ok([s["step"] for s in why.get("steps", [])] == list(range(4, 20)), "the why report's steps are the analysis's")
    ok(abs(why.get("step_length", 0) - a.get("median_step", -1)) < 1e-9, "the why report's step is the median step")
    ok(med is not None and "%.3f" % (a.get("median_step", 0) * 1e3) == med, "why JSON's median step is info's")
    ok([round(100 * b, 1) for b in a.get("bubble", [])] == bub, "why JSON's bubbles are info's")

    sug = cli("suggest", trace, "--top", "1000")
    row = measured_row(sug)
    ok(row is not None and row[0] == "ZBV", "suggest marks the measured ZBV row")
    ok(row is not None and row[1] == med and row[2] == mean,
       "suggest's measured row shows the measured median step and bubble (%s; info %s, %s)" % (row, med, mean))
    ok("peak activations (micro-batches)" in sug and "(mb)" not in sug, "suggest's memory column is in micro-batches")
    # the ranking's column is not "rank": beside a pipeline's ranks, "rank 4" reads as a GPU
    ok(re.search(r"^ +#  schedule ", sug, re.M) is not None and re.search(r"^rank  schedule", sug, re.M) is None,
       "suggest numbers its rows with '#', not 'rank'")

    # a PyTorch job: only what torch.distributed.pipelining runs
    kt = os.path.join(tmp, "kzbv.pstrace")
    cli("import", os.path.join(DATA, "kineto", "zbv", "rank0.json.gz"),
        os.path.join(DATA, "kineto", "zbv", "rank1.json.gz"), "-o", kt)
    sug = cli("suggest", kt, "--top", "1000")
    names = re.findall(r"^\s*\d+\s+(\S+)\s+\d+\s+\d+\s+[\d.]+", sug, re.M)
    ok(len(names) > 3 and "DualPipe" not in names, "suggest on a PyTorch trace offers no DualPipe (%d rows)" % len(names))
    steps, med, bub, mean = info_numbers(cli("info", kt))
    row = measured_row(sug)
    ok(row is not None and med is not None and row[1] == med and row[2] == mean,
       "PyTorch trace: the measured row is info's median step and bubble (%s; info %s, %s)" % (row, med, mean))

    # issue 36: a PP 2 x DP 2 job whose median copy is not dp 0 (dp 0's last
    # stage twice as slow): info, export --format why and render's header
    # carry the median copy's step and bubbles, and one plan
    synth = os.environ.get("PP_SYNTH_MESH")
    ok(synth is not None, "PP_SYNTH_MESH names pp-synth-mesh (meson sets it)")
    base = os.path.join(tmp, "mesh")
    subprocess.run([synth, base, "2", "2", "4", "6", "1f1b", "--comm", "--slow-stage", "0"], check=True)
    mt = os.path.join(tmp, "mesh.pptrace")
    mg = subprocess.run([CLI, "merge", "-o", mt, *["%s.rank%d" % (base, g) for g in range(4)]],
                        capture_output=True, text=True, timeout=120)
    info = cli("info", mt)
    # the plan at measured costs: the median copy's costs (dp 1's: 15.4 ms
    # planned; dp 0's slow stage would plan 27.2), one step in every line
    planned = re.search(r"^planned 1F1B with the costs it measured: ([\d.]+) ms a step", mg.stderr, re.M)
    ip_step = re.search(r"^bubble, plan at measured costs \(the last plan of each rank, one step ([\d.]+) ms\)",
                        info, re.M)
    ok(planned is not None and ip_step is not None and planned.group(1) == ip_step.group(1) == "15.400",
       "mesh: merge's planned step is info's, timed with the median copy's costs (%s, %s)"
       % (planned and planned.group(1), ip_step and ip_step.group(1)))
    steps, med, bub, mean = info_numbers(info)
    ok(med == "15.000", "mesh: info's median step is the median copy's, dp 1's 15 ms, not dp 0's 27 (%s)" % med)
    ok(re.search(r"the path and the steps are copy 1's", info) is not None, "mesh: the why analysis's median copy is dp 1")
    why = json.loads(cli("export", "--format", "why", mt, "-o", "-"))
    a = why.get("analysis", {})
    ok(med is not None and "%.3f" % (a.get("median_step", 0) * 1e3) == med, "mesh: why JSON's median step is info's")
    ok(abs(why.get("step_length", 0) - a.get("median_step", -1)) < 1e-9,
       "mesh: the why report's step is the analysis's median step (%s, %s)" % (why.get("step_length"), a.get("median_step")))
    ok([round(100 * b, 1) for b in a.get("bubble", [])] == bub, "mesh: why JSON's bubbles are info's")
    svg = os.path.join(tmp, "mesh.svg")
    cli("render", mt, "-o", svg)
    head = open(svg).read()
    hb = re.search(r"measured bubble a step ([\d.]+)% \(median of (\d+) steps\)", head)
    ok(hb is not None and float(hb.group(1)) == mean and int(hb.group(2)) == steps[2],
       "mesh: render's header has info's mean bubble and steps (%s; info %s)" % (hb and hb.groups(), mean))
    ip = re.search(r"^bubble, plan at measured costs \(the last plan of each rank, one step [\d.]+ ms\): "
                   r"rank 0 ([\d.]+)%, rank 1 ([\d.]+)%$", info, re.M)
    hp = re.search(r"bubble, plan at measured costs ([\d.]+)%", head)
    ok(ip is not None and hp is not None
       and abs(float(hp.group(1)) - (float(ip.group(1)) + float(ip.group(2))) / 2) <= 0.051,
       "mesh: render's plan bubble is the mean of info's (%s; info %s)" % (hp and hp.group(1), ip and ip.groups()))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("1..%d" % n_test)
