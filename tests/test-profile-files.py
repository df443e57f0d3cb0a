#!/usr/bin/env python3
"""test-profile-files.py LIB CLI — profile never destroys a trace.

The job is profile-rank-writer.py (its ranks written through lib.py, no
PyTorch).  Each check asserts files, exit codes and one-line messages:

  1. A command that changes folder before its ranks open: the trace is
     written where profile was started (a relative --trace, and the default
     NAME.pptrace), nothing lands in the command's folder, no rank file is
     left.
  2. The writability check leaves FILE.rank0 (another run's only copy)
     byte for byte, and no file of its own; a folder that does not exist:
     exit 2 and one line.
  3. Rank files of other runs beside the trace (a 4-rank run with a job id,
     and files at the trace's own name from an older pipescope, format 1.2)
     are neither merged nor touched: a 2-rank job gives a trace of P=2, a
     job with no ranks gives none; one line for each earlier run names its
     merge command, which works.
  4. profile SIGKILLed: its job ends with it (the parent-death signal); a
     profile run meanwhile with the same --trace says the files are another
     run's, still being written; the next one says how to merge what the
     killed run left, which works.
  5. A file size limit at the merge (prlimit --fsize, as a full disk): exit
     1 (the command's 0, said in the line), no trace file at all, the
     ranks' files kept, one line with the merge command, which then works.
  6. A job of 2 pipeline ranks x 2 replicas, a process each, placed on the
     mesh (issue 27): "4 processes recorded (pp 2 × dp 2 × tp 1)", the four
     files TRACE.ID.rank<G> merged into a trace of 4 processes; processes
     4094 to 4097 (global ranks past 4095, issue 40) are merged too; a
     file of global rank 65535 (past the format's) is named, kept, and
     profile exits 1.
  7. 4,100 rank files of an earlier run beside the trace: the line says
     all 4,100 (it looked at 4,096 at most, and said nothing of the rest).
"""

import glob
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from pp_tap import fail, ok  # noqa: E402 (tests/ is the script's folder, on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
WRITER = os.path.join(HERE, "profile-rank-writer.py")
TIMEOUT = 120


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def profile(cli, d, args, command, **kw):
    return run([cli, "profile"] + args + ["--"] + command, cwd=d, **kw)


def writer(*args):
    return [sys.executable, WRITER] + [str(a) for a in args]


def digests(paths):
    return {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths}


def lines(text, word):
    return [x for x in text.splitlines() if word in x]


def merge_command(line):
    """The command a line of profile's ends with (after 'merge them with: ')."""
    cmd = line.split("merge them with: ", 1)[1]
    if not cmd.startswith("pipescope-cli merge -o "):
        fail(f"not a merge command: {line}")
    return cmd


def run_merge(cli, cmd):
    """Runs the command as a shell would (its glob too), with this CLI."""
    return run(["sh", "-c", shlex.quote(cli) + cmd[len("pipescope-cli"):]], cwd="/")


def schedule_line(cli, path):
    p = run([cli, "info", path])
    if p.returncode != 0:
        fail(f"info {path}: {p.stderr}")
    return next((x for x in p.stdout.splitlines() if x.startswith("schedule: ")), "")


