#!/usr/bin/env python3
"""test-torch-calls.py CLI LIB VAR CASE... — with the real PyTorch, the
hook's wrappers take every call PyTorch's functions take.

A CASE is one of PyTorch's schedule classes: tests/pytorch/call-forms.py
(2 ranks, CPU, gloo, launched by forkrun.py, torchrun's environment with
the imports once) calls every function the hook wraps in every
form its real signature allows (all positional, by keyword from any point
on, self by keyword, defaults left out; the step bound, unbound, self by
keyword), run

  * plain (no hook): the unwrapped functions' results;
  * under `pipescope-cli profile`, the hook's compiled wrappers recording;
  * the same with PIPESCOPE_FAST=0 (the Python wrappers);
  * the hook loaded, every other step paused (PIPESCOPE_BENCH_ALTERNATE);
  * the hook loaded, recording stopped before the first step (its
    wrappers in place, recording off);

and each run must finish with every call's result, the losses and the
weights of the plain run, bit for bit; the recorded runs' traces hold one
block a compute call and one transfer an op, per rank.

CASE "patch": the issue's user, who patches get_fwd_recv_ops and
get_bwd_recv_ops to count the receives and calls the originals by keyword,
runs Schedule1F1B under `pipescope-cli profile -- forkrun.py ...`: it finishes
with the plain run's results, and its trace has both ranks, every step and
one receive a counted op.

Each run is one TAP line.  The plain runs of all the cases are one job
(call-forms.py --cases), and a case's paused and recording-off runs one
job (paused first; the recording stopped before the second): runs that
record no trace of their own share processes.  Each profiled run is a job
of its own (the hook describes the schedule a process runs, once).
VAR names the variable holding the python of the PyTorch to use
(PIPESCOPE_TORCH_PYTHON, PIPESCOPE_TORCH211_PYTHON); without it the test
skips.
"""

import collections
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.normpath(os.path.join(HERE, "..", "..", "probe", "python"))
AUTO = os.path.join(PKG, "pipescope", "_autoload")

STEPS = 5
KINDS = {"forward_one_chunk": ("F",), "backward_one_chunk": ("B", "I"), "backward_weight_one_chunk": ("W",),
         "get_fwd_send_ops": ("SEND_F",), "get_bwd_send_ops": ("SEND_B",),
         "get_fwd_recv_ops": ("RECV_F",), "get_bwd_recv_ops": ("RECV_B",)}
MB_NAME = {"forward_one_chunk": "fwd_chunk_id", "get_fwd_send_ops": "fwd_chunk_id",
           "get_fwd_recv_ops": "fwd_chunk_id"}


class Fail(Exception):
    """A run's check failed: its message."""


def fail(msg):
    raise Fail(msg)


def run(cmd, env, what):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
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


def case_stderr(stderr, case, cases):
    """The lines a job of call-forms.py --cases CASES wrote while it ran
    case: from case's second "call-forms: case" line (both ranks past the
    barrier) to the next case's second one; the first case's from the
    job's start."""
    # a marker starts its own line even where two ranks' writes met on one
    # (CI once read "call-forms: case Xcall-forms: case X")
    lines = []
    for l in stderr.splitlines():
        parts = [p for p in re.split(r"(?=call-forms: case )", l) if p]
        lines += parts if len(parts) > 1 else [l]
    seen, out = {}, []
    now = cases[0]
    for l in lines:
        if l.startswith("call-forms: case "):
            c = l[len("call-forms: case "):]
            seen[c] = seen.get(c, 0) + 1
            if seen[c] == 2:
                now = c
            continue
        if now == case:
            out.append(l)
    if seen.get(case) != 2:
        fail(f"call-forms.py did not say case {case} once a rank: {stderr[-2000:]}")
    return "\n".join(out)


