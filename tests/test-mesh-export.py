#!/usr/bin/env python3
"""test-mesh-export.py CLI SYNTH — a mesh job's exports and views (issue 36,
items 5 and 8): pp-synth-mesh (tests/pp-synth-mesh.c) writes the job.

  1. suggest runs on a job of replicas with one copy's costs: a 2 x 2
     job's measured costs and ranking are those of the same job with one
     replica (they ran the same blocks); a single process's trace names
     itself in its errors, never a copy in memory;
  2. every exported time counts from the run's start: a replica that began
     before the process that described the job (--early) starts at 0 in
     the CSV and the Chrome export, nothing negative, and the CSV, Chrome
     and info's span of the run give every span the same time;
  3. export --clock realtime writes the job's own wall clock (µs since the
     epoch in Chrome, ns in the CSV: the description's start_unix_ns at its
     start_monotonic_ns), says so as torch's traces do (baseTimeNanoseconds
     0), and each process's real pid as its track, the same for processes
     on two hosts once their clock offsets are applied; a pid two tracks
     share is said and kept apart; a trace without a wall clock is refused
     in one line;
  4. info summarises a job of more than 16 processes in one line with its
     hosts, and their collectives in one line of the least and largest;
     --processes lists both a process a line;
  5. export --steps, --ranks, --replicas keep exactly the selected
     processes' spans (CSV and Chrome), their transfers' arrows within
     them, and refuse bad lists in one line, exit 2;
  6. --help of export and info lists the new options.
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
sys.path.insert(0, HERE)
from pp_tap import fail, ok  # noqa: E402

WALL = 1700000000123456789   # ns since the epoch at the description's start


def cli_run(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=120)


def job(cli, tool, tmp, name, p, d, m, steps, *extra):
    base = os.path.join(tmp, name)
    r = subprocess.run([tool, base, str(p), str(d), str(m), str(steps), "1f1b", *extra],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"pp-synth-mesh {name}: {r.stderr.strip()}")
    files = [f"{base}.rank{g}" for g in range(p * d)]
    out = base + ".pptrace"
    r = cli_run(cli, "merge", "-o", out, *files)
    if r.returncode != 0:
        fail(f"merge {name}: {r.stderr.strip()}")
    return out, files


def csv_rows(cli, trace, *args):
    r = cli_run(cli, "export", trace, "--format", "csv", "-o", "-", *args)
    if r.returncode != 0:
        fail(f"export csv {' '.join(args)}: {r.stderr.strip()}")
    return list(csv.DictReader(r.stdout.splitlines()))


def chrome(cli, trace, tmp, *args):
    out = os.path.join(tmp, "x.json")
    r = cli_run(cli, "export", trace, "--format", "chrome", "-o", out, *args)
    if r.returncode != 0:
        fail(f"export chrome {' '.join(args)}: {r.stderr.strip()}")
    return json.load(open(out))["traceEvents"]


def spans_of_chrome(ev):
    """(pid, kind, step, rank, stage, microbatch) of every span event."""
    return collections.Counter((e["pid"], e["args"]["kind"], e["args"]["step"], e["args"]["rank"],
                                e["args"]["stage"], e["args"]["microbatch"])
                               for e in ev if e.get("ph") == "X" and e.get("cat") not in ("plan", "step"))


def costs_and_ranking(text):
    """suggest's measured costs and its ranked rows (the numbers of both)."""
    lines = text.splitlines()
    costs = [x.strip() for x in lines if x.strip().startswith(("rank ", "transfer:"))]
    rows = [x.split() for x in lines if x.strip()[:1].isdigit()]
    return costs, rows


