#!/usr/bin/env python3
"""test-import.py CLI DATA_DIR — `pipescope-cli import` on real torch.profiler
traces (tests/data/kineto/, made by tools/gen-kineto-fixtures.py: 2-rank
torchrun gloo jobs on the CPU, M=4, 2 profiled steps).

The JSON is read here with Python's json module, independently of the C
reader, and compared with what the imported trace holds (`export --format
csv`, `info`):

- per rank the imported compute order (blocks by start) is the labels'
  order in that rank's JSON, label for label, each block its compute
  exactly: from the end of the wait its label holds (a WAIT of its stage
  and micro-batch) to the label's end, or its last operator before sends
  (with and without ProfilerStep ranges);
- every (stage, micro-batch) of every step has its F and its B, or its I
  and W (the halves of an OVERLAP_F_B counted);
- the run has world_size ranks, each with transfers, and a plan named for
  the schedule the job ran;
- info, render and `export --format why` read it;
- gzip'd and plain JSON import to the same spans;
- Schedule1F1B's traces (no labels) are refused: exit 2, one line pointing
  to `pipescope-cli profile`;
- garbage, truncated JSON and truncated gzip: exit 2, one line naming the file.
"""
from decimal import ROUND_HALF_UP, Decimal
import csv
import glob
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CLI, DATA = sys.argv[1], os.path.join(sys.argv[2], "kineto")
EXPECT = {"gpipe": "GPipe", "interleaved": "Interleaved1F1B", "zbv": "ZBV", "dualpipev": "DualPipeV"}
BLOCK = re.compile(r"^(PP:\d+[FBIW]\d+|PP:\(\d+F\d+;\d+[BI]\d+\)OVERLAP_F_B|Forward \d+|Backward \d+)$")
failures = 0
n_checks = 0


def check(cond, what):
    global failures, n_checks
    n_checks += 1
    print(("ok " if cond else "not ok ") + str(n_checks) + " - " + " ".join(what.split()))
    if not cond:
        failures += 1


def run(*args):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def json_labels(path):
    """(rank, world_size, the block labels in start order) of one trace."""
    d = load(path)
    info = d["distributedInfo"]
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    ev = [(e["ts"], e["name"].split(",")[0]) for e in ev]
    names = [n for ts, n in sorted(ev, key=lambda x: x[0]) if BLOCK.match(n)]
    return info["rank"], info["world_size"], names


COMM = re.compile(r"^(c10d::|gloo:|nccl:|record_param_comms$|ProcessGroup)")


