#!/usr/bin/env python3
"""test-stuck.py CLI — stuck PyTorch jobs under `pipescope-cli profile
--hang-after` (issue 37, docs/stuck.md), one test of several jobs (each a
launch of its own: a hung job cannot be reused; forward under torchrun,
whose process tree profile ends, the others under forkrun.py, issue 42):

  forward   PP 2 x DP 2 (mesh-train.py --layout ddp), process 3 (pp 1 dp 1)
            sleeps for ever inside its second forward of step 1: the
            diagnosis names it the root, in F mb 1 of step 1, at the job's
            own frame (mesh-train.py ... hanging), and every other process
            waits for it;
  deadlock  a CSV schedule with comm actions (PyTorch's compute_comms
            format, as in PyTorch #172668) whose ranks each receive before
            they send: a cycle of two receives, processes 0 and 1;
  microbatches  ranks that disagree on the number of micro-batches
            (train.py --last-microbatches: 1F1B, M=4 on rank 0, 6 on rank
            1): rank 0 ends its steps and waits in the job's end barrier,
            outside any action, while rank 1 waits for a forward that never
            comes: process 0 is the root, at the job's own line
            (train.py ... main); the merge keeps both ranks' files as one
            job, said in a warning;
  megatron  megatron-core (megatron-train.py, PP 2 x DP 2, its DDP), process
            3 (pp 1 dp 1) asleep in its forward_step of step 1: the root,
            every other process waiting for it;
  deepspeed DeepSpeed's PipelineEngine (deepspeed-train.py, pp 2 x dp 2),
            process 3 asleep in a forward of step 1: the root, in its F, at
            the job's own frame, the other three waiting for it.

Each asserts profile's own exit code (3), the diagnosis it prints, that the
trace is kept, and that `info` on the trace prints the same root or cycle
(from the OPEN frames, format 1.10).  Nothing timed is asserted: the hang
is detected after --hang-after seconds of no progress, whenever that is.  A
job that does not end is killed by the test (its process group) at worst.
Needs PIPESCOPE_TORCH_PYTHON.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HANG_AFTER = "4"
FORKRUN = os.path.join(HERE, "forkrun.py")
EXIT_STUCK = 3


def run(cmd, env, timeout=300):
    """cmd's (returncode, stdout, stderr); a run past timeout is killed
    whole (its process group) and reported as returncode None."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err


def profiled(cli, env, tmp, name, job):
    trace = os.path.join(tmp, name + ".pptrace")
    rc, out, err = run([cli, "profile", "--hang-after", HANG_AFTER, "--trace", trace, "--name", name, "--"]
                       + job, env)
    return rc, err, trace


def info(cli, env, trace):
    rc, out, err = run([cli, "info", trace], env, timeout=120)
    return rc, out + err


def kept(cli, env, trace, pattern, what, problems):
    """The trace was kept, and `info` on it prints what matches pattern (what
    profile said: the root or the cycle); else what is wrong, into problems."""
    if not os.path.exists(trace):
        problems.append("the trace was not kept")
        return
    irc, text = info(cli, env, trace)
    if irc != 0 or not pattern.search(text):
        problems.append(f"info on the trace (exit {irc}) does not print {what}:\n{text[-1500:]}")


def check_forward(cli, py, env, tmp):
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    job = [torchrun, "--standalone", "--nproc-per-node", "4", os.path.join(HERE, "mesh-train.py"),
           "--layout", "ddp", "--steps", "3", "--microbatches", "4", "--out", os.path.join(tmp, "fwd-out"),
           "--hang-process", "3", "--hang-step", "1", "--hang-mb", "1"]
    rc, err, trace = profiled(cli, env, tmp, "forward", job)
    problems = []
    if rc != EXIT_STUCK:
        problems.append(f"profile exited {rc}, not {EXIT_STUCK} (the job ended by --hang-after)")
    root = re.compile(r"^stuck: process 3 \(pp 1 dp 1, host [^,]+, pid \d+\) in F mb 1 of step 1 for \d+ s, "
                      r"in mesh-train\.py:\d+ hanging; processes 0, 1, 2 wait for it: (.*)$", re.M)
    m = root.search(err)
    if m is None:
        problems.append("profile's diagnosis does not name process 3 the root, in its forward")
    elif "2 in the dp all-reduce of stage 1" not in m.group(1) or "1 in RECV_B mb 1 from 3" not in m.group(1):
        problems.append(f"the waits are not process 1's receive from 3 and process 2's all-reduce: {m.group(1)}")
    kept(cli, env, trace, root, "the same root", problems)
    return problems, err


def check_deadlock(cli, py, env, tmp):
    launcher = [py, FORKRUN]
    csv_file = os.path.join(tmp, "deadlock.csv")
    with open(csv_file, "w") as f:
        # rank 0 needs stage 1's gradient (B0) before it sends its forward;
        # rank 1 needs that forward first
        f.write("0F0,0RECV_B0,0B0,0SEND_F0,0WAIT_SEND_F0\n"
                "1RECV_F0,1F0,1SEND_B0,1B0,1WAIT_SEND_B0\n")
    job = launcher + ["--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"), "--csv", csv_file,
           "--csv-format", "compute_comms", "--stages-per-rank", "1", "--microbatches", "1", "--steps", "2",
           "--out", os.path.join(tmp, "dl-out")]
    rc, err, trace = profiled(cli, env, tmp, "deadlock", job)
    problems = []
    if rc != EXIT_STUCK:
        problems.append(f"profile exited {rc}, not {EXIT_STUCK}")
    cycle = re.compile(r"^stuck: deadlock: process 0 \(pp 0[^)]*\) in RECV_B mb 0 from 1 of step 0 for \d+ s[^;]*, "
                       r"process 1 \(pp 1[^)]*\) in RECV_F mb 0 from 0 of step 0 for \d+ s[^;]*; each waits for the "
                       r"next, none can go on$", re.M)
    if not cycle.search(err):
        problems.append("profile's diagnosis is not the cycle of processes 0 and 1")
    kept(cli, env, trace, cycle, "the cycle", problems)
    return problems, err


