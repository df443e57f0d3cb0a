#!/usr/bin/env python3
"""test-torch-calls.py CLI LIB SCHEDULE [VAR] — with the real PyTorch, the
hook's wrappers take every call PyTorch's functions take.

SCHEDULE is one of PyTorch's schedule classes: tests/pytorch/call-forms.py
(2 ranks, CPU, gloo, torchrun) calls every function the hook wraps in every
form its real signature allows (all positional, by keyword from any point
on, self by keyword, defaults left out; the step bound, unbound, self by
keyword), run

  * plain (no hook): the unwrapped functions' results;
  * under `pipescope-cli profile`, the hook's compiled wrappers recording;
  * the same with PIPESCOPE_FAST=0 (the Python wrappers);
  * the hook loaded, recording stopped before the first step (its
    wrappers in place, recording off);
  * the hook loaded, every other step paused (PIPESCOPE_BENCH_ALTERNATE);

and each run must finish with every call's result, the losses and the
weights of the plain run, bit for bit; the recorded runs' traces hold one
block a compute call and one transfer an op, per rank.

SCHEDULE "patch": the issue's user, who patches get_fwd_recv_ops and
get_bwd_recv_ops to count the receives and calls the originals by keyword,
runs Schedule1F1B under `pipescope-cli profile -- torchrun ...`: it finishes
with the plain run's results, and its trace has both ranks, every step and
one receive a counted op.
VAR names the variable holding the python of the PyTorch to use
(PIPESCOPE_TORCH_PYTHON by default); without it the test skips.
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
PKG = os.path.normpath(os.path.join(HERE, "..", "..", "probe", "python"))
AUTO = os.path.join(PKG, "pipescope", "_autoload")
sys.path.insert(0, os.path.join(HERE, ".."))
from pp_tap import fail, ok  # noqa: E402

STEPS = 5
KINDS = {"forward_one_chunk": ("F",), "backward_one_chunk": ("B", "I"), "backward_weight_one_chunk": ("W",),
         "get_fwd_send_ops": ("SEND_F",), "get_bwd_send_ops": ("SEND_B",),
         "get_fwd_recv_ops": ("RECV_F",), "get_bwd_recv_ops": ("RECV_B",)}
MB_NAME = {"forward_one_chunk": "fwd_chunk_id", "get_fwd_send_ops": "fwd_chunk_id",
           "get_fwd_recv_ops": "fwd_chunk_id"}


def run(cmd, env, what):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p


def results(out):
    return [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)]


def same(plain, other, what, keys=("digests", "losses", "params", "calls", "ops", "forms")):
    for r in (0, 1):
        for k in keys:
            if plain[r][k] != other[r][k]:
                fail(f"{what}: rank {r}'s {k} differ from the plain run's:\n  plain {str(plain[r][k])[:1500]}"
                     f"\n  {what} {str(other[r][k])[:1500]}")


def spans(cli, trace, tmp, env):
    out = os.path.join(tmp, "spans.csv")
    run([cli, "export", trace, "--format", "csv", "-o", out], env, "export")
    got = collections.Counter()
    for s in csv.DictReader(open(out)):
        got[(int(s["rank"]), s["kind"])] += 1
    return got


def main():
    cli, lib, sched = sys.argv[1], sys.argv[2], sys.argv[3]
    var = sys.argv[4] if len(sys.argv) > 4 else "PIPESCOPE_TORCH_PYTHON"
    py = os.environ.get(var)
    if not py or not os.path.exists(py):
        print(f"1..0 # SKIP {var} is not set (./dev.sh test installs PyTorch and sets it)")
        return 0
    print("1..1")
    tmp = tempfile.mkdtemp(prefix="pp-torch-calls-")
    try:
        os.chmod(tmp, 0o700)
        return check(cli, lib, sched, py, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(cli, lib, sched, py, tmp):
    bindir = os.path.dirname(py)
    env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", ""), OMP_NUM_THREADS="1",
               XDG_RUNTIME_DIR=tmp)
    env.pop("PYTHONPATH", None)
    for k in ("PIPESCOPE_FAST", "PIPESCOPE_BENCH_ALTERNATE", "PIPESCOPE_TRACE", "PIPESCOPE_JOB"):
        env.pop(k, None)
    # profile loads the hook beside this test, with LIB, as the hooked runs do
    env.update(PIPESCOPE_PYTHON=PKG, PIPESCOPE_LIB=lib)
    hooked = dict(env, PYTHONPATH=AUTO, PIPESCOPE_JOB="calls")
    patch = sched == "patch"
    job = [os.path.join(bindir, "torchrun"), "--standalone", "--nproc-per-node", "2",
           os.path.join(HERE, "call-forms.py"), "--steps", str(STEPS),
           "--schedule", "Schedule1F1B" if patch else sched] + (["--patch"] if patch else [])

    plain = os.path.join(tmp, "plain")
    run(job + ["--out", plain], env, "the plain run")
    want = results(plain)
    for r in (0, 1):
        if not want[r]["calls"].get("get_fwd_recv_ops") and not want[r]["calls"].get("get_bwd_recv_ops"):
            fail(f"rank {r} of the plain run made no get_*_recv_ops call")
    if not patch:
        # the forms the old wrappers broke were made: self and the micro-batch by keyword
        for r in (0, 1):
            for name, fs in want[r]["forms"].items():
                mb = MB_NAME.get(name, "bwd_chunk_id")
                if name in KINDS and not (any("self" in k for _, k in fs) and any(mb in k for _, k in fs)):
                    fail(f"rank {r}: {name} was never called with self and {mb} by keyword: {fs}")

    said_all = []
    recorded = [("profile", {}), ("profile, PIPESCOPE_FAST=0", {"PIPESCOPE_FAST": "0"})]
    for what, extra in recorded:
        out, trace = os.path.join(tmp, f"out-{len(said_all)}"), os.path.join(tmp, f"t-{len(said_all)}.pptrace")
        p = run([cli, "profile", "--trace", trace, "--name", "calls", "--"] + job + ["--out", out],
                dict(env, **extra), what)
        said = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
        if any("not recording" in l or "recording stopped" in l for l in said) or "Traceback" in p.stderr:
            fail(f"{what}: the hook did not record throughout:\n{p.stderr[-3000:]}")
        got = results(out)
        same(want, got, what)
        n = spans(cli, trace, tmp, env)
        for r in (0, 1):
            for name, kinds in KINDS.items():
                if patch and name not in ("get_fwd_recv_ops", "get_bwd_recv_ops"):
                    continue   # the user's job counts its receives only
                count = want[r]["ops" if name.startswith("get_") else "calls"].get(name, 0)
                if sum(n[(r, k)] for k in kinds) != count:
                    fail(f"{what}: rank {r} has {[n[(r, k)] for k in kinds]} {'/'.join(kinds)} spans "
                         f"for {count} {'ops of' if name.startswith('get_') else 'calls of'} {name}")
        info = run([cli, "info", trace], env, "info").stdout
        if "ranks: 2" not in info or f"steps: {STEPS}" not in info:
            fail(f"{what}: the trace lacks a rank or a step:\n{info}")
        said_all.append(f"{what}: {sum(n.values())} spans")
    if not patch:
        out = os.path.join(tmp, "off")
        p = run(job + ["--out", out, "--hook-off"], hooked, "recording off")
        lines = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
        if len(lines) != 2 or not all("recording stopped (the test" in l for l in lines):
            fail(f"recording off: the hook said {lines}, not one line a rank")
        same(want, results(out), "recording off")
        out = os.path.join(tmp, "paused")
        p = run(job + ["--out", out], dict(hooked, PIPESCOPE_BENCH_ALTERNATE="1"), "every other step paused")
        if "Traceback" in p.stderr or "recording stopped" in p.stderr:
            fail(f"paused steps: {p.stderr[-3000:]}")
        same(want, results(out), "every other step paused")
        said_all += ["recording off", "paused steps"]
    forms = sum(len(v) for v in want[0]["forms"].values()) + sum(len(v) for v in want[1]["forms"].values())
    what = ("the issue's user's patch (the originals called by keyword)" if patch
            else f"{sched}: {forms} call forms")
    ok(f"{what} (PyTorch {want[0]['torch']}): results, losses and weights of the plain run bit for bit, "
       f"every block and op recorded ({'; '.join(said_all)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
