#!/usr/bin/env python3
"""test-profile-live.py LIB CLI — issue 30, live equals saved.

A job profiled by `pipescope-cli profile` (profile-rank-writer.py pipe:
GPipe on 2 ranks as 2 processes, 150 steps 40 ms apart, the last stage
slower with each step, long enough for
profile to time a live plan while it runs), watched live by `record` from
its start, and saved by profile as its trace:

  1. profile's closing "live:" line (the steps analysed, the median step,
     each rank's measured bubble a step and bubble of the plan at measured
     costs, from what it served live) is what `info` prints for the saved
     trace;
  2. `info` on what the live viewer recorded gives the saved trace's
     numbers too: the same steps, median step, bubbles, and the same plan
     at measured costs (a viewer still attached ends with the saved plan,
     not the one timed a few seconds before the end).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from pp_tap import fail, ok  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WRITER = os.path.join(HERE, "profile-rank-writer.py")


def numbers(text):
    """info's numbers: steps analysed, median step, bubbles, plan's bubbles."""
    steps = re.search(r"^steps analysed: (.*)$", text, re.M)
    med = re.search(r"^median step: ([\d.]+) ms", text, re.M)
    bub = re.findall(r"^  rank (\d+) bubble: ([\d.]+%)", text, re.M)
    plan = re.search(r"^bubble, plan at measured costs \(the last plan of each rank, one step ([\d.]+) ms\): (.*)$",
                     text, re.M)
    return (steps and steps.group(1), med and med.group(1), bub,
            plan and re.findall(r"rank (\d+) ([\d.]+%)", plan.group(2)), plan and plan.group(1))


def live_line(err):
    m = re.search(r"^pipescope-cli: profile: live: (.*?); median step ([\d.]+) ms; measured bubble a step:(.*?)"
                  r"; bubble, plan at measured costs:(.*)$", err, re.M)
    if m is None:
        return None
    return (m.group(1), m.group(2), re.findall(r"rank (\d+) ([\d.]+%)", m.group(3)),
            re.findall(r"rank (\d+) ([\d.]+%)", m.group(4)))


def info(cli, trace):
    p = subprocess.run([cli, "info", trace], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"info {trace}: {p.stderr}")
    return p.stdout


def main():
    lib, cli = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pp-profile-live-")
    os.chmod(tmp, 0o700)
    os.mkdir(os.path.join(tmp, "run"), 0o700)
    os.environ.update(XDG_RUNTIME_DIR=os.path.join(tmp, "run"), PIPESCOPE_LIB=lib)
    for name in ("PIPESCOPE_TRACE", "PIPESCOPE_JOB_ID"):
        os.environ.pop(name, None)
    print("1..4")
    prof = None
    try:
        saved, live = os.path.join(tmp, "saved.pptrace"), os.path.join(tmp, "live.pptrace")
        hold = os.path.join(tmp, "viewer-attached")
        prof = subprocess.Popen([cli, "profile", "--name", "pipe", "--trace", saved, "--",
                                 sys.executable, WRITER, "pipe", "2", "150"],
                                cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PP_WRITER_HOLD=hold))
        # the viewer attaches as soon as the job is listed (before its ranks
        # start, as a rule: the writer waits 0.3 s), and records until it
        # ends; the job ends only once the viewer has written what it got
        # (it is attached), never before it on a loaded machine.  The
        # deadlines are hang guards.
        deadline = time.monotonic() + 120
        while "pipe " not in subprocess.run([cli, "jobs"], capture_output=True, text=True).stdout:
            if time.monotonic() > deadline or prof.poll() is not None:
                fail("jobs never listed the profiled job 'pipe'")
            time.sleep(0.05)
        rec = subprocess.Popen([cli, "record", "pipe", "-o", live], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        while not (os.path.exists(live) and os.path.getsize(live) > 0) and rec.poll() is None:
            if time.monotonic() > deadline:
                fail("record wrote nothing of the job in two minutes")
            time.sleep(0.05)
        open(hold, "w").close()
        rec_out, rec_err = rec.communicate(timeout=120)
        rec = subprocess.CompletedProcess(rec.args, rec.returncode, rec_out, rec_err)
        out, err = prof.communicate(timeout=120)
        if prof.returncode != 0 or rec.returncode != 0:
            fail(f"profile exited {prof.returncode}, record {rec.returncode}:\n{err}\n{rec.stderr}")
        s = numbers(info(cli, saved))
        if not (s[0] and s[1] and len(s[2]) == 2 and s[3] and len(s[3]) == 2 and s[4]):
            fail(f"the saved trace lacks its numbers: {s}")
        ok(f"the saved trace: {s[0]}, median step {s[1]} ms")

        lv = live_line(err)
        if lv is None:
            fail(f"profile printed no live summary:\n{err}")
        if lv != s[:4]:
            fail(f"profile's live summary {lv} is not info's on the saved trace {s}")
        ok("profile's live summary is info's on the saved trace (steps, median step, bubbles, plan's bubbles)")

        r = numbers(info(cli, live))
        if r[:3] != s[:3]:
            fail(f"the live recording's steps, median step and bubbles {r[:3]} are not the saved trace's {s[:3]}")
        ok("the live recording analyses the same steps to the same median step and bubbles")
        if r[3:] != s[3:]:
            fail(f"the live recording ends with the plan {r[3:]} (bubbles, step ms), the saved trace holds {s[3:]}")
        ok("the live recording ends with the saved trace's plan at measured costs")
    finally:
        if prof is not None and prof.poll() is None:
            prof.kill()
            prof.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
