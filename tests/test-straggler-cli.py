#!/usr/bin/env python3
"""test-straggler-cli.py CLI SYNTH — stragglers across the mesh (issue 38) in
the CLI, on pp-synth-mesh's jobs (written from a simulation: nothing timed on
this machine is asserted).

  1. a 4 x 3 job of 1F1B whose process at pp 3, dp 1 runs its blocks twice
     as long (--slow-stage 1): export --format why's `stragglers` lists
     every process, ordered by saving, that process first with a saving
     (and +100 % slower, cause "slower compute"), every other 0; its host
     next in `straggler_groups`; info's straggler table names it first with
     the same saving;
  2. the same job with nobody slow: nothing saves, info says none;
  3. a job of one replica: info prints no straggler table, `stragglers` is
     empty, render --heatmap refuses in one line (exit 1);
  4. render --heatmap writes PNG, SVG and PDF (--steps too), and refuses a
     range with no analysed step, and --from with --heatmap, in one line,
     exit 2, nothing written.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pp_tap import fail, ok  # noqa: E402

CLI, SYNTH = sys.argv[1], sys.argv[2]


def run(*args, check=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        fail(f"{' '.join(map(str, args))}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def job(tmp, name, P, D, *extra):
    base = os.path.join(tmp, name)
    run(SYNTH, base, P, D, 8, 4, "1f1b", *extra)
    files = sorted(os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith(name + ".rank"))
    if len(files) != P * D:
        fail(f"{name}: {len(files)} files, not {P * D}")
    out = base + ".pptrace"
    run(CLI, "merge", "-o", out, *files)
    return out


def why(trace):
    return json.loads(run(CLI, "export", trace, "--format", "why", "-o", "-").stdout)


def table(info):
    """info's straggler table rows (after its header line)."""
    lines = info.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("stragglers (")]
    if len(at) != 1:
        return None
    rows = []
    for line in lines[at[0] + 2:]:
        if not line.startswith("  "):
            break
        rows.append(line.split())
    return rows


with tempfile.TemporaryDirectory() as tmp:
    # 1. one slow process
    slow = job(tmp, "slow", 4, 3, "--slow-stage", "1")
    w = why(slow)
    st = w.get("stragglers")
    if not isinstance(st, list) or len(st) != 12:
        fail(f"stragglers: {st!r}")
    savings = [s["saving_s"] for s in st]
    if savings != sorted(savings, reverse=True):
        fail(f"stragglers not ordered by saving: {savings}")
    first = st[0]
    if (first["pp"], first["dp"], first["tp"], first["process"]) != (3, 1, 0, 3 * 3 + 1):
        fail(f"first straggler {first}")
    if not first["saving_s"] > 0 or first["cause"] != "slower compute" or abs(first["slowdown"] - 1) > 1e-6:
        fail(f"first straggler {first}")
    if any(s["saving_s"] != 0 for s in st[1:]):
        fail(f"other processes save: {st[1:]}")
    if set(first) < {"process", "pp", "dp", "tp", "host", "saving_s", "cause"}:
        fail(f"item members {sorted(first)}")
    ok("export why: the slow process first of 12, by saving, +100 %, slower compute; no other saves")
    g = w.get("straggler_groups")
    if not g or g[0]["group"] != "host" or g[0]["host"] != first["host"] or g[0]["saving_s"] != first["saving_s"]:
        fail(f"straggler_groups {g}")
    ok("its host saves as much, first of the groups")
    info = run(CLI, "info", slow).stdout
    rows = table(info)
    if not rows or rows[0][0] != "process" or rows[1][0] != str(first["process"]):
        fail(f"info's straggler table: {rows}\n{info}")
    if rows[1][1:7] != ["pp", "3", "dp", "1", "tp", "0"] or float(rows[1][9]) != round(first["saving_s"] * 1e3, 3):
        fail(f"info's first row {rows[1]} against {first}")
    ok("info names it first with the export's saving")

    # 2. nobody slow
    even = job(tmp, "even", 4, 3)
    w = why(even)
    if len(w["stragglers"]) != 12 or any(s["saving_s"] != 0 for s in w["stragglers"]):
        fail(f"an even job's stragglers {w['stragglers']}")
    rows = table(run(CLI, "info", even).stdout)
    if rows is None or rows[0][0] != "none:":
        fail(f"info of an even job: {rows}")
    ok("an even job: nothing saves, info says none")

    # 3. one replica
    one = job(tmp, "one", 4, 1)
    info = run(CLI, "info", one).stdout
    if "stragglers" in info:
        fail("info of one replica prints a straggler table")
    if why(one)["stragglers"] != []:
        fail("one replica's stragglers not empty")
    p = run(CLI, "render", one, "--heatmap", "-o", os.path.join(tmp, "one.png"), check=False)
    if p.returncode != 1 or len(p.stderr.strip().splitlines()) != 1 or os.path.exists(os.path.join(tmp, "one.png")):
        fail(f"render --heatmap of one replica: exit {p.returncode}: {p.stderr!r}")
    ok("one replica: no table, an empty list, render --heatmap refuses in one line")

    # 4. render --heatmap
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}
    for ext, head in magic.items():
        out = os.path.join(tmp, "heat." + ext)
        run(CLI, "render", slow, "--heatmap", "-o", out)
        with open(out, "rb") as f:
            if not f.read(8).startswith(head):
                fail(f"{out} is no {ext}")
    out = os.path.join(tmp, "step.png")
    run(CLI, "render", slow, "--heatmap", "--steps", "2-3", "-o", out)
    ok("render --heatmap writes PNG, SVG and PDF, and a --steps range")
    for bad in (["--steps", "40-50"], ["--from", "1ms"]):
        out = os.path.join(tmp, "bad.png")
        p = run(CLI, "render", slow, "--heatmap", *bad, "-o", out, check=False)
        if p.returncode != 2 or len(p.stderr.strip().splitlines()) != 1 or os.path.exists(out):
            fail(f"render --heatmap {bad}: exit {p.returncode}: {p.stderr!r}")
    ok("a range with no analysed step and --from refused in one line, exit 2, nothing written")
print("1..7")
