#!/usr/bin/env python3
"""test-hostile-mesh.py CLI SYNTH_MESH SYNTH_HOSTILE [SAN_CLI] — issue 40's
findings on the mesh surfaces, each against the crafted traces of
pp-synth-hostile-mesh (exit codes, one-line messages, the bytes written):

  10. merge names the input that is not a trace, among many;
   9. strings from a trace (hosts, model, command holding bytes that are
      not UTF-8, ESC sequences, newlines, quotes, '<', '&') escaped in
      every output: info's terminal text, the Chrome JSON (strict UTF-8,
      parsed back), the SVG (parsed as XML, its text as drawn);
  11. two processes at one place: info, render and export refuse it with
      one line naming the file and both processes, as merge does;
   6. mesh sizes of 65,535 in dp, tp, cp and ep (one place saying all
      four, or five places whose largest sizes together do): info,
      render (fold, all, one replica, the heatmap) and the exports refuse with
      one line naming the file, never a number from an overflowed
      product; with SAN_CLI (info, export, render and suggest built
      under UBSan), no sanitizer report on any of them.
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


def main():
    cli, synth_mesh, synth = sys.argv[1:4]
    san = sys.argv[4] if len(sys.argv) > 4 and os.path.exists(sys.argv[4]) else None
    tmp = tempfile.mkdtemp(prefix="pp-hostile-mesh-")
    print("1..4")
    try:
        check_merge_names_input(cli, synth_mesh, synth, tmp)
        check_strings(cli, synth, tmp)
        check_same_place(cli, synth, tmp)
        check_mesh_sizes(cli, synth, tmp, san)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
