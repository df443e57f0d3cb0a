#!/usr/bin/env python3
"""test-hostile-mesh.py CLI SYNTH_MESH SYNTH_HOSTILE [SAN_CLI] — issue 40's
findings on the mesh surfaces, each against the crafted traces of
pp-synth-hostile-mesh (exit codes, one-line messages, the bytes written):

  10. merge names the input that is not a trace, among many;
   9. strings from a trace (hosts, model, command holding bytes that are
      not UTF-8, ESC sequences, newlines, quotes, '<', '&') escaped in
      every output: info's terminal text, the Chrome JSON (strict UTF-8,
      parsed back), the SVG (parsed as XML, its text as drawn); a
      schedule's name so too where info, suggest and export why quote it
      in a message;
  11. two processes at one place: info, render and export refuse it with
      one line naming the file and both processes, as merge does;
   6. mesh sizes of 65,535 in dp, tp, cp and ep (one place saying all
      four, or five places whose largest sizes together do): info,
      render (fold, all, one replica, the heatmap) and the exports refuse with
      one line naming the file, never a number from an overflowed
      product; with SAN_CLI (info, export, render and suggest built
      under UBSan), no sanitizer report on any of them.
   7. a trace holding replicas dp 4 and 5 of 8 (one node's): render
      offers them by those dp values (--replicas 4 and 5 drawn, 0
      refused in one line naming the file and what it holds), the fold
      says 2 of 8; info says which it holds and prints the bubble over
      them and the slowest replica by their dp.
   8. pipescope's own Chrome export reads back: traces with a counter at
      INT64_MAX and INT64_MIN, with a span and a counter of kinds newer
      than this reader, of hostile strings, of sparse replicas, of a
      job of replicas: export, import, export again gives the same JSON,
      and info and the CSV of the import are the original's; what the
      format cannot hold is said at export; import's refusal of a broken
      event names it (its index and name, escaped).
   2. 11,000 one-process replicas of InterleavedZeroBubble at M 8192, V 4
      (test-many-replicas counts the work; here the output): info reads
      them all and says no whole step, export --format why and suggest
      say so in one line naming the file (suggest named its in-memory
      copy, /proc/self/fd/N), render draws the fold, one replica and all.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from pp_tap import fail, ok  # noqa: E402 (tests/ is the script's folder, on sys.path)

TIMEOUT = 120


def run(args, **kw):
    return subprocess.run(args, capture_output=True, timeout=TIMEOUT, **kw)


def err_lines(p):
    return [x for x in p.stderr.decode("utf-8", "replace").splitlines() if x.strip()]


def check_merge_names_input(cli, synth_mesh, synth, tmp):
    base = os.path.join(tmp, "m")
    if run([synth_mesh, base, "2", "2", "2", "2", "gpipe"]).returncode != 0:
        fail("pp-synth-mesh failed")
    junk = os.path.join(tmp, "not-a-trace.pptrace")
    with open(junk, "wb") as f:
        f.write(b"this is no trace at all, " * 8)
    inputs = [base + ".rank0", base + ".rank1", junk, base + ".rank2", base + ".rank3"]
    out = os.path.join(tmp, "merged.pptrace")
    p = run([cli, "merge", "-o", out] + inputs)
    lines = err_lines(p)
    if p.returncode == 0 or len(lines) != 1 or junk not in lines[0] or "not a pipescope trace" not in lines[0]:
        fail(f"merge with one input that is not a trace: exit {p.returncode}, stderr {lines}")
    if os.path.exists(out):
        fail("merge left an output although an input is not a trace")
    ok("merge: the input that is not a trace named in its one line, exit 1, nothing written")


HOSTILE_BYTES = [b"\x1b", b"\x07", b"\r", b"\xff", b"\xfe"]


def check_strings(cli, synth, tmp):
    trace = os.path.join(tmp, "strings.pptrace")
    if run([synth, "strings", trace]).returncode != 0:
        fail("pp-synth-hostile-mesh strings failed")
    # info: the terminal gets no control character and no line from the file
    p = run([cli, "info", trace])
    if p.returncode != 0:
        fail(f"info of the strings trace: exit {p.returncode}: {p.stderr!r}")
    for b in HOSTILE_BYTES:
        if b in p.stdout:
            fail(f"info printed the raw byte {b!r} from the trace")
    text = p.stdout.decode("utf-8")   # strict: valid UTF-8
    if any(x.startswith("line2") or "line2" in x and "\\n" not in x for x in text.splitlines()):
        fail("info printed a newline taken from the trace")
    for field in ("host: host\\x1b[2J", "command: python train.py\\x1b[2J", "model: model\\x1b"):
        if field not in text:
            fail(f"info does not show '{field}' escaped:\n{text}")
    if text.count("\\xff\\xfe") < 5 or 'host node\\x1b[2J\\x1b]0;owned\\x07' not in text:
        fail(f"info does not show the hosts' bytes escaped:\n{text}")
    # the Chrome JSON: strict UTF-8, parsed back, the strings there
    js = os.path.join(tmp, "strings.json")
    p = run([cli, "export", trace, "--format", "chrome", "-o", js])
    if p.returncode != 0:
        fail(f"export of the strings trace: exit {p.returncode}: {p.stderr!r}")
    raw = open(js, "rb").read()
    if any(b in raw for b in (b"\x1b", b"\x07", b"\xff", b"\xfe", b"\r", b"\t")):
        fail("the Chrome JSON holds raw control or non-UTF-8 bytes")
    doc = json.loads(raw.decode("utf-8"))
    desc = doc["pipescope"]["description"]
    if not desc["cmdline"].startswith('python train.py\x1b[2J\x1b]0;owned\x07\ufffd\ufffd\ufffd( "q" <b>&amp;\n\r'):
        fail(f"the Chrome JSON's command is not the trace's, escaped: {desc['cmdline']!r}")
    # the SVG: well-formed XML, the model's text as drawn (U+FFFD for what
    # cannot be shown), '<' and '&' its own
    svg = os.path.join(tmp, "strings.svg")
    p = run([cli, "render", trace, "-o", svg])
    if p.returncode != 0:
        fail(f"render of the strings trace to SVG: exit {p.returncode}: {p.stderr!r}")
    try:
        texts = [t.text or "" for t in ET.parse(svg).iter() if t.tag.endswith("text")]
    except ET.ParseError as e:
        fail(f"the SVG is not well-formed XML: {e}")
    header = [t for t in texts if "model model" in t]
    if len(header) != 1 or '( "q" <b>&amp;' not in header[0] or any(ord(c) < 0x20 for c in header[0]):
        fail(f"the SVG's header is not the model's text, escaped: {header}")
    p = run([cli, "render", trace, "-o", os.path.join(tmp, "strings.png")])
    if p.returncode != 0:
        fail(f"render of the strings trace to PNG: exit {p.returncode}: {p.stderr!r}")
    ok("strings from a trace escaped: info (no control byte, no line of its own), Chrome JSON "
       "(strict UTF-8, parsed back), SVG (well-formed, text as drawn), PNG drawn")


def check_names(cli, synth, tmp):
    trace = os.path.join(tmp, "names.pptrace")
    if run([synth, "names", trace]).returncode != 0:
        fail("pp-synth-hostile-mesh names failed")
    escaped = "GPipe\\x1b[2J\\x1b]0;owned\\x07\\xff\\xfe\\xc3( \"q\" <b>&amp;\\n\\rline2\\t\\xe2\\x82"
    for args in (["info", trace], ["suggest", trace],
                 ["export", trace, "--format", "why", "-o", os.path.join(tmp, "names.json")]):
        p = run([cli] + args)
        both = p.stdout + p.stderr
        for b in HOSTILE_BYTES + [b"\n\rline2"]:
            if b in both:
                fail(f"{args[0]} printed the raw bytes {b!r} of the trace's schedule name: {both[-600:]!r}")
        if escaped not in both.decode("utf-8"):
            fail(f"{args[0]} does not quote the schedule's name escaped: {both[-600:]!r}")
    ok("a schedule's name from the trace escaped where info, suggest and export why quote it")


def refusals(cli, trace, tmp, with_suggest=False):
    """Every consumer of trace, as (name, CompletedProcess)."""
    out = os.path.join(tmp, "out")
    cmds = [("info", ["info", trace]),
            ("render", ["render", trace, "-o", out + ".png"]),
            ("render --replicas all", ["render", trace, "-o", out + ".png", "--replicas", "all"]),
            ("render --replicas 0", ["render", trace, "-o", out + ".png", "--replicas", "0"]),
            ("render --heatmap", ["render", trace, "-o", out + ".png", "--heatmap"]),
            ("export chrome", ["export", trace, "--format", "chrome", "-o", out + ".json"]),
            ("export csv", ["export", trace, "--format", "csv", "-o", out + ".csv"]),
            ("export why", ["export", trace, "--format", "why", "-o", out + ".why.json"])]
    # suggest: under the sanitizers only (its reading of a trace of
    # processes is issue 40's finding 1, not these)
    if with_suggest:
        cmds.append(("suggest", ["suggest", trace]))
    return [(name, run([cli] + args)) for name, args in cmds]


def check_refused(cli, trace, tmp, words, what):
    for name, p in refusals(cli, trace, tmp):
        lines = err_lines(p)
        if p.returncode in (0, 2) or p.returncode > 2 or len(lines) != 1 or trace not in lines[0] \
                or not all(w in lines[0] for w in words):
            fail(f"{name} of {what}: exit {p.returncode}, stderr {lines}, stdout {p.stdout[-300:]!r}")
        if b"-" in p.stdout and b"processes" in p.stdout:
            fail(f"{name} of {what} printed a count: {p.stdout!r}")


def check_same_place(cli, synth, tmp):
    trace = os.path.join(tmp, "same-place.pptrace")
    if run([synth, "same-place", trace]).returncode != 0:
        fail("pp-synth-hostile-mesh same-place failed")
    check_refused(cli, trace, tmp, ["processes 0 and 1", "both claim the place pp 0 dp 0"],
                  "two processes at one place")
    ok("two processes at one place: info, render and the exports refuse it, one line each "
       "naming the file and both processes (as merge)")


def check_mesh_sizes(cli, synth, tmp, san):
    for kind, words in (("huge", ["process 0's mesh", "more than 65535 processes"]),
                        ("wide", ["disagree", "more than 65535 processes"])):
        trace = os.path.join(tmp, kind + ".pptrace")
        if run([synth, kind, trace]).returncode != 0:
            fail(f"pp-synth-hostile-mesh {kind} failed")
        check_refused(cli, trace, tmp, words, f"mesh sizes of 65,535 ({kind})")
        if san is None:
            continue
        env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99",
                   ASAN_OPTIONS="detect_leaks=0:exitcode=99")
        for name, p in refusals(san, trace, tmp, True):
            if p.returncode not in (0, 1) or b"runtime error" in p.stderr:
                fail(f"{name} of {kind} under UBSan: exit {p.returncode}: {p.stderr[-2000:]!r}")
    ok("mesh sizes of 65,535 in dp, tp, cp and ep (one place, or five that disagree): every consumer "
       "refuses in one line naming the file" + (", no UBSan report" if san else " (no UBSan build here)"))


def check_sparse(cli, synth, tmp, san):
    trace = os.path.join(tmp, "sparse.pptrace")
    if run([synth, "sparse", trace]).returncode != 0:
        fail("pp-synth-hostile-mesh sparse failed")
    for dp in (4, 5):
        svg = os.path.join(tmp, f"sparse{dp}.svg")
        p = run([cli, "render", trace, "-o", svg, "--replicas", str(dp)])
        if p.returncode != 0 or f"replica dp {dp} of 8 shown" not in p.stderr.decode():
            fail(f"render --replicas {dp} of a trace of dp 4 and 5 of 8: exit {p.returncode}, {err_lines(p)}")
        texts = [t.text or "" for t in ET.parse(svg).iter() if t.tag.endswith("text")]
        for r in (0, 1):
            if not any(f"rank {r} dp {dp}" in x for x in texts):
                fail(f"render --replicas {dp}: no row 'rank {r} dp {dp}' in {texts}")
    for dp in (0, 3, 6):
        png = os.path.join(tmp, f"sparse{dp}.png")
        p = run([cli, "render", trace, "-o", png, "--replicas", str(dp)])
        lines = err_lines(p)
        if p.returncode == 0 or len(lines) != 1 or trace not in lines[0] \
                or "dp 4 and 5 of 8" not in lines[0] or os.path.exists(png):
            fail(f"render --replicas {dp} (not held): exit {p.returncode}, stderr {lines}")
    p = run([cli, "render", trace, "-o", os.path.join(tmp, "sparse-fold.png")])
    if p.returncode != 0 or "2 of 8 replicas (dp 4 and 5) folded" not in p.stderr.decode():
        fail(f"render (fold) of dp 4 and 5 of 8: exit {p.returncode}, {err_lines(p)}")
    p = run([cli, "info", trace])
    out = p.stdout.decode()
    if p.returncode != 0 or "replicas held: 2 of 8 (dp 4 and 5" not in out \
            or "2 of 8 replicas a pipeline rank" not in out:
        fail(f"info of dp 4 and 5 of 8 does not say which replicas it holds: exit {p.returncode}\n{out}")
    lines = out.splitlines()
    try:
        at = lines.index("bubble a step over 2 replicas (each replica's, as above; their median, least and largest):")
    except ValueError:
        fail(f"info of dp 4 and 5 of 8 prints no bubble over its replicas:\n{out}")
    if not (lines[at + 1].startswith("  rank 0: median ") and lines[at + 2].startswith("  rank 1: median ")):
        fail(f"info's bubble over replicas lacks a rank: {lines[at:at + 3]}")
    slow = [x.split() for x in lines if x.startswith("  0      whole step")]
    if len(slow) != 1 or slow[0][3:5] != ["dp", "5"]:
        fail(f"info's slowest replica of step 0 is not dp 5 (the later one): {slow}")
    if san is not None:
        env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99")
        for args in (["info", trace], ["render", trace, "-o", os.path.join(tmp, "s.png"), "--replicas", "5"],
                     ["render", trace, "-o", os.path.join(tmp, "s.png"), "--replicas", "all"],
                     ["export", trace, "--format", "why", "-o", os.path.join(tmp, "s.json")]):
            p = run([san] + args, env=env)
            if p.returncode != 0 or b"runtime error" in p.stderr:
                fail(f"{args[0]} of dp 4 and 5 of 8 under UBSan: exit {p.returncode}: {p.stderr[-2000:]!r}")
    ok("replicas dp 4 and 5 of 8: render draws --replicas 4 and 5, refuses 0, 3 and 6 in one line saying "
       "what the file holds, the fold says 2 of 8; info says which it holds, their bubble and slowest by dp")


def info_lines(cli, trace):
    p = run([cli, "info", trace])
    if p.returncode != 0:
        fail(f"info {trace}: exit {p.returncode}: {p.stderr!r}")
    return [x for x in p.stdout.decode().splitlines() if not x.startswith(("trace: ", "plans: "))]


def check_round_trip(cli, synth_mesh, synth, tmp):
    traces = []
    for kind in ("counter-max", "new-kind", "strings", "sparse"):
        trace = os.path.join(tmp, f"rt-{kind}.pptrace")
        if run([synth, kind, trace]).returncode != 0:
            fail(f"pp-synth-hostile-mesh {kind} failed")
        traces.append(trace)
    base = os.path.join(tmp, "rt-mesh")
    merged = base + ".pptrace"
    if run([synth_mesh, base, "2", "2", "2", "2", "1f1b", "--comm", "--collectives"]).returncode != 0 \
            or run([cli, "merge", "-o", merged] + [f"{base}.rank{g}" for g in range(4)]).returncode != 0:
        fail("the job of replicas for the round trip was not made")
    traces.append(merged)
    for trace in traces:
        js, back, js2 = trace + ".json", trace + ".back.pptrace", trace + ".2.json"
        p = run([cli, "export", trace, "--format", "chrome", "-o", js])
        if p.returncode != 0:
            fail(f"export of {trace}: exit {p.returncode}: {err_lines(p)}")
        notes = [x for x in err_lines(p) if x.startswith("pipescope-cli: note: ")]
        want = {"counter-max": [f"pipescope-cli: note: {trace}: 2 counters at or past +-2^61 ns, the times "
                                "pipescope draws: written at that limit, and left out of the run's zero"],
                "strings": [f"pipescope-cli: note: {trace}: 7 strings (hosts, model, command, names) hold bytes "
                            "that are not UTF-8, which JSON cannot: written with U+FFFD in their place"]}
        kind = os.path.basename(trace)[3:-len(".pptrace")]
        if notes != want.get(kind, []):
            fail(f"export of {trace} does not say what it cannot hold, or says it of nothing: {err_lines(p)}")
        p = run([cli, "import", js, "-o", back])
        if p.returncode != 0:
            fail(f"import of pipescope's own export of {trace}: exit {p.returncode}: {err_lines(p)}")
        if run([cli, "export", back, "--format", "chrome", "-o", js2]).returncode != 0:
            fail(f"export of the import of {trace} failed")
        if open(js, "rb").read() != open(js2, "rb").read():
            fail(f"the Chrome export of {trace} read back and exported again differs")
        # (bytes that are not UTF-8 come back as U+FFFD, as said: info
        # shows the one as \\xff, the other as the character)
        if kind != "strings" and info_lines(cli, trace) != info_lines(cli, back):
            fail(f"info of the import of {trace} is not the original's")
        csv = []
        for t in (trace, back):
            if run([cli, "export", t, "--format", "csv", "-o", t + ".csv"]).returncode != 0:
                fail(f"csv export of {t} failed")
            csv.append(open(t + ".csv", "rb").read())
        if csv[0] != csv[1] or len(csv[0].splitlines()) < 9:
            fail(f"the spans of the import of {trace} are not the original's")
    doc = json.load(open(traces[1] + ".json"))
    newer = [e for e in doc["traceEvents"] if e.get("args", {}).get("kind") == 29]
    if len(newer) != 2 or [c[2] for c in doc["pipescope"]["counters"]].count(14) != 2:
        fail("the export does not write the newer span and counter kinds by number")
    # a broken event: named by its index and name, its name escaped
    doc = json.load(open(traces[0] + ".json"))
    at = next(i for i, e in enumerate(doc["traceEvents"])
              if e.get("ph") == "X" and "rank" in e.get("args", {}) and e.get("cat") != "plan")
    doc["traceEvents"][at]["args"]["stage"] = "two"
    doc["traceEvents"][at]["name"] = "F0\x1b[2J\nx"
    bad = os.path.join(tmp, "rt-bad.json")
    json.dump(doc, open(bad, "w"))
    p = run([cli, "import", bad, "-o", os.path.join(tmp, "rt-bad.pptrace")])
    lines = err_lines(p)
    if p.returncode == 0 or len(lines) != 1 or f"traceEvents[{at}] ('F0" not in lines[0] or bad not in lines[0] \
            or "\x1b" in lines[0]:
        fail(f"import of a broken span event: exit {p.returncode}, stderr {lines}")
    doc = json.load(open(traces[0] + ".json"))
    doc["pipescope"]["counters"][1][3] = "soon"
    json.dump(doc, open(bad, "w"))
    p = run([cli, "import", bad, "-o", os.path.join(tmp, "rt-bad.pptrace")])
    lines = err_lines(p)
    if p.returncode == 0 or len(lines) != 1 or "counters[1]" not in lines[0]:
        fail(f"import of a broken counter: exit {p.returncode}, stderr {lines}")
    ok("Chrome round trip: counters at INT64_MAX and INT64_MIN (said at export), span and counter kinds newer "
       "than the reader (by number), hostile strings, sparse replicas and a job of replicas export, import and "
       "export again to the same JSON, info and CSV; import names a broken event by index and escaped name")


def check_many(cli, synth, tmp, san):
    trace = os.path.join(tmp, "many.pptrace")
    if run([synth, "many", trace]).returncode != 0:
        fail("pp-synth-hostile-mesh many failed")
    p = run([cli, "info", trace])
    out = p.stdout.decode()
    if p.returncode != 0 or "processes: 11000 (pp 2 × dp 11000 × tp 1)" not in out \
            or "11000 replicas a pipeline rank" not in out or "replicas held" in out \
            or "idle by cause: n/a (no whole step to analyse: no step has a block for every action of the " \
               "InterleavedZeroBubble plan)" not in out:
        fail(f"info of 11,000 replicas: exit {p.returncode}\n{out[-3000:]}")
    # pipeline rank 1 has no process in the trace: not measured (no bubble
    # of -100 % over the replicas, not 100 % idle), the means over rank 0
    if "  rank 1 idle: \u2013 (no spans of it in the trace)\n" not in out or "-100" in out \
            or "mean idle: 0.0% (of the ranks with spans)" not in out or "mean bubble a step: 0.0%" not in out:
        fail(f"info of 11,000 replicas of rank 0 only measures rank 1:\n{out[-3000:]}")
    for args, words in ((["export", trace, "--format", "why", "-o", os.path.join(tmp, "many.json")],
                         "no whole step to analyse"),
                        (["suggest", trace], "rank 1 has no measured F spans")):
        p = run([cli] + args)
        lines = err_lines(p)
        if p.returncode != 1 or len(lines) != 1 or not lines[0].startswith(f"pipescope-cli: error: {trace}: ") \
                or words not in lines[0]:
            fail(f"{args[0]} of 11,000 replicas without a whole step: exit {p.returncode}, stderr {lines}")
    for rep, note in (("fold", "11000 replicas folded"), ("10999", "replica dp 10999 of 11000 shown"),
                      ("all", "11000 replicas unfolded")):
        p = run([cli, "render", trace, "-o", os.path.join(tmp, "many.png"), "--replicas", rep])
        if p.returncode != 0 or note not in p.stderr.decode():
            fail(f"render --replicas {rep} of 11,000 replicas: exit {p.returncode}, {err_lines(p)}")
    if san is not None:
        env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99")
        for args in (["info", trace], ["render", trace, "-o", os.path.join(tmp, "s.png"), "--replicas", "all"]):
            p = run([san] + args, env=env)
            if p.returncode != 0 or b"runtime error" in p.stderr:
                fail(f"{args[0]} of 11,000 replicas under UBSan: exit {p.returncode}: {p.stderr[-2000:]!r}")
    ok("11,000 one-process replicas (InterleavedZeroBubble, M 8192, V 4): info reads them and says no whole step, "
       "export why and suggest refuse in one line naming the file, render draws fold, one replica and all")


def main():
    cli, synth_mesh, synth = sys.argv[1:4]
    san = sys.argv[4] if len(sys.argv) > 4 and os.path.exists(sys.argv[4]) else None
    tmp = tempfile.mkdtemp(prefix="pp-hostile-mesh-")
    print("1..8")
    try:
        check_merge_names_input(cli, synth_mesh, synth, tmp)
        check_strings(cli, synth, tmp)
        check_names(cli, synth, tmp)
        check_same_place(cli, synth, tmp)
        check_mesh_sizes(cli, synth, tmp, san)
        check_sparse(cli, synth, tmp, san)
        check_round_trip(cli, synth_mesh, synth, tmp)
        check_many(cli, synth, tmp, san)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
