#!/usr/bin/env python3
"""test-mesh-cli.py CLI SYNTH — a job is a mesh (issue 27): merge, info, exports.

A job whose pipeline ranks each run in several processes (data-parallel
replicas) writes one trace file per process, each with a PROCESS frame
(trace format 1.4); pp-synth-mesh (tests/pp-synth-mesh.c) writes such a
job, P pipeline ranks x D replicas.  This checks that merge

  1. joins the processes of a 2 x 2 and a 4 x 8 job, each process's frames
     kept and tagged with it (the frames it wrote before its PROCESS frame
     too), every span there, the plan timed with one replica's costs;
  2. refuses the same process twice (a copy of a file) and two processes
     claiming one place, in one line naming both files, exit 2, nothing
     written, the inputs kept;
  3. reads its inputs one after another: 80 files merge under ulimit -n 32;

and that of such a trace

  4. info says `processes: 4 (pp 2 × dp 2 × tp 1)` after `ranks: 2`, and a
     line per process with its place, host and pid;
  5. the CSV export's process, dp and tp columns say whose each span is
     (every process's spans there), empty for a trace without places;
  6. the Chrome export has a track per process named by its place, each
     process's spans on its own track;
  7. info lists the slowest replica of every step (a job whose replica dp 1
     runs 1.5 ms late: dp 1, 0.755 ms after the median of two, every step)
     and each rank's bubble over the replicas; render draws a row a
     pipeline rank folded, a row a process with --replicas all, a row a
     rank with --replicas 1 (the image's height says how many rows), and
     refuses a replica the job does not have in one line, exit 2;
  8. a 16 x 32 job of M = 32 (512 files; the 16 x 128 one is bench-fold's)
     merges, and info and render (folded and all) run within 1 GiB of
     address space (RLIMIT_AS): info names its straggler replica.
"""

import collections
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pp_tap import fail, ok, spans_of  # noqa: E402

FRAME_SPANS, FRAME_PROCESS = 3, 10


def frames(path):
    """(type, process tag) of every frame of a little-endian trace."""
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 16)[0]
    out = []
    while off + 8 <= len(data):
        size, kind, tag = struct.unpack_from("<IHH", data, off)
        if size < 8 or off + size > len(data):
            break
        out.append((kind, tag))
        off += size
    return out


def synth(tool, base, p, d, m, steps, sched, *extra):
    r = subprocess.run([tool, base, str(p), str(d), str(m), str(steps), sched, *extra],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"pp-synth-mesh {p} x {d}: {r.stderr.strip()}")
    return [f"{base}.rank{g}" for g in range(p * d)]


def merge(cli, out, inputs, preexec=None):
    return subprocess.run([cli, "merge", "-o", out, *inputs], capture_output=True, text=True,
                          timeout=300, preexec_fn=preexec)


def check_joined(cli, tmp, out, inputs, p, d, m, steps, sched):
    r = merge(cli, out, inputs)
    if r.returncode != 0:
        fail(f"merge of {p} x {d}: exit {r.returncode}: {r.stderr.strip()}")
    if f"{p * d} processes" not in r.stdout:
        fail(f"merge of {p} x {d} does not say {p * d} processes: {r.stdout.strip()}")
    # the plan timed with one replica's costs (every replica's would count each block twice)
    if "planned " + ("1F1B" if sched == "1f1b" else "GPipe") + " with the costs it measured" not in r.stderr:
        fail(f"merge of {p} x {d} left the plan untimed:\n{r.stderr}")
    fs = frames(out)
    n_proc = sum(1 for k, _ in fs if k == FRAME_PROCESS)
    if n_proc != p * d:
        fail(f"{n_proc} PROCESS frames in the merged {p} x {d} trace, not {p * d}")
    # the description and the timed plan are the job's; everything else a process's
    untagged = [k for k, tag in fs if tag == 0 and k not in (1, 2)]
    if untagged:
        fail(f"frames of the merged {p} x {d} trace without their process: types {sorted(set(untagged))}")
    tags = {tag for k, tag in fs if k == FRAME_SPANS}
    if tags != set(range(1, p * d + 1)):
        fail(f"the spans of the merged {p} x {d} trace come from processes {sorted(tags)}")
    rows = spans_of(cli, out, tmp)
    if len(rows) != p * d * steps * 2 * m:
        fail(f"{len(rows)} spans in the merged {p} x {d} trace, {p * d * steps * 2 * m} written")