def check_microbatches(cli, py, env, tmp):
    launcher = [py, FORKRUN]
    job = launcher + ["--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"), "--schedule",
           "Schedule1F1B", "--microbatches", "4", "--last-microbatches", "6", "--steps", "2",
           "--out", os.path.join(tmp, "mb-out")]
    rc, err, trace = profiled(cli, env, tmp, "microbatches", job)
    problems = []
    if rc != EXIT_STUCK:
        problems.append(f"profile exited {rc}, not {EXIT_STUCK}")
    root = re.compile(r"^stuck: process 0 \(pp 0[^)]*\) in no recorded action for \d+ s, in train\.py:\d+ main; "
                      r"process 1 waits for it: 1 in RECV_F mb \d+ from 0$", re.M)
    if not root.search(err):
        problems.append("profile's diagnosis does not name process 0 (in the end barrier) the root")
    if "disagree on the number of micro-batches" not in err:
        problems.append("the merge did not say the ranks disagree on the number of micro-batches")
    kept(cli, env, trace, root, "the same root", problems)
    return problems, err


def check_megatron(cli, py, env, tmp):
    try:
        subprocess.run([py, "-c", "import megatron.core"], check=True, capture_output=True, timeout=120)
    except Exception:
        return None, "megatron-core is not installed beside PIPESCOPE_TORCH_PYTHON"
    launcher = [py, FORKRUN, "--framework", "megatron"]
    job = launcher + ["--standalone", "--nproc-per-node", "4", os.path.join(HERE, "megatron-train.py"),
           "--pp", "2", "--microbatches", "4", "--steps", "3", "--megatron-ddp", "--hang-process", "3",
           "--out", os.path.join(tmp, "mg-out")]
    rc, err, trace = profiled(cli, env, tmp, "megatron", job)
    problems = []
    if rc != EXIT_STUCK:
        problems.append(f"profile exited {rc}, not {EXIT_STUCK}")
    root = re.compile(r"^stuck: process 3 \(pp 1 dp 1, host [^,]+, pid \d+\) in F mb 1 of step 1 for \d+ s, "
                      r"in megatron-train\.py:\d+ forward_step; processes 0, 1, 2 wait for it: ", re.M)
    m = root.search(err)
    if m is None:
        problems.append("profile's diagnosis does not name process 3 the root, in its forward_step")
    elif "1 in RECV_B from 3" not in err[m.end():].split("\n")[0]:
        problems.append("process 1's wait is not named as its receive of a gradient from 3")
    kept(cli, env, trace, root, "the same root", problems)
    return problems, err


def check_deepspeed(cli, py, env, tmp):
    if subprocess.run([py, "-c", "import deepspeed.runtime.pipe.engine"], env=env, capture_output=True,
                      timeout=300).returncode != 0:
        return None, "DeepSpeed is not installed beside PIPESCOPE_TORCH_PYTHON"
    job = [py, FORKRUN, "--standalone", "--nproc-per-node", "4", os.path.join(HERE, "deepspeed-train.py"),
           "--pp", "2", "--microbatches", "4", "--steps", "3", "--hang-process", "3",
           "--out", os.path.join(tmp, "ds-out")]
    rc, err, trace = profiled(cli, env, tmp, "deepspeed", job)
    problems = []
    if rc != EXIT_STUCK:
        problems.append(f"profile exited {rc}, not {EXIT_STUCK}")
    root = re.compile(r"^stuck: process 3 \(pp 1 dp 1, host [^,]+, pid \d+\) in F mb \d+ of step 1 for \d+ s, "
                      r"in deepspeed-train\.py:\d+ hanging; processes 0, 1, 2 wait for it: .*$", re.M)
    if not root.search(err):
        problems.append("profile's diagnosis does not name process 3 the root, in its forward")
    kept(cli, env, trace, root, "the same root", problems)
    return problems, err


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        return 0
    cases = [("a process asleep in a forward of PP 2 x DP 2 is the root", check_forward),
             ("a deadlock of two receives (a CSV schedule) is a cycle", check_deadlock),
             ("ranks that disagree on the micro-batches: the one that ended is the root", check_microbatches),
             ("a megatron-core process asleep in a forward is the root", check_megatron),
             ("a DeepSpeed process asleep in a forward is the root", check_deepspeed)]
    print(f"1..{len(cases)}")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(py) + ":" + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    tmp = tempfile.mkdtemp(prefix="pp-stuck-")
    env["XDG_RUNTIME_DIR"] = tmp   # a registry of the test's own
    os.chmod(tmp, 0o700)
    failed = 0
    try:
        for i, (what, fn) in enumerate(cases, 1):
            problems, err = fn(cli, py, env, tmp)
            if problems is None:
                print(f"ok {i} - {what} # SKIP {err}")
            elif problems:
                failed += 1
                print(f"not ok {i} - {what}")
                for line in ("\n".join(problems) + "\nprofile said:\n" + err[-3000:]).splitlines():
                    print("# " + line)
            else:
                print(f"ok {i} - {what}")
                for line in re.findall(r"^stuck: .*$", err, re.M)[:1]:
                    print("# " + line)   # what profile said
    finally:
        if os.environ.get("PP_TEST_KEEP"):
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