def main():
    cli, tool = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pp-mesh-export-")
    try:
        print("1..6")
        # 1. suggest on replicas
        mesh, files = job(cli, tool, tmp, "mesh", 2, 2, 4, 3, "--comm")
        one, _ = job(cli, tool, tmp, "one", 2, 1, 4, 3, "--comm")
        r2, r1 = cli_run(cli, "suggest", mesh), cli_run(cli, "suggest", one)
        if r2.returncode != 0 or r1.returncode != 0:
            fail(f"suggest: the 2 x 2 job exit {r2.returncode}: {r2.stderr.strip()}; "
                 f"the 2 x 1 job exit {r1.returncode}: {r1.stderr.strip()}")
        c2, c1 = costs_and_ranking(r2.stdout), costs_and_ranking(r1.stdout)
        if not c2[0] or not c2[1] or c2 != c1:
            fail(f"suggest on 2 x 2 is not one copy's costs:\n{r2.stdout}\nagainst 2 x 1:\n{r1.stdout}")
        r = cli_run(cli, "suggest", files[0])   # rank 0's process alone: rank 1 has no blocks
        if r.returncode == 0 or "/proc/" in r.stderr or files[0] not in r.stderr:
            fail(f"suggest on one process's file: exit {r.returncode}: {r.stderr.strip()}")
        ok("suggest on a 2 x 2 job: one copy's costs and ranking (those of 2 x 1); one process's file named "
           "in its error")

        # 2. the run's start: replica dp 1 began 0.99 ms before the description
        early, _ = job(cli, tool, tmp, "early", 2, 2, 4, 2, "--comm", "--early", "1", "--wall", str(WALL))
        rows = csv_rows(cli, early)
        starts = [int(x["start_ns"]) for x in rows]
        first = [x for x in rows if int(x["start_ns"]) == 0]
        if min(starts) != 0 or min(int(x["end_ns"]) for x in rows) < 0 or not first \
                or any(x["dp"] != "1" for x in first):
            fail(f"the CSV's zero is not the earliest span (replica dp 1's): min start {min(starts)}, "
                 f"spans at 0: {first}")
        ev = chrome(cli, early, tmp)
        run_top = json.load(open(os.path.join(tmp, "x.json")))
        ts = [e["ts"] for e in ev if "ts" in e]
        csv_at = {(x["process"], x["kind"], x["step"], x["microbatch"]): int(x["start_ns"]) for x in rows}
        ch_at = {(str(e["args"]["process"]), e["args"]["kind"], str(e["args"]["step"]),
                  str(e["args"]["microbatch"])): round(e["ts"] * 1000)
                 for e in ev if e.get("ph") == "X" and "process" in e.get("args", {})}
        if min(ts) < 0 or csv_at != ch_at:
            fail(f"Chrome's times against the CSV's: min ts {min(ts)}, "
                 f"{len(set(csv_at.items()) ^ set(ch_at.items()))} spans differ")
        # info's span of the run is the shown replica's (dp 0), on the same clock
        shown = min(int(x["start_ns"]) for x in rows if x["dp"] == "0")
        r = cli_run(cli, "info", early)
        if r.returncode != 0 or f"idle over the whole trace (between {shown / 1e6:.3f} ms and " not in r.stdout:
            fail(f"info's times do not count from the run's start (dp 0 starts at {shown} ns):\n{r.stdout}")
        ok("the run's start is the earliest span of any process: 0 in the CSV and Chrome, nothing negative, "
           "the same times in the CSV, Chrome and info")

        # 3. --clock realtime
        real = csv_rows(cli, early, "--clock", "realtime")
        earliest_mono = 10000   # replica dp 1's first block (dp x 10 us), on the spans' clock
        shift = WALL - 1000000 + earliest_mono   # the description's pair: start_monotonic_ns 1 ms
        if len(real) != len(rows) or any(int(a["start_ns"]) - int(b["start_ns"]) != shift
                                         or int(a["end_ns"]) - int(b["end_ns"]) != shift
                                         for a, b in zip(real, rows)):
            fail("the realtime CSV is not the run's times plus the wall clock at the run's start")
        rev = chrome(cli, early, tmp, "--clock", "realtime")
        top = json.load(open(os.path.join(tmp, "x.json")))
        if top.get("baseTimeNanoseconds") != 0 or "baseTimeNanoseconds" in run_top:
            fail(f"Chrome's baseTimeNanoseconds: realtime {top.get('baseTimeNanoseconds')}, "
                 f"run {run_top.get('baseTimeNanoseconds')}")
        spans = [e for e in rev if e.get("ph") == "X" and "process" in e.get("args", {})]
        pids = {e["args"]["process"]: e["pid"] for e in spans}
        names = {e["pid"] for e in rev if e.get("name") == "process_name"}
        rts = {(str(e["args"]["process"]), e["args"]["kind"], str(e["args"]["step"]),
                str(e["args"]["microbatch"])): e["ts"] for e in spans}
        if pids != {g: 1000 + g for g in range(4)} or not set(pids.values()) <= names:
            fail(f"realtime Chrome tracks are not the real pids: {pids}")
        # µs since the epoch (a double holds them to the µs)
        if any(abs(rts[k] - (csv_at[k] + shift) / 1000) > 1 for k in csv_at):
            fail("realtime Chrome ts are not µs since the epoch")
        r = cli_run(cli, "export", mesh, "--format", "chrome", "--clock", "realtime", "-o",
                    os.path.join(tmp, "no.json"))
        if r.returncode == 0 or "wall-clock" not in r.stderr or len(r.stderr.strip().splitlines()) != 1 \
                or os.path.exists(os.path.join(tmp, "no.json")):
            fail(f"--clock realtime on a trace without a wall clock: exit {r.returncode}: {r.stderr}")
        # replicas on two hosts (odd dp's clock 5 s ahead, brought back by its CLOCK_OFFSET): the same wall clock
        same, _ = job(cli, tool, tmp, "same", 2, 2, 4, 2, "--comm", "--wall", str(WALL))
        skewed, _ = job(cli, tool, tmp, "skewed", 2, 2, 4, 2, "--comm", "--wall", str(WALL), "--offsets")
        a, b = csv_rows(cli, same, "--clock", "realtime"), csv_rows(cli, skewed, "--clock", "realtime")
        if not a or a != b:
            fail("the realtime CSV of a job on two hosts is not the one of the same job on one")
        # ranks as threads of one process (run): one pid for two tracks, which keep their own numbers
        threads = os.path.join(tmp, "threads.pptrace")
        r = cli_run(cli, "run", "-s", "1F1B", "-p", "2", "-m", "2", "--layers", "2", "--width", "16", "--batch", "8",
                    "--steps", "1", "--no-live", "--trace", threads)
        if r.returncode != 0:
            fail(f"run: {r.stderr.strip()}")
        out = os.path.join(tmp, "threads.json")
        r = cli_run(cli, "export", threads, "--format", "chrome", "--clock", "realtime", "-o", out)
        tpids = {e["pid"] for e in json.load(open(out))["traceEvents"] if e.get("name") == "process_name"}
        if r.returncode != 0 or "2 tracks share a pid" not in r.stderr or len(tpids) != 2 \
                or min(tpids) < 1 << 22:
            fail(f"realtime export of ranks in one process: exit {r.returncode}, tracks {tpids}: {r.stderr}")
        ok("--clock realtime: the wall clock (ns in CSV, µs in Chrome) and real pids, a shared pid said and "
           "kept apart; refused in one line without a wall clock")

        # 4. info past 16 processes
        wide, _ = job(cli, tool, tmp, "wide", 2, 16, 2, 1, "--collectives")
        r = cli_run(cli, "info", wide)
        lines = r.stdout.splitlines()
        procs = [x for x in lines if x.startswith(("process ", "  process "))]
        # process G counts 10 + G calls and G + 1 MiB in its one step
        coll = "  32 processes (info --processes lists each): calls a step 10.0 (process 0) to 41.0 (process 31); " \
               "bytes a step 1.000 MiB (process 0) to 32.000 MiB (process 31)"
        if r.returncode != 0 or "processes: 32 (pp 2 \u00d7 dp 16 \u00d7 tp 1) on 4 hosts" not in lines or procs \
                or coll not in lines:
            fail(f"info of 32 processes: exit {r.returncode}:\n{r.stdout}")
        r = cli_run(cli, "info", wide, "--processes")
        procs = [x for x in r.stdout.splitlines() if x.startswith("process ")]
        colls = [x for x in r.stdout.splitlines() if x.startswith("  process ")]
        if r.returncode != 0 or len(procs) != 32 or procs[5] != "process 5: pp 0 dp 5 tp 0 host node0 pid 1005" \
                or len(colls) != 32:
            fail(f"info --processes: exit {r.returncode}: {procs} {colls}")
        ok("info: 32 processes and their collectives each in one line; --processes lists the 32 of both")

        # 5. --steps, --ranks, --replicas
        sel, _ = job(cli, tool, tmp, "sel", 2, 4, 4, 3, "--comm")
        every = csv_rows(cli, sel)
        want = [x for x in every if x["step"] in ("1", "2") and x["rank"] == "1" and x["dp"] in ("0", "2")]
        got = csv_rows(cli, sel, "--steps", "1-2", "--ranks", "1", "--replicas", "0,2")
        if not want or got != want:
            fail(f"the filtered CSV: {len(got)} rows, {len(want)} selected")
        for args, keep in ((["--steps", "1"], lambda k: k[2] == 1),
                           (["--ranks", "0", "--replicas", "3"], lambda k: k[3] == 0 and k[0] % 4 == 3)):
            allv, part = chrome(cli, sel, tmp), chrome(cli, sel, tmp, *args)
            a, b = spans_of_chrome(allv), spans_of_chrome(part)
            want_c = collections.Counter({k: n for k, n in a.items() if keep(k)})
            tracks = {e["pid"] for e in part if e.get("ph") == "X" and e.get("cat") != "plan"}
            arrows = collections.Counter(e["id"] for e in part if e.get("ph") in ("s", "f"))
            at = {(e["id"], e["ph"]): e["pid"] for e in part if e.get("ph") in ("s", "f")}
            if not b or b != want_c or any(n != 2 for n in arrows.values()) \
                    or any(p not in tracks for p in at.values()):
                fail(f"the filtered Chrome export {args}: {sum(b.values())} spans, {sum(want_c.values())} "
                     f"selected; arrows {len(arrows)}, every one with both ends kept: "
                     f"{all(n == 2 for n in arrows.values())}")
        for args, says in ((["--steps", "x"], "--steps takes whole numbers"),
                           (["--steps", "3-1"], "runs backwards"),
                           (["--steps", "1,"], "--steps takes whole numbers"),
                           (["--steps", "7"], "--steps selects none of the trace's steps 0 to 2"),
                           (["--replicas", "4-9"], "--replicas selects none of the trace's replicas dp 0 to 3"),
                           (["--ranks", "-1"], "--ranks takes whole numbers"),
                           (["--format", "why", "--steps", "1"], "why analyses the whole trace"),
                           (["--clock", "utc"], "--clock takes run or realtime, not 'utc'"),
                           (["--format", "why", "--clock", "realtime"], "why holds durations")):
            out = os.path.join(tmp, "bad.out")
            r = cli_run(cli, "export", sel, "-o", out, *args)
            if r.returncode != 2 or says not in r.stderr or len(r.stderr.strip().splitlines()) != 1 \
                    or os.path.exists(out):
                fail(f"export {args}: exit {r.returncode}: {r.stderr.strip()}")
        ok("--steps, --ranks, --replicas: exactly the selected spans in CSV and Chrome, arrows within them; "
           "bad lists refused in one line, exit 2")

        # 6. --help
        r, i = cli_run(cli, "export", "--help"), cli_run(cli, "info", "--help")
        missing = [o for o in ("--steps", "--ranks", "--replicas", "--clock") if o not in r.stdout] \
            + [o for o in ("--processes",) if o not in i.stdout]
        if r.returncode != 0 or i.returncode != 0 or missing:
            fail(f"--help does not list {missing}")
        ok("export --help and info --help list the new options")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