def main():
    cli, tool = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pp-mesh-merge-")
    try:
        print("1..8")
        # 1. joined, every process kept and tagged
        small = synth(tool, os.path.join(tmp, "small"), 2, 2, 4, 2, "1f1b")
        check_joined(cli, tmp, os.path.join(tmp, "small.pptrace"), small, 2, 2, 4, 2, "1f1b")
        big = synth(tool, os.path.join(tmp, "big"), 4, 8, 6, 2, "gpipe")
        check_joined(cli, tmp, os.path.join(tmp, "big.pptrace"), big, 4, 8, 6, 2, "gpipe")
        ok("2 x 2 and 4 x 8: every process joined, its frames tagged, every span there, the plan timed")

        # 2. one process twice; two processes in one place
        copy = os.path.join(tmp, "copy-of-rank3")
        shutil.copyfile(small[3], copy)
        out = os.path.join(tmp, "refused.pptrace")
        for inputs, words in [(small + [copy], [small[3], copy, "process 3"]),
                              (synth(tool, os.path.join(tmp, "clash"), 2, 2, 4, 1, "1f1b", "--collide"),
                               ["clash.rank2", "clash.rank3", "pp 1 dp 0 tp 0"])]:
            before = {f: os.path.getsize(f) for f in inputs}
            r = merge(cli, out, inputs)
            lines = r.stderr.strip().splitlines()
            if r.returncode != 2 or len(lines) != 1 or not all(w in lines[0] for w in words):
                fail(f"merge of {words}: exit {r.returncode}, said:\n{r.stderr}")
            if os.path.exists(out) or {f: os.path.getsize(f) for f in inputs} != before:
                fail(f"a refused merge ({words[-1]}) wrote {out} or changed an input")
            left = [f for f in os.listdir(tmp) if f.startswith("refused") or f.startswith(".refused")]
            if left:
                fail(f"a refused merge left {left}")
        ok("the same process twice, two processes in one place: one line naming both, exit 2, nothing written")

        # 3. one input open at a time
        many = synth(tool, os.path.join(tmp, "many"), 2, 40, 2, 1, "1f1b")

        def few_files():
            resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
        r = merge(cli, os.path.join(tmp, "many.pptrace"), many, few_files)
        if r.returncode != 0 or "80 processes" not in r.stdout:
            fail(f"merge of 80 files under ulimit -n 32: exit {r.returncode}: {r.stderr.strip()}")
        ok("80 files merge under ulimit -n 32")

        # 4. info
        merged = os.path.join(tmp, "small.pptrace")
        r = subprocess.run([cli, "info", merged], capture_output=True, text=True, timeout=60)
        lines = r.stdout.splitlines()
        want = ["ranks: 2", "processes: 4 (pp 2 \u00d7 dp 2 \u00d7 tp 1)",
                "process 0: pp 0 dp 0 tp 0 host node0 pid 1000", "process 1: pp 0 dp 1 tp 0 host node0 pid 1001",
                "process 2: pp 1 dp 0 tp 0 host node0 pid 1002", "process 3: pp 1 dp 1 tp 0 host node0 pid 1003"]
        if r.returncode != 0 or "ranks: 2" not in lines or lines[lines.index("ranks: 2"):][:6] != want:
            fail(f"info of the 2 x 2 trace (exit {r.returncode}):\n{r.stdout}{r.stderr}")
        old = os.path.join(tmp, "old.pptrace")   # the same bytes as a 1.3 file: no places
        data = bytearray(open(small[0], "rb").read())
        data[14:16] = (3).to_bytes(2, "little")
        open(old, "wb").write(data)
        r = subprocess.run([cli, "info", old], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "process" in r.stdout.replace("processes", "").split("ranks:")[1]:
            fail(f"info of a trace without places says processes:\n{r.stdout}{r.stderr}")
        note = [x for x in lines if x.startswith("2 replicas a pipeline rank, folded in the timeline")]
        bubbles = [x.strip() for x in lines if x.strip().startswith("rank ") and "bubble:" in x]
        if len(note) != 1 or "32 of the 64 spans" not in note[0] or bubbles != ["rank 0 bubble: 20.0%",
                                                                                  "rank 1 bubble: 20.0%"]:
            fail("info's analysis is not one replica's, or does not say so:\n" + "\n".join(lines))
        ok("info: processes: 4 (pp 2 x dp 2 x tp 1), a line a process, the analysis one replica's and said; "
           "none without places")

        # 5. CSV
        rows = spans_of(cli, merged, tmp)
        by = collections.Counter((x["rank"], x["process"], x["dp"], x["tp"]) for x in rows)
        want = {("0", "0", "0", "0"): 16, ("0", "1", "1", "0"): 16, ("1", "2", "0", "0"): 16,
                ("1", "3", "1", "0"): 16}
        if by != want:
            fail(f"the CSV's rank, process, dp, tp: {dict(by)}")
        rows = spans_of(cli, old, tmp)
        if not rows or any((x["process"], x["dp"], x["tp"]) != ("", "", "") for x in rows):
            fail("the CSV of a trace without places fills process, dp or tp")
        ok("CSV: process, dp, tp of every span; empty without places")

        # 6. Chrome
        out = os.path.join(tmp, "small.json")
        r = subprocess.run([cli, "export", merged, "--format", "chrome", "-o", out], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            fail(f"export chrome: {r.stderr.strip()}")
        ev = json.load(open(out))["traceEvents"]
        # the process tracks (the plan's are the pipeline's, after them: test-mesh-review)
        names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"
                 and not e["args"]["name"].startswith("plan")}
        want = {g: f"pp {g // 2} \u00b7 dp {g % 2} \u00b7 tp 0 (process {g})" for g in range(4)}
        if names != want:
            fail(f"the Chrome export's tracks: {names}")
        blocks = collections.Counter(e["pid"] for e in ev if e.get("ph") == "X" and e.get("cat") in ("F", "B"))
        if blocks != {g: 16 for g in range(4)}:
            fail(f"the Chrome export's blocks by track: {dict(blocks)}")
        ok("Chrome: a track per process named by its place, its 16 blocks on it")

        # 7. the slowest replica per step; render's rows
        slow = synth(tool, os.path.join(tmp, "slow"), 2, 2, 4, 3, "1f1b", "--straggler", "1")
        trace = os.path.join(tmp, "slow.pptrace")
        r = merge(cli, trace, slow)
        if r.returncode != 0:
            fail(f"merge of the straggler job: {r.stderr.strip()}")
        r = subprocess.run([cli, "info", trace], capture_output=True, text=True, timeout=60)
        lines = r.stdout.splitlines()
        if "slowest replica per step (every step; by: its end after the median end, ms):" not in lines:
            fail("info has no table of the slowest replica:\n" + r.stdout)
        at = lines.index("slowest replica per step (every step; by: its end after the median end, ms):")
        table = [x.split() for x in lines[at + 2:at + 8]]
        want = [[str(s), *w, "dp", "1", "+0.755", "node0"] for s in range(3) for w in (["whole", "step"], ["rank", "0"])]
        spread = [x.strip() for x in lines if x.strip().startswith("rank ") and "median" in x and "to" in x]
        if table != want or spread != ["rank 0: median 20.0%, 20.0% to 20.0%", "rank 1: median 20.0%, 20.0% to 20.0%"]:
            fail(f"info's slowest replica per step: {table}, its bubbles over replicas: {spread}\n" + r.stdout)
        heights = {}
        for how in ("fold", "all", "1"):
            png = os.path.join(tmp, f"slow-{how}.png")
            r = subprocess.run([cli, "render", trace, "-o", png, "--replicas", how], capture_output=True,
                               text=True, timeout=60)
            if r.returncode != 0:
                fail(f"render --replicas {how}: exit {r.returncode}: {r.stderr.strip()}")
            heights[how] = struct.unpack(">I", open(png, "rb").read()[20:24])[0]
        # 48 + 34 + 30 + 8 and 62 a row (cli-render.c's fitted height)
        if heights != {"fold": 120 + 2 * 62, "all": 120 + 4 * 62, "1": 120 + 2 * 62}:
            fail(f"render's rows by --replicas (image heights): {heights}")
        for bad, says in (("2", f"--replicas 2: {trace} holds replicas dp 0 and 1 of 2, not dp 2"),
                          ("x", "--replicas takes fold")):
            r = subprocess.run([cli, "render", trace, "-o", os.path.join(tmp, "no.png"), "--replicas", bad],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 2 or says not in r.stderr or len(r.stderr.strip().splitlines()) != 1 \
                    or os.path.exists(os.path.join(tmp, "no.png")):
                fail(f"render --replicas {bad}: exit {r.returncode}: {r.stderr.strip()}")
        ok("info: the slowest replica of every step (dp 1, +0.755 ms, node0), each rank's bubble over "
           "replicas; render: 2 rows folded, 4 with --replicas all, 2 with --replicas 1, a replica not "
           "there refused")

        # 8. a larger job within 1 GiB
        wide = synth(tool, os.path.join(tmp, "wide"), 16, 32, 32, 3, "1f1b", "--straggler", "5")
        trace = os.path.join(tmp, "wide.pptrace")
        r = merge(cli, trace, wide)
        if r.returncode != 0 or "512 processes" not in r.stdout:
            fail(f"merge of the 16 x 32 job: exit {r.returncode}: {r.stderr.strip()}")
        for f in wide:
            os.unlink(f)

        def one_gib():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        r = subprocess.run([cli, "info", trace], capture_output=True, text=True, timeout=120, preexec_fn=one_gib)
        if r.returncode != 0 or "  0      whole step  dp 5 " not in r.stdout:
            fail(f"info of the 16 x 32 job within 1 GiB: exit {r.returncode}: {r.stderr.strip()}\n{r.stdout[-2000:]}")
        for how in ("fold", "all"):
            png = os.path.join(tmp, f"wide-{how}.png")
            r = subprocess.run([cli, "render", trace, "-o", png, "-W", "1920", "-H", "1080", "--replicas", how],
                               capture_output=True, text=True, timeout=120, preexec_fn=one_gib)
            if r.returncode != 0 or not os.path.exists(png):
                fail(f"render --replicas {how} of the 16 x 32 job within 1 GiB: exit {r.returncode}: "
                     f"{r.stderr.strip()}")
        ok("a 16 x 32 job of M = 32: merge, info (its straggler dp 5) and render fold and all within 1 GiB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