def main():
    cli, lib, var, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    py = os.environ.get(var)
    if not py or not os.path.exists(py):
        print(f"1..0 # SKIP {var} is not set (./dev.sh test installs PyTorch and sets it)")
        return 0
    runs = [(c, m) for c in cases for m in ("plain", "profile", "profile, PIPESCOPE_FAST=0")
            + (() if c == "patch" else ("every other step paused", "recording off"))]
    print(f"1..{len(runs)}")
    tmp = tempfile.mkdtemp(prefix="pp-torch-calls-")
    try:
        os.chmod(tmp, 0o700)
        return check(cli, lib, cases, runs, py, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(cli, lib, cases, runs, py, tmp):
    bindir = os.path.dirname(py)
    env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", ""), OMP_NUM_THREADS="1",
               XDG_RUNTIME_DIR=tmp)
    env.pop("PYTHONPATH", None)
    for k in ("PIPESCOPE_FAST", "PIPESCOPE_BENCH_ALTERNATE", "PIPESCOPE_TRACE", "PIPESCOPE_JOB"):
        env.pop(k, None)
    # profile loads the hook beside this test, with LIB, as the hooked runs do
    env.update(PIPESCOPE_PYTHON=PKG, PIPESCOPE_LIB=lib)
    hooked = dict(env, PYTHONPATH=AUTO, PIPESCOPE_JOB="calls")
    forms_py = [py, os.path.join(HERE, "forkrun.py"), "--standalone", "--nproc-per-node", "2",
                os.path.join(HERE, "call-forms.py"), "--steps", str(STEPS)]
    launches = [0]

    def launch(cmd, env, what):
        launches[0] += 1
        return run(cmd, env, what)

    def job(case):
        return forms_py + (["--schedule", "Schedule1F1B", "--patch"] if case == "patch" else ["--schedule", case])

    plain = os.path.join(tmp, "plain")
    plain_error, shared = None, {}
    try:
        launch(forms_py + ["--cases", ",".join(cases), "--out", plain], env, "the plain runs")
    except (Fail, subprocess.SubprocessError) as e:
        plain_error = str(e)
    failed = False
    for n, (case, mode) in enumerate(runs, 1):
        try:
            if plain_error is not None:
                fail(plain_error)
            said = one(cli, case, mode, results(os.path.join(plain, case)), job(case), env, hooked, tmp, n,
                       launch, forms_py, shared)
            print(f"ok {n} - {case}: {mode}: {said}")
        except (Fail, subprocess.SubprocessError, OSError, ValueError) as e:
            failed = True
            print(f"not ok {n} - {case}: {mode}: " + str(e).replace("\n", "\n# "))
        sys.stdout.flush()
    print(f"# {launches[0]} launches for {len(runs)} runs")
    return 1 if failed else 0


def one(cli, case, mode, want, job, env, hooked, tmp, n, launch, forms_py, shared):
    """One run of case in mode, checked against the plain run's results
    want: what it said, or Fail."""
    patch = case == "patch"
    if mode == "plain":
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
        forms = sum(len(v) for v in want[0]["forms"].values()) + sum(len(v) for v in want[1]["forms"].values())
        return (f"the issue's user's patch (the originals called by keyword), PyTorch {want[0]['torch']}"
                if patch else f"{forms} call forms, self and the micro-batch by keyword among them, "
                              f"PyTorch {want[0]['torch']}")
    if mode.startswith("profile"):
        extra = {"PIPESCOPE_FAST": "0"} if "FAST=0" in mode else {}
        out, trace = os.path.join(tmp, f"out-{n}"), os.path.join(tmp, f"t-{n}.pptrace")
        p = launch([cli, "profile", "--trace", trace, "--name", "calls", "--"] + job + ["--out", out],
                   dict(env, **extra), mode)
        said = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
        if any("not recording" in l or "recording stopped" in l for l in said) or "Traceback" in p.stderr:
            fail(f"the hook did not record throughout:\n{p.stderr[-3000:]}")
        same(want, results(out), mode)
        got = spans(cli, trace, tmp, env)
        for r in (0, 1):
            for name, kinds in KINDS.items():
                if patch and name not in ("get_fwd_recv_ops", "get_bwd_recv_ops"):
                    continue   # the user's job counts its receives only
                count = want[r]["ops" if name.startswith("get_") else "calls"].get(name, 0)
                if sum(got[(r, k)] for k in kinds) != count:
                    fail(f"rank {r} has {[got[(r, k)] for k in kinds]} {'/'.join(kinds)} spans "
                         f"for {count} {'ops of' if name.startswith('get_') else 'calls of'} {name}")
        info = run([cli, "info", trace], env, "info").stdout
        if "ranks: 2" not in info or f"steps: {STEPS}" not in info:
            fail(f"the trace lacks a rank or a step:\n{info}")
        return (f"results, losses and weights of the plain run bit for bit, every block and op recorded "
                f"({sum(got.values())} spans)")
    # the hook loaded, not profiled: every other step paused, then (the
    # same processes) recording stopped before the first step
    out = os.path.join(tmp, f"hooked-{case}")
    if case not in shared:
        shared[case] = launch(forms_py + ["--cases", f"{case},off:{case}", "--out", out],
                              dict(hooked, PIPESCOPE_BENCH_ALTERNATE="1"),
                              "the job paused every other step, then recording off").stderr
    if mode == "every other step paused":
        err = case_stderr(shared[case], case, [case, f"off:{case}"])
        if "Traceback" in err or "recording stopped" in err:
            fail(f"paused steps: {err[-3000:]}")
        same(want, results(os.path.join(out, case)), mode)
        return "results, losses and weights of the plain run bit for bit"
    err = case_stderr(shared[case], f"off:{case}", [case, f"off:{case}"])
    lines = [l for l in err.splitlines() if l.startswith("pipescope:")]
    if len(lines) != 2 or not all("recording stopped (the test" in l for l in lines):
        fail(f"the hook said {lines}, not one line a rank")
    same(want, results(os.path.join(out, f"off:{case}")), mode)
    return "one line a rank, results, losses and weights of the plain run bit for bit"


if __name__ == "__main__":
    sys.exit(main())