def gone(pid):
    """The process has ended (a zombie counts: nothing runs)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(what, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.1)
    return what()


def check_folder_change(cli, tmp):
    d = os.path.join(tmp, "cd")
    os.makedirs(os.path.join(d, "elsewhere"))
    p = profile(cli, d, ["--trace", "t.pptrace"], writer("write", 2, "elsewhere"))
    q = profile(cli, d, ["--name", "cdjob"], writer("write", 2, "elsewhere"))
    for r, name in ((p, "t.pptrace"), (q, "cdjob.pptrace")):
        if r.returncode != 0 or "merged 2 traces of GPipe (P=2)" not in r.stderr:
            fail(f"profile ({name}) of a job that changes folder: exit {r.returncode}:\n{r.stderr}")
        if "GPipe (P=2" not in schedule_line(cli, os.path.join(d, name)):
            fail(f"{name} is not the 2-rank job's trace")
    if os.listdir(os.path.join(d, "elsewhere")):
        fail(f"files in the command's folder: {os.listdir(os.path.join(d, 'elsewhere'))}")
    if sorted(os.listdir(d)) != ["cdjob.pptrace", "elsewhere", "t.pptrace"]:
        fail(f"left beside the traces: {sorted(os.listdir(d))}")
    ok("a job that changes folder: --trace t.pptrace and the default NAME.pptrace are written where profile "
       "ran, nothing where the job went, no rank file left")


def check_writability(cli, tmp):
    d = os.path.join(tmp, "probe")
    os.mkdir(d)
    only_copy = os.path.join(d, "t.pptrace.rank0")
    with open(only_copy, "wb") as f:
        f.write(b"a killed run's only copy\n")
    before = digests([only_copy])
    p = profile(cli, d, ["--trace", "t.pptrace"], [sys.executable, "-c", "print('hello')"])
    if p.returncode != 1 or p.stdout != "hello\n":   # 1: no trace, which --trace promised
        fail(f"profile of 'hello': exit {p.returncode}, stdout {p.stdout!r}:\n{p.stderr}")
    if not os.path.exists(only_copy) or digests([only_copy]) != before:
        fail("the writability check changed or removed t.pptrace.rank0")
    if sorted(os.listdir(d)) != ["t.pptrace.rank0"]:
        fail(f"profile left files of its own: {sorted(os.listdir(d))}")
    p = profile(cli, d, ["--trace", "no-such-folder/t.pptrace"], ["true"])
    said = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(said) != 1 or "cannot write in" not in said[0] or "no-such-folder" not in said[0]:
        fail(f"a trace in a folder that does not exist: exit {p.returncode}, stderr {p.stderr!r}")
    ok("the writability check leaves t.pptrace.rank0 as it was and nothing of its own; a missing folder: "
       "exit 2, one line")


def check_leftovers(cli, tmp):
    d = os.path.join(tmp, "leftovers")
    os.mkdir(d)
    trace = os.path.join(d, "t.pptrace")
    other = "00000000c0ffee42"
    r = run(writer("write", 4), cwd=d, env=dict(os.environ, PIPESCOPE_TRACE=f"{trace}.{other}",
                                               PIPESCOPE_JOB_ID=other))
    s = run(writer("write", 4), cwd=d, env=dict(os.environ, PIPESCOPE_TRACE=trace))
    if r.returncode != 0 or s.returncode != 0:
        fail(f"writing the leftovers: {r.stderr} {s.stderr}")
    olds = sorted(glob.glob(trace + ".rank*"))
    for path in olds:   # as pipescope before the job id wrote them: format 1.2
        with open(path, "r+b") as f:
            f.seek(14)
            f.write((2).to_bytes(2, "little"))
    left = sorted(glob.glob(trace + ".*rank*"))
    if len(left) != 8 or len(olds) != 4:
        fail(f"the leftovers are not what the test means: {left}")
    before = digests(left)
    p = profile(cli, d, ["--trace", "t.pptrace"], [sys.executable, "-c", "print('hello')"])
    if p.returncode != 1 or os.path.exists(trace) or "no rank wrote a trace" not in p.stderr:
        fail(f"a job with no ranks next to leftovers: exit {p.returncode}, trace there: "
             f"{os.path.exists(trace)}:\n{p.stderr}")
    p = profile(cli, d, ["--trace", "t.pptrace"], writer("write", 2))
    if p.returncode != 0 or "merged 2 traces of GPipe (P=2)" not in p.stderr:
        fail(f"a 2-rank job next to leftovers: exit {p.returncode}:\n{p.stderr}")
    if "GPipe (P=2" not in schedule_line(cli, trace):
        fail(f"the trace is not the 2-rank job's: {schedule_line(cli, trace)}")
    if digests(sorted(glob.glob(trace + ".*rank*"))) != before:
        fail("the leftovers were changed, removed or joined by new files")
    said = lines(p.stderr, "an earlier run")
    by_id = [x for x in said if other in x and "4 rank files" in x]
    no_id = [x for x in said if "(no job id)" in x and "4 rank files" in x]
    if len(said) != 2 or len(by_id) != 1 or len(no_id) != 1:
        fail(f"not one line for each earlier run:\n{p.stderr}")
    for line, n in ((by_id[0], 4), (no_id[0], 4)):
        m = run_merge(cli, merge_command(line))
        if m.returncode != 0 or f"merged {n} traces of GPipe (P=4)" not in m.stdout:
            fail(f"the merge command profile gave ({merge_command(line)}): exit {m.returncode}:\n{m.stderr}")
    ok("other runs' rank files (a job id's, format 1.2's at the trace's name) neither merged nor touched: "
       "P=2 from the 2-rank job, no trace from 'hello', one line each whose merge command works")


def check_killed(cli, tmp):
    d = os.path.join(tmp, "killed")
    os.mkdir(d)
    trace = os.path.join(d, "t.pptrace")
    pidfile = os.path.join(d, "job.pid")
    a = subprocess.Popen([cli, "profile", "--trace", "t.pptrace", "--"] + writer("hold", pidfile), cwd=d,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    job = None
    try:
        if not wait_for(lambda: os.path.exists(pidfile)):
            fail("the held job never started recording")
        job = int(open(pidfile).read())
        files = glob.glob(trace + ".*.rank0")
        if len(files) != 1:
            fail(f"the held job's rank file: {files}")
        held = files[0]
        run_id = held[len(trace) + 1:-len(".rank0")]
        b = profile(cli, d, ["--trace", "t.pptrace"], ["true"])
        busy = lines(b.stderr, "still running")
        # 1: `true` leaves no trace, which --trace promised
        if b.returncode != 1 or len(busy) != 1 or run_id not in busy[0] or not os.path.exists(held):
            fail(f"a profile beside a running one with the same --trace:\n{b.stderr}")
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=TIMEOUT)
        if not wait_for(lambda: gone(job)):
            fail(f"profile SIGKILLed: its job (pid {job}) still runs")
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
        if job is not None and not gone(job):
            os.kill(job, signal.SIGTERM)   # the test failed: the job is not left running
    if "GPipe (P=1" not in schedule_line(cli, held):
        fail("the killed run's rank file is not readable")
    c = profile(cli, d, ["--trace", "t.pptrace"], ["true"])
    said = lines(c.stderr, "an earlier run")
    if c.returncode != 1 or len(said) != 1 or run_id not in said[0] or not os.path.exists(held):
        fail(f"the profile after a killed one does not say what it left:\n{c.stderr}")
    m = run_merge(cli, merge_command(said[0]))
    if m.returncode != 0 or "merged 1 trace of GPipe (P=1)" not in m.stdout:
        fail(f"merging what the killed run left: exit {m.returncode}:\n{m.stdout}{m.stderr}")
    ok("profile SIGKILLed: its job ends; beside it a second profile says its files are still written; "
       "the next one says how to merge them, and that merge works")


def check_full(cli, tmp):
    d = os.path.join(tmp, "full")
    os.mkdir(d)
    trace = os.path.join(d, "t.pptrace")
    limit = ["prlimit", "--fsize=2048:unlimited", "--"] if shutil.which("prlimit") else []
    pre = None
    if not limit:
        import resource
        def pre():
            resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))
    p = run(limit + [cli, "profile", "--trace", "t.pptrace", "--"] + writer("write", 2), cwd=d, preexec_fn=pre)
    kept = sorted(glob.glob(trace + ".*.rank*"))
    said = lines(p.stderr, "files are kept")
    if p.returncode != 1 or p.stdout != "wrote 2 ranks\n" \
            or "the command exited 0, but no trace was written" not in "".join(said):
        fail(f"the merge past the limit: exit {p.returncode} (the command's is 0, the trace missing):\n{p.stderr}")
    if os.path.exists(trace):
        fail(f"a trace of {os.path.getsize(trace)} bytes left by a merge that failed")
    if len(kept) != 2 or len(said) != 1 or trace not in said[0]:
        fail(f"the ranks' files ({kept}) kept, and one line saying so:\n{p.stderr}")
    m = run_merge(cli, merge_command(said[0]))
    if m.returncode != 0 or "merged 2 traces of GPipe (P=2)" not in m.stdout or not os.path.exists(trace):
        fail(f"the merge command profile gave: exit {m.returncode}:\n{m.stderr}")
    ok("a file size limit at the merge: exit 1 (the command's 0, said), no trace file, both rank files kept, one line "
       "whose merge command then works")


def check_refused_names(cli, tmp):
    """A --trace that merge would fail on, or that names another run's rank
    file, is refused before the command runs (it would run for hours and
    then lose its trace, or the other run's)."""
    d = os.path.join(tmp, "names")
    os.mkdir(d)
    os.mkdir(os.path.join(d, "adir"))
    other = "00000000c0ffee42"
    trace = os.path.join(d, "t.pptrace")
    r = run(writer("write", 2), cwd=d, env=dict(os.environ, PIPESCOPE_TRACE=f"{trace}.{other}",
                                               PIPESCOPE_JOB_ID=other))
    if r.returncode != 0:
        fail(f"writing another run's rank files: {r.stderr}")
    rank0 = f"t.pptrace.{other}.rank0"
    before = digests(sorted(glob.glob(trace + ".*rank*")))
    marker = os.path.join(d, "ran")
    for given, words in (("adir", "is a folder"), (".", "is a folder"), (rank0, "is a rank file of run")):
        p = profile(cli, d, ["--trace", given], ["touch", marker])
        said = p.stderr.strip().splitlines()
        if p.returncode != 2 or len(said) != 1 or words not in said[0]:
            fail(f"--trace {given}: exit {p.returncode}, stderr {p.stderr!r}")
        if os.path.exists(marker):
            fail(f"--trace {given}: the command ran before the refusal")
    if digests(sorted(glob.glob(trace + ".*rank*"))) != before:
        fail("another run's rank files were changed")
    ok("--trace naming a folder or another run's rank file: exit 2, one line, before the command runs; "
       "the rank files as they were")


def check_mesh(cli, tmp):
    d = os.path.join(tmp, "mesh")
    os.mkdir(d)
    trace = os.path.join(d, "t.pptrace")
    p = profile(cli, d, ["--trace", "t.pptrace", "--name", "meshjob"], writer("mesh", 2, 2))
    if p.returncode != 0 or p.stdout != "wrote 4 processes\n":
        fail(f"profile of a 2 x 2 mesh: exit {p.returncode}, stdout {p.stdout!r}:\n{p.stderr}")
    if len(lines(p.stderr, "meshjob: 4 processes recorded (pp 2 \u00d7 dp 2 \u00d7 tp 1)")) != 1:
        fail(f"profile does not count 4 processes on a 2 x 2 mesh:\n{p.stderr}")
    if "merged 4 traces of GPipe (P=2, 4 processes)" not in p.stderr or glob.glob(trace + ".*rank*"):
        fail(f"the 4 processes' files not merged (left: {glob.glob(trace + '.*rank*')}):\n{p.stderr}")
    info = run([cli, "info", trace]).stdout
    if "processes: 4 (pp 2 \u00d7 dp 2 \u00d7 tp 1)" not in info or "process 3: pp 1 dp 1 tp 0" not in info:
        fail(f"info of the profiled 2 x 2 mesh:\n{info}")
    # issue 36: profile's closing line carries info's numbers (the median
    # copy's steps, not the first replica's it timed the live plan with)
    live = lines(p.stderr, "profile: live: ")
    med = re.search(r"^median step: ([\d.]+) ms", info, re.M)
    bub = re.findall(r"^  rank (\d+) bubble: ([\d.]+%)", info, re.M)
    if len(live) != 1 or med is None or f"median step {med.group(1)} ms" not in live[0] \
            or any(f"rank {r} {b}" not in live[0] for r, b in bub):
        fail(f"profile's closing line is not info's (median step {med and med.group(1)}, {bub}):\n{live}")
    os.unlink(trace)
    p = profile(cli, d, ["--trace", "t.pptrace", "--name", "highjob"], writer("mesh", 1, 2, 4094))
    if p.returncode != 0 or "merged 2 traces of GPipe (P=1, 2 processes)" not in p.stderr:
        fail(f"profile of processes 4094 and 4095: exit {p.returncode}:\n{p.stderr}")
    if "process 4095: pp 0 dp 1 tp 0" not in run([cli, "info", trace]).stdout:
        fail("process 4095 is not in the trace")
    # issue 40: global ranks past 4095 merged too (pipeline rank 1 was
    # missing, its files left without a word, exit 0)
    os.unlink(trace)
    p = profile(cli, d, ["--trace", "t.pptrace", "--name", "highjob"], writer("mesh", 2, 2, 4094))
    if p.returncode != 0 or "merged 4 traces of GPipe (P=2, 4 processes)" not in p.stderr \
            or glob.glob(trace + ".*rank*"):
        fail(f"profile of processes 4094 to 4097: exit {p.returncode}, left {glob.glob(trace + '.*rank*')}:\n"
             f"{p.stderr}")
    info = run([cli, "info", trace]).stdout
    if "process 4097: pp 1 dp 1 tp 0" not in info or "process 4096: pp 1 dp 0 tp 0" not in info:
        fail(f"processes 4096 and 4097 are not in the trace:\n{info}")
    # the limit that remains (global ranks below 65535, the format's) said
    # with the file it left out, and not 0
    os.unlink(trace)
    p = profile(cli, d, ["--trace", "t.pptrace", "--name", "edgejob"], writer("mesh", 1, 2, 65534))
    left = glob.glob(trace + ".*rank65535")
    said = [x for x in p.stderr.splitlines() if "global rank past 65534" in x]
    if p.returncode == 0 or len(left) != 1 or len(said) != 1 or left[0] not in said[0]:
        fail(f"profile of processes 65534 and 65535: exit {p.returncode}, left {left}:\n{p.stderr}")
    for f in left:
        os.unlink(f)
    ok("a 2 x 2 mesh: 4 processes recorded (pp 2 x dp 2 x tp 1), merged, in info; processes 4094 to 4097 "
       "merged; a rank file past the format's processes named, kept, exit 1")


def check_many_leftovers(cli, tmp):
    d = os.path.join(tmp, "many-leftovers")
    os.mkdir(d)
    trace = os.path.join(d, "t.pptrace")
    other = "00000000c0ffee43"
    r = run(writer("write", 1), cwd=d, env=dict(os.environ, PIPESCOPE_TRACE=f"{trace}.{other}",
                                               PIPESCOPE_JOB_ID=other))
    first = f"{trace}.{other}.rank0"
    if r.returncode != 0 or not os.path.exists(first):
        fail(f"writing the leftover: {r.stderr}")
    for g in range(1, 4100):
        shutil.copyfile(first, f"{trace}.{other}.rank{g}")
    p = profile(cli, d, ["--trace", "t.pptrace"], [sys.executable, "-c", "print('hello')"])
    said = lines(p.stderr, "an earlier run")
    if p.returncode != 1 or len(said) != 1 or other not in said[0] or "left 4100 rank files" not in said[0]:
        fail(f"4,100 rank files of an earlier run: exit {p.returncode}, {said[:1]!r:.400}")
    if len(glob.glob(f"{trace}.{other}.rank*")) != 4100:
        fail("the earlier run's rank files were touched")
    ok("4,100 rank files of an earlier run: one line says all 4,100, none touched")


CHECKS = [check_folder_change, check_writability, check_leftovers, check_killed, check_full,
          check_refused_names, check_mesh, check_many_leftovers]


def main():
    lib, cli = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pp-profile-files-")
    os.chmod(tmp, 0o700)
    os.mkdir(os.path.join(tmp, "run"), 0o700)
    os.environ.update(XDG_RUNTIME_DIR=os.path.join(tmp, "run"), PIPESCOPE_LIB=lib)
    for name in ("PIPESCOPE_TRACE", "PIPESCOPE_JOB_ID"):
        os.environ.pop(name, None)
    print(f"1..{len(CHECKS)}")
    try:
        for check in CHECKS:
            check(cli, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
