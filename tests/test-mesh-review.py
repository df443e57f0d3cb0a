#!/usr/bin/env python3
"""test-mesh-review.py CLI SYNTH — a new user's review of jobs with replicas
(issue 27), on pp-synth-mesh's per-process files (tests/pp-synth-mesh.c):

  1. the Chrome export of a 2 x 2 job with transfers and losses is one
     Perfetto reads: every event's pid named by a process_name, every
     (pid, tid) by a thread_name, no named track without events, every ts
     >= 0; a track per process named by its place, each with its own steps
     and (on the last pipeline rank) its own losses; every transfer arrow
     from a send to the receive of the same replica, every replica's there;
     the plan once per pipeline rank on a track of its own;
  2. processes whose place the hook could not read (PROCESS frames flagged
     "place not read", two of each pipeline rank) merge, numbered as
     replicas in order of global rank, and info, the CSV and the Chrome
     export say the place was not read;
  3. the why analysis of a 2 x 2 job is per pipeline rank over the
     replicas, each replica's pipeline on its own (info says so, export
     --format why has "replicas"), and its idle is that of the same job
     with one replica;
  4. replicas on two hosts with two clock offsets: a CLOCK_OFFSET a
     process wrote holds for that process alone, so the merged trace's
     times (CSV, Chrome, info) are those of the job without offsets.
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
sys.path.insert(0, HERE)
from pp_tap import fail, ok, spans_of  # noqa: E402


def run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"{what}: exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
    return r


def job(cli, tool, tmp, name, p, d, *extra):
    base = os.path.join(tmp, name)
    run([tool, base, str(p), str(d), "4", "2", "1f1b", *extra], f"pp-synth-mesh {name}")
    out = base + ".pptrace"
    r = run([cli, "merge", "-o", out] + [f"{base}.rank{g}" for g in range(p * d)], f"merge of {name}")
    return out, r


def chrome(cli, trace):
    out = trace + ".json"
    run([cli, "export", trace, "--format", "chrome", "-o", out], "export chrome")
    return json.load(open(out))["traceEvents"]


def check_perfetto(ev):
    """Trace-event rules Perfetto's importer relies on; the named tracks."""
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    used_pid, used_thread = set(), set()
    for e in ev:
        if "ph" not in e or "pid" not in e:
            fail(f"an event without ph or pid: {e}")
        if e["ph"] == "M":
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            fail(f"an event with ts {e.get('ts')}: {e}")
        if e["ph"] == "X" and (e.get("dur", -1) < 0 or "tid" not in e):
            fail(f"a slice without tid or with dur < 0: {e}")
        used_pid.add(e["pid"])
        if "tid" in e:
            used_thread.add((e["pid"], e["tid"]))
    if used_pid - set(procs):
        fail(f"events on tracks with no process_name: {sorted(used_pid - set(procs))}")
    if used_thread - set(threads):
        fail(f"events on rows with no thread_name: {sorted(used_thread - set(threads))}")
    if set(procs) - used_pid or set(threads) - used_thread:
        fail(f"named tracks without events: {sorted(set(procs) - used_pid)} {sorted(set(threads) - used_thread)}")
    return procs, threads


def place_of(name):
    m = re.match(r"pp (\d+) · dp (\d+) · tp (\d+) \(process (\d+)", name)
    return tuple(int(x) for x in m.groups()) if m else None