def expected_blocks(path):
    """Each block label's (start, end as import must give them, start of
    the label, whether it waited), in ns, exactly: the block is the
    label's compute.  Where the receive it waited for (gloo:recv under the
    last PP:<s>RECV_F<m> label before an F of (s, m), RECV_B for B and I;
    GPipe's inside the block) ended inside the label's range, or
    communication calls of its thread open it, it waited: the block starts
    when those waits are over, the time before it a WAIT.  Where
    communication calls of its thread close it (GPipe's sends), it ends
    with its last operator (cpu_op, any thread), else with the label."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    d = json.loads(raw, parse_float=Decimal)
    base = int(d.get("baseTimeNanoseconds", 0))
    ns = lambda us: base + int((Decimal(us) * 1000).to_integral_value(rounding=ROUND_HALF_UP))
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X" and not isinstance(e.get("ts"), str)]
    rng = lambda e: (ns(e["ts"]), ns(e["ts"]) + int((Decimal(e.get("dur", 0)) * 1000).to_integral_value(rounding=ROUND_HALF_UP)))
    recv_labels = [(rng(e), e["name"]) for e in ev if e.get("cat") == "user_annotation"
                   and re.match(r"^PP:\d+RECV_[FB]\d+$", e["name"])]
    blocks = sorted(((rng(e), e["name"].split(",")[0], e.get("tid")) for e in ev if e.get("cat") == "user_annotation"
                     and BLOCK.match(e["name"].split(",")[0])), key=lambda x: x[0][0])
    ops = []
    for e in ev:
        n = e["name"].split(",")[0]
        if n.startswith(("PP:", "ProfilerStep#", "Optimizer.step#")) or BLOCK.match(n):
            continue
        comm = COMM.match(n) is not None
        if comm or e.get("cat") in ("cpu_op", "Operator"):
            t0, t1 = rng(e)
            ops.append((t0, -t1, e.get("tid"), comm))
    ops.sort()
    ready, inside = {}, {}
    for e in ev:
        if e.get("name") != "gloo:recv":
            continue
        (t0, t1) = rng(e)
        lab = [((a, b), n) for (a, b), n in recv_labels if a <= t0 <= b]
        if lab:
            (a, b), n = lab[-1]
            m = re.match(r"^PP:(\d+)RECV_([FB])(\d+)$", n)
            ready.setdefault((m[2], int(m[1]), int(m[3])), []).append((a, t1))
        else:
            for i, ((a, b), n, tid) in enumerate(blocks):
                if a <= t0 <= b:
                    inside[i] = max(inside.get(i, 0), t1)
    out = []
    for i, ((a, b), n, tid) in enumerate(blocks):
        m = re.match(r"^PP:(\d+)([FBI])(\d+)$", n)
        r = inside.get(i, 0)
        if m:
            # the block's receive: the latest one of its (kind, stage, mb) posted before it
            posted = [(p, t) for p, t in ready.get(("F" if m[2] == "F" else "B", int(m[1]), int(m[3])), [])
                      if p <= a]
            if posted:
                r = max(r, max(posted)[1])
        cur = r if a < r < b else a
        computed, last, last_comm = False, None, None
        for t0, mt1, otid, comm in ops:
            t1 = -mt1
            if t0 < a or t0 > b:
                continue
            if comm:
                if otid != tid:
                    continue
                if not computed:
                    if cur < t1 < b:
                        cur = t1
                elif last_comm is None or t0 > last_comm:
                    last_comm = t0
                continue
            if t1 > b or (not computed and t0 < cur):
                continue
            computed = True
            last = t1 if last is None else max(last, t1)
        start, end = cur, last if computed and last_comm is not None and last_comm >= last else b
        if start >= end:
            start, end = a, b
        out.append((start, end, a, start > a))
    return out


def halves(name, stage_of_rank):
    """The (kind, stage, micro-batch) a block label runs."""
    m = re.match(r"^PP:\((\d+)F(\d+);(\d+)([BI])(\d+)\)OVERLAP_F_B$", name)
    if m:
        return [("F", int(m[1]), int(m[2])), (m[4], int(m[3]), int(m[5]))]
    m = re.match(r"^PP:(\d+)([FBIW])(\d+)$", name)
    if m:
        return [(m[2], int(m[1]), int(m[3]))]
    m = re.match(r"^(Forward|Backward) (\d+)$", name)
    return [(m[1][0], stage_of_rank, int(m[2]))]


def imported(trace, tmp):
    out = os.path.join(tmp, "spans.csv")
    rc, _, err = run("export", trace, "--format", "csv", "-o", out)
    check(rc == 0, f"export --format csv {os.path.basename(trace)} ({err.strip()})")
    with open(out) as f:
        return list(csv.DictReader(f))


def fixture(name, tmp):
    files = sorted(glob.glob(os.path.join(DATA, name, "*.json*")))
    check(len(files) == 2, f"{name}: two rank traces in the fixture")
    trace = os.path.join(tmp, name + ".pptrace")
    rc, out, err = run("import", *files, "-o", trace)
    check(rc == 0 and err == "", f"{name}: import exits 0, quietly ({err.strip()})")
    check(EXPECT[name] in out, f"{name}: the plan is {EXPECT[name]}'s ({out.strip()})")
    rc, info, _ = run("info", trace)
    world = json_labels(files[0])[1]
    check(rc == 0 and f"\nranks: {world}\n" in info, f"{name}: info reads it, {world} ranks (= world_size)")
    check(f"schedule: {EXPECT[name]} (P={world}, M=4" in info, f"{name}: info names the schedule, P and M")
    check(f"plans: {world}" in info, f"{name}: a plan for every rank")
    rows = imported(trace, tmp)
    kinds = {"F", "B", "I", "W", "OVERLAP_F_B"}
    # the CSV counts from the run's start: every block's start is the
    # profiler's less one origin, the same for every rank (one clock)
    origins = set()
    for path in files:
        rank, _, labels = json_labels(path)
        blocks = [r for r in rows if int(r["rank"]) == rank and r["kind"] in kinds]
        blocks.sort(key=lambda r: int(r["start_ns"]))
        got = [r["name"] for r in blocks]
        check(got == labels and len(labels) > 0,
              f"{name}: rank {rank}: the imported order is the JSON's ({len(labels)} labels)")
        want = expected_blocks(path)
        starts = [int(r["start_ns"]) for r in blocks]
        ends = [int(r["end_ns"]) for r in blocks]
        moved = sum(1 for w, e, a, waited in want if waited)
        waits = sorted((int(r["stage"]), int(r["microbatch"]), int(r["step"]), int(r["end_ns"]))
                       for r in rows if int(r["rank"]) == rank and r["kind"] == "WAIT")
        offsets = {w - s for (w, e, a, _), s in zip(want, starts)}
        origins |= offsets
        check(len(want) == len(starts) and len(offsets) == 1 and len(waits) == moved and moved > 0,
              f"{name}: rank {rank}: each block that waited for its input starts when the wait "
              f"was over, the time before a WAIT ({len(waits)} of {len(want)})")
        check(len(want) == len(ends) and {e - s for (w, e, a, _), s in zip(want, ends)} == offsets,
              f"{name}: rank {rank}: each block ends with its label, or its last operator where sends close it")
        # each wait is charged to the block after it: its stage, micro-batch, step, ending at its start
        got = sorted((int(r["stage"]), int(r["microbatch"]), int(r["step"]), int(r["start_ns"]))
                     for r, (w, e, a, waited) in zip(blocks, want) if waited)
        check(waits == got, f"{name}: rank {rank}: each WAIT is its block's, ending where the block starts")
        xfers = [r for r in rows if int(r["rank"]) == rank and r["kind"] in
                 ("SEND_F", "RECV_F", "SEND_B", "RECV_B")]
        check(len(xfers) > 0, f"{name}: rank {rank}: transfers ({len(xfers)})")
    check(len(origins) == 1 and min(int(r["start_ns"]) for r in rows) >= 0,
          f"{name}: every rank's times count from one origin, the run's start ({sorted(origins)[:3]})")
    # an overlapped pair keeps its backward half (format 1.2's 'sub')
    for r in rows:
        if r["kind"] == "OVERLAP_F_B":
            m = re.match(r"^PP:\((\d+)F(\d+);(\d+[BI]\d+)\)OVERLAP_F_B$", r["name"])
            check(m is not None and r.get("sub") == m[3] and int(r["stage"]) == int(m[1])
                  and int(r["microbatch"]) == int(m[2]),
                  f"{name}: {r['name']} is stage {r['stage']} mb {r['microbatch']} with {r.get('sub')}")
    # every (stage, micro-batch) of every step: F, and B or I + W
    stages = set()
    have = {}
    for r in rows:
        if r["kind"] not in kinds:
            continue
        for kind, stage, mb in halves(r["name"], int(r["rank"])):
            stages.add(stage)
            have.setdefault((int(r["step"]), stage, mb), []).append(kind)
    steps = sorted({k[0] for k in have})
    check(len(steps) == 2, f"{name}: two steps ({steps})")
    complete = all(sorted(have.get((s, st, mb), [])) in (["B", "F"], ["F", "I", "W"])
                   for s in steps for st in stages for mb in range(4))
    check(complete and stages == set(range(len(stages))),
          f"{name}: every (stage, micro-batch) of each step has F and B, or I and W ({len(stages)} stages)")
    return trace, rows


def main():
    tmp = tempfile.mkdtemp(prefix="pp-import-")
    try:
        traces = {}
        for name in EXPECT:
            traces[name] = fixture(name, tmp)

        # what the other readers make of it
        t = traces["interleaved"][0]
        rc, _, err = run("export", t, "--format", "why", "-o", os.path.join(tmp, "why.json"))
        check(rc == 0, f"export --format why reads an imported run ({err.strip()})")
        if rc == 0:
            with open(os.path.join(tmp, "why.json")) as f:
                why = json.load(f)
            check(isinstance(why, dict) and len(why) > 0, "the Why report is a JSON object")
        rc, _, err = run("render", t, "-o", os.path.join(tmp, "t.png"), "--plan")
        check(rc == 0 and os.path.getsize(os.path.join(tmp, "t.png")) > 0, f"render --plan draws it ({err.strip()})")
        rc, out, err = run("suggest", t)
        check(rc == 0 and "Interleaved1F1B" in out, f"suggest ranks schedules from it ({err.strip()})")

        # plain JSON (as export_chrome_trace writes it) = the gzip'd one
        plain = os.path.join(tmp, "plain")
        os.mkdir(plain)
        for f in sorted(glob.glob(os.path.join(DATA, "gpipe", "*.json.gz"))):
            with gzip.open(f) as g, open(os.path.join(plain, os.path.basename(f)[:-3]), "wb") as o:
                shutil.copyfileobj(g, o)
        pt = os.path.join(tmp, "plain.pptrace")
        rc, out, err = run("import", plain, "-o", pt)
        check(rc == 0, f"plain JSON imports (a folder of them) ({err.strip()})")
        strip = lambda rows: [tuple(r.values()) for r in rows]
        check(rc == 0 and strip(imported(pt, tmp)) == strip(traces["gpipe"][1]),
              "plain and gzip'd JSON give the same spans")

        # a profile that began mid-step, without ProfilerStep ranges, with
        # the GPU side of every label beside it (as CUDA runs have): the
        # steps are found from the repeats, the plan from a whole step
        cut_dir = os.path.join(tmp, "midstep")
        os.mkdir(cut_dir)
        kept = 0
        for f in sorted(glob.glob(os.path.join(DATA, "interleaved", "*.json.gz"))):
            d = load(f)
            ev = d["traceEvents"]
            blocks = sorted(e["ts"] for e in ev if e.get("cat") == "user_annotation" and BLOCK.match(e["name"]))
            t_cut = blocks[len(blocks) // 4]        # halfway through step 0
            out_ev = []
            for e in ev:
                name = e.get("name", "")
                if name.startswith("ProfilerStep#"):
                    continue
                if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and e["ts"] < t_cut:
                    continue
                out_ev.append(e)
                if e.get("cat") == "user_annotation" and name.startswith("PP:"):
                    g = dict(e, cat="gpu_user_annotation", pid=0, tid=7, ts=e["ts"] + 3)
                    out_ev.append(g)
            kept += sum(1 for e in out_ev if e.get("cat") == "user_annotation" and BLOCK.match(e["name"]))
            d["traceEvents"] = out_ev
            with open(os.path.join(cut_dir, os.path.basename(f)[:-3]), "w") as o:
                json.dump(d, o)
        mt = os.path.join(tmp, "midstep.pptrace")
        rc, out, err = run("import", cut_dir, "-o", mt)
        check(rc == 0 and "Interleaved1F1B" in out and f"{kept} blocks" in out,
              f"a profile begun mid-step, GPU label copies beside: the schedule found, {kept} blocks ({err.strip()} {out.strip()})")

        # without ProfilerStep ranges (steps found from the repeats, a
        # receive's label before the step's first block counted in the step
        # before) each block waits for the receive posted last before it:
        # the same blocks and waits as with them
        nostep_dir = os.path.join(tmp, "nostep")
        os.mkdir(nostep_dir)
        for f in sorted(glob.glob(os.path.join(DATA, "interleaved", "*.json.gz"))):
            d = load(f)
            d["traceEvents"] = [e for e in d["traceEvents"] if not e.get("name", "").startswith("ProfilerStep#")]
            with open(os.path.join(nostep_dir, os.path.basename(f)[:-3]), "w") as o:
                json.dump(d, o)
        nt = os.path.join(tmp, "nostep.pptrace")
        rc, out, err = run("import", nostep_dir, "-o", nt)

        def timed(rows):
            rows = [r for r in rows if r["kind"] in kinds | {"WAIT"}]
            t0 = min(int(r["start_ns"]) for r in rows)
            return sorted((int(r["rank"]), int(r["start_ns"]) - t0, int(r["end_ns"]) - t0, r["kind"], r["name"])
                          for r in rows)
        kinds = {"F", "B", "I", "W", "OVERLAP_F_B"}
        check(rc == 0 and timed(imported(nt, tmp)) == timed(traces["interleaved"][1]),
              f"without ProfilerStep ranges: the same blocks and waits ({err.strip()})")

        # one rank in two files of different times (tensorboard_trace_handler
        # writes one a profiling cycle): one rank, the same spans as whole
        split_dir = os.path.join(tmp, "split")
        os.mkdir(split_dir)
        files = sorted(glob.glob(os.path.join(DATA, "interleaved", "*.json.gz")))
        shutil.copy(files[0], split_dir)
        d = load(files[1])
        step2 = [e["ts"] for e in d["traceEvents"] if e.get("name") == "ProfilerStep#2"][0]
        timed = lambda e: isinstance(e.get("ts"), (int, float))
        for part, keep in (("a", lambda e: not timed(e) or e["ts"] < step2),
                           ("b", lambda e: not timed(e) or e["ts"] >= step2)):
            with open(os.path.join(split_dir, f"rank1.{part}.pt.trace.json"), "w") as o:
                json.dump(dict(d, traceEvents=[e for e in d["traceEvents"] if keep(e)]), o)
        st = os.path.join(tmp, "split.pptrace")
        rc, out, err = run("import", split_dir, "-o", st)
        check(rc == 0 and "from 3 traces" in out and "Interleaved1F1B" in out,
              f"one rank in two files of different times imports ({err.strip()} {out.strip()})")
        spans = lambda rows: sorted(tuple(r.values()) for r in rows)
        check(rc == 0 and spans(imported(st, tmp)) == spans(traces["interleaved"][1]),
              "and gives the spans of the whole file")

        # Schedule1F1B labels nothing
        files = sorted(glob.glob(os.path.join(DATA, "1f1b", "*.json*")))
        rc, out, err = run("import", *files, "-o", os.path.join(tmp, "1f1b.pptrace"))
        check(rc == 2 and err.count("\n") == 1 and err.startswith("pipescope-cli: error: ")
              and "pipescope-cli profile" in err,
              f"Schedule1F1B's traces: exit 2, one line pointing to profile ({rc}: {err.strip()})")
        check(not os.path.exists(os.path.join(tmp, "1f1b.pptrace")), "a refused import writes no file")

        # garbage, truncated JSON, truncated gzip
        text = open(os.path.join(plain, os.listdir(plain)[0]), "rb").read()
        gz = open(sorted(glob.glob(os.path.join(DATA, "zbv", "*.json.gz")))[0], "rb").read()
        bad = {
            "garbage.json": b"\x00\x01not json at all\xff",
            "cut.json": text[: len(text) // 2],
            "cut.json.gz": gz[: len(gz) // 2],
            "foreign.json": b'{"hello": [1, 2, 3]}',
            "deep.json": b"[" * 100000,
            "empty.json": b"",
        }
        for fname, data in bad.items():
            p = os.path.join(tmp, fname)
            with open(p, "wb") as f:
                f.write(data)
            rc, out, err = run("import", p, "-o", os.path.join(tmp, "bad.pptrace"))
            check(rc == 2 and err.count("\n") == 1 and err.startswith("pipescope-cli: error: ")
                  and fname in err, f"{fname}: exit 2, one line naming the file ({rc}: {err.strip()})")
        check(not os.path.exists(os.path.join(tmp, "bad.pptrace")), "no trace left by a failed import")
    finally:
        shutil.rmtree(tmp)
    print(f"1..{n_checks}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
