#!/usr/bin/env python3
"""test-straggler-jobs.py CLI — stragglers in real jobs (issue 38): a job
profiled twice, as it is and with one process slowed on purpose (a sleep
of 0.1 s in each of its forwards), for

  * torch-ddp: tests/pytorch/mesh-train.py's layout ddp (PyTorch's
    pipelining, pp 2 x dp 2 in DDP, 4 processes), process 1 slowed;
  * megatron-dp: tests/pytorch/megatron-train.py's pp 2 x dp 2 with
    megatron-core's DDP (4 processes), process 1 slowed (skipped without
    megatron-core).

Each case asserts (straggler_check.compare): the slowed job's straggler
table, in info and in export --format why, names the slowed process
first (at its place in the mesh, for torch-ddp: the place the job
computed itself); its predicted saving a step agrees within 35 % with the
saving measured (the slowed job's median step less the job's as it is:
two measurements of this test, no bound on a time); the job as it is
names no straggler worth a quarter of that.

The one test of the framework jobs that compares measured times: it runs
alone (is_parallel: false in meson), and it alone, so that the jobs the
other framework tests run, whose checks time nothing, go beside other
tests (issue 42: a serial test leaves a core idle).  Needs
PIPESCOPE_TORCH_PYTHON; without it exits 0 with a SKIP line.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import straggler_check  # noqa: E402

SLOW, SLOW_S = 1, 0.1   # process SLOW sleeps SLOW_S in each forward
FORKRUN = os.path.join(HERE, "forkrun.py")
CASES = {
    # name: (the job's program, its options, forkrun's preload, the file of a process's results)
    "torch-ddp": ("mesh-train.py", ["--layout", "ddp", "--steps", "2", "--microbatches", "4"], [],
                  "process{g}.json"),
    "megatron-dp": ("megatron-train.py", ["--pp", "2", "--vp", "1", "--microbatches", "4", "--steps", "2",
                                          "--per-token", "--megatron-ddp"],
                    ["--framework", "megatron"], None),
}


class Failed(Exception):
    """A case's check failed: its TAP line says why."""


def fail(msg):
    raise Failed(msg)


def run(cmd, env, what, timeout=400):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def case(cli, py, name, env, tmp):
    program, args, preload, results = CASES[name]
    job = [py, FORKRUN] + preload + ["--standalone", "--nproc-per-node", "4", os.path.join(HERE, program)] + args
    traces = {}
    for kind, extra in (("even", []), ("slow", ["--slow-forward", f"{SLOW}:{SLOW_S}"])):
        d = os.path.join(tmp, name, kind)
        os.makedirs(d)
        traces[kind] = os.path.join(d, "job.pptrace")
        p = run([cli, "profile", "--trace", traces[kind], "--name", f"{name}-{kind}", "--"] + job + extra
                + ["--out", os.path.join(d, "out")], env, f"the {kind} run")
        for bad in ("not recording", "recording stopped"):
            if bad in p.stderr:
                fail(f"the {kind} run: the hook said '{bad}':\n{p.stderr[-3000:]}")
    place = None
    if results:   # the slowed process's place, as the job computed it
        got = json.load(open(os.path.join(tmp, name, "even", "out", results.format(g=SLOW))))
        place = got["coord"]
    said = straggler_check.compare(cli, env, run, fail, traces["slow"], traces["even"], SLOW, place)
    return f"{name}: process {SLOW} sleeping {SLOW_S} s in each forward" + said


def main():
    cli = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        return 0
    has_megatron = subprocess.run([py, "-c", "import megatron.core"], capture_output=True).returncode == 0
    print(f"1..{len(names)}", flush=True)
    tmp = tempfile.mkdtemp(prefix="pp-straggler-jobs-")
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_RUNTIME_DIR=tmp)
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    os.chmod(tmp, 0o700)
    failed = 0
    try:
        for i, name in enumerate(names, 1):
            if name.startswith("megatron") and not has_megatron:
                print(f"ok {i} # SKIP {name}: megatron-core is not installed in {py}", flush=True)
                continue
            try:
                print(f"ok {i} - {case(cli, py, name, env, tmp)}", flush=True)
            except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
                failed += 1
                print(f"not ok {i} - {name}: " + str(e).replace("\n", "\n# "), flush=True)
    finally:
        if os.environ.get("PP_TEST_KEEP"):
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