def main():
    cli, tool = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pp-mesh-review-")
    try:
        print("1..4")
        # 1. the Chrome export of every process
        trace, _ = job(cli, tool, tmp, "comm", 2, 2, "--comm")
        ev = chrome(cli, trace)
        procs, threads = check_perfetto(ev)
        places = {pid: place_of(n) for pid, n in procs.items() if place_of(n)}
        if sorted(places) != [0, 1, 2, 3] or any(places[g][3] != g for g in places):
            fail(f"the process tracks: {procs}")
        plans = {pid: n for pid, n in procs.items() if n.startswith("plan")}
        if sorted(plans.values()) != [f"plan \u00b7 pp {r} (pipeline rank {r}, every replica)" for r in (0, 1)]:
            fail(f"the plan tracks: {plans} (all tracks {procs})")
        if any(threads.get((g, 4)) for g in places):
            fail("a process track has a plan row: the plan is the pipeline's")
        steps = collections.Counter(e["pid"] for e in ev if e.get("cat") == "step")
        if steps != {g: 2 for g in range(4)}:
            fail(f"step slices by track: {dict(steps)}")
        loss = collections.defaultdict(list)
        for e in ev:
            if e["ph"] == "C" and e["name"] == "loss":
                loss[e["pid"]].append(e["args"]["loss"])
        want = {g: [1 + places[g][1] / 100, 0.5 + places[g][1] / 100] for g in places if places[g][0] == 1}
        if {g: [round(x, 6) for x in v] for g, v in loss.items()} != want:
            fail(f"losses by track: {dict(loss)}, want {want}")
        flows = collections.defaultdict(dict)
        for e in ev:
            if e.get("cat") == "flow":
                flows[e["id"]][e["ph"]] = e
        pairs = collections.Counter()
        for i, se in flows.items():
            if set(se) != {"s", "f"} or se["s"]["name"] != se["f"]["name"]:
                fail(f"flow {i} is not one start and one end: {se}")
            a, b = places[se["s"]["pid"]], places[se["f"]["pid"]]
            if a[1:3] != b[1:3] or a[0] == b[0]:
                fail(f"a transfer from {a} to {b}: not within one replica")
            pairs[(se["s"]["name"], a[1])] += 1
        if pairs != {(n, dp): 8 for n in ("activation", "gradient") for dp in (0, 1)}:
            fail(f"transfer arrows by kind and replica: {dict(pairs)}")
        ok("Chrome: well-formed, a track per process with its steps and losses, transfers within each "
           "replica (every replica's), the plan once per pipeline rank")

        # 2. processes the hook could not place
        trace, r = job(cli, tool, tmp, "unplaced", 2, 2, "--unplaced")
        if "4 processes" not in r.stdout or "could not read" not in r.stdout:
            fail(f"merge of unplaced processes said: {r.stdout}")
        info = run([cli, "info", trace], "info").stdout
        lines = [x for x in info.splitlines() if x.startswith("process ")]
        if len(lines) != 4 or not all("place not read" in x for x in lines):
            fail(f"info's process lines:\n{info}")
        # numbered by global rank: G = (D - 1 - dp) * P + pp, so process 0 is dp 0
        for g, dp in ((0, 0), (1, 0), (2, 1), (3, 1)):
            if not any(x.startswith(f"process {g}: pp {g % 2} dp {dp} tp 0") for x in lines):
                fail(f"process {g} is not numbered dp {dp}:\n{info}")
        if "the place of 4 not read" not in info or "place not read from the job" not in info:
            fail(f"info's processes line or note does not say the places were not read:\n{info}")
        rows = spans_of(cli, trace, tmp)
        by = collections.Counter((x["process"], x["dp"]) for x in rows)
        if by != {("0", "0"): 16, ("1", "0"): 16, ("2", "1"): 16, ("3", "1"): 16}:
            fail(f"the CSV's process, dp: {dict(by)}")
        procs, _ = check_perfetto(chrome(cli, trace))
        named = [n for n in procs.values() if n.startswith("pp ")]
        if len(named) != 4 or not all("place not read" in n for n in named):
            fail(f"the Chrome tracks of unplaced processes: {procs}")
        ok("unplaced processes: merged as replicas numbered by global rank; info, CSV and Chrome say so")

        # 3. the why analysis per pipeline rank over replicas
        one, _ = job(cli, tool, tmp, "one", 2, 1)
        mesh = os.path.join(tmp, "comm.pptrace")
        whys = {}
        for name, t in (("one", one), ("mesh", mesh)):
            out = os.path.join(tmp, name + ".why.json")
            run([cli, "export", t, "--format", "why", "-o", out], f"export why of {name}")
            whys[name] = json.load(open(out))
        rep = whys["mesh"].get("replicas")
        if not rep or rep["count"] != 2 or len(rep["per_rank"]) != 2 or "replicas" in whys["one"]:
            fail(f"why's replicas: mesh {rep}, one {whys['one'].get('replicas')}")
        if [round(x["idle"], 6) for x in whys["mesh"]["idle"]] != [round(x["idle"], 6) for x in whys["one"]["idle"]]:
            fail(f"why's idle of the 2 x 2 job {whys['mesh']['idle']} is not the one-replica job's "
                 f"{whys['one']['idle']}")
        info = run([cli, "info", mesh], "info").stdout
        if "over 2 copies of the pipeline (its replicas and tensor ranks" not in info:
            fail(f"info does not say its why is over the replicas:\n{info}")
        ok("why: per pipeline rank over 2 replicas, each on its own; its idle the one-replica job's")

        # 4. a clock offset per process
        plain = spans_of(cli, mesh, tmp)
        skewed, _ = job(cli, tool, tmp, "skewed", 2, 2, "--comm", "--offsets")
        got = spans_of(cli, skewed, tmp)
        key = lambda x: (x["process"], x["kind"], x["step"], x["microbatch"])  # noqa: E731
        a = {key(x): (x["start_ns"], x["end_ns"]) for x in plain}
        b = {key(x): (x["start_ns"], x["end_ns"]) for x in got}
        if a != b:
            bad = [k for k in a if a[k] != b.get(k)][:3]
            fail(f"times of replicas with their own clock offsets are not aligned: {[(k, a[k], b.get(k)) for k in bad]}")
        ev = chrome(cli, skewed)
        check_perfetto(ev)
        if max(e["ts"] for e in ev if "ts" in e) > 1e6:
            fail("the Chrome export of replicas on two clocks spans more than a second")
        ok("clock offsets per process: replicas on two hosts aligned, as without offsets")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
