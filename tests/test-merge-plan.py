#!/usr/bin/env python3
"""test-merge-plan.py LIB CLI — merge times a plan the ranks wrote untimed.

A PyTorch job recorded with pipescope.torch.instrument() in its script
writes one trace a rank, each with its own rank's plan and no times;
`pipescope-cli merge` joins them.  It must give what profile gives: the
job's plan simulated with the costs the ranks measured, as timed PLAN
frames.  The ranks here are written through probe/python/pipescope/lib.py
(no PyTorch needed): 1F1B, P=2, M=4, three steps with known block costs.

  1. merge: exit 0, one line on stderr saying it planned the job, and
     `info` on the result has the bubble of the plan at measured costs.
  2. profile over a command that writes the same ranks' traces: its trace's
     PLAN frames are byte for byte those of merge's, and it says the same
     "planned ..." line.
  3. No plan in any rank's trace: merge still succeeds, says in one line on
     stderr why the plan stays untimed, and `info` has no plan's bubble.
  4. Plans but no block at all (nothing measured): the same, and no
     half-timed file is left beside the merged trace.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, "..", "probe", "python"))
sys.path.insert(0, PYDIR)
from pp_tap import fail, ok  # noqa: E402 (tests/ is the script's folder, on sys.path)

P, M = 2, 4
COST = {("F", 0): 1_000_000, ("F", 1): 1_500_000, ("B", 0): 2_000_000, ("B", 1): 3_000_000}


def order(rank):
    """1F1B's compute order of a rank (stage == rank): P-1-rank forwards
    first, then one forward one backward, then the rest backward."""
    warm = min(P - 1 - rank, M)
    acts = [("F", m) for m in range(warm)]
    f, b = warm, 0
    while b < M:
        if f < M:
            acts.append(("F", f))
            f += 1
        acts.append(("B", b))
        b += 1
    return acts


def timeline():
    """Each rank's blocks (kind, mb, start, end) of one step from 0: a block
    starts when its rank is free and what it needs has ended."""
    end = {}
    free = [0] * P
    todo = [list(order(r)) for r in range(P)]
    out = [[] for _ in range(P)]
    while any(todo):
        for r in range(P):
            while todo[r]:
                k, m = todo[r][0]
                dep = ("F", r - 1, m) if k == "F" and r > 0 else ("B", r + 1, m) if k == "B" and r < P - 1 \
                    else ("F", r, m) if k == "B" else None
                if dep is not None and dep not in end:
                    break
                t0 = max(free[r], end.get(dep, 0))
                t1 = t0 + COST[(k, r)]
                end[(k, r, m)] = t1
                free[r] = t1
                out[r].append((k, m, t0, t1))
                todo[r].pop(0)
    return out, max(free)


def write_rank(L, job, rank, path, plan=True, blocks=True):
    r, err = L.Rank.open(job, rank, P, trace=path)
    if r is None:
        fail(f"open rank {rank}: {err}")
    r.describe("1F1B", "cpu", P, M, 1, "test-merge-plan", "test-merge-plan.py")
    if plan:
        kinds = {"F": L.F, "B": L.B}
        r.plan(rank, [(kinds[k], rank, m, -1, -1, -1) for k, m in order(rank)])
    if blocks:
        tl, step_ns = timeline()
        t = r.now()
        for step in range(3):
            base = t + step * (step_ns + 1_000_000)
            r.step(step, 0, base)
            for k, m, a, b in tl[rank]:
                r.block(L.F if k == "F" else L.B, rank, m, step, base + a, base + b)
            r.step(step, 1, base + step_ns)
    err = r.close()
    if err:
        fail(f"close rank {rank}: {err}")


def plan_frames(path):
    """The PLAN frames of a trace, as bytes (probe/pp-trace-format.h: frames
    from the header's offset at byte 16, each opening with its size (u32)
    and kind (u16, PLAN is 2))."""
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 16)[0]
    frames = []
    while off + 8 <= len(data):
        size, kind = struct.unpack_from("<IH", data, off)
        if size < 8 or off + size > len(data):
            break
        if kind == 2:
            frames.append(data[off:off + size])
        off += size
    return frames


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def info(cli, path):
    p = run([cli, "info", path])
    if p.returncode != 0:
        fail(f"info {path}: {p.stderr}")
    return p.stdout


def planned_line(stderr):
    return [x for x in stderr.splitlines() if x.startswith("planned ")]


WRITER = """
import os, shutil, sys
sys.path.insert(0, {here!r})
sys.path.insert(0, {pydir!r})
import importlib.util
spec = importlib.util.spec_from_file_location("tmp_plan", {me!r})
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
from pipescope import lib as L
trace = os.environ["PIPESCOPE_TRACE"]
for r in range(t.P):
    t.write_rank(L, "merge-plan-profiled", r, f"{{trace}}.rank{{r}}")
    shutil.copy(f"{{trace}}.rank{{r}}", os.path.join({keep!r}, f"job.rank{{r}}.pptrace"))
"""


def main():
    libpath, cli = sys.argv[1], sys.argv[2]
    os.environ["PIPESCOPE_LIB"] = libpath
    tmp = tempfile.mkdtemp(prefix="pp-merge-plan-")
    os.chmod(tmp, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = tmp   # a private registry
    from pipescope import lib as L
    if L.load() is None:
        fail(f"load: {L.last_error}")
    print("1..4")

    # 1. merge alone
    d = os.path.join(tmp, "merge")
    os.mkdir(d)
    ranks = [os.path.join(d, f"job.rank{r}.pptrace") for r in range(P)]
    for r in range(P):
        write_rank(L, "merge-plan", r, ranks[r])
    for path in ranks:
        if not plan_frames(path):
            fail(f"{path} holds no plan: the ranks' traces are not what the test means")
    out = os.path.join(d, "job.pptrace")
    p = run([cli, "merge", "-o", out] + ranks)
    if p.returncode != 0:
        fail(f"merge: exit {p.returncode}:\n{p.stderr}")
    said = planned_line(p.stderr)
    if len(said) != 1 or "1F1B with the costs it measured" not in said[0]:
        fail(f"merge did not say it planned the job (on stderr):\n{p.stderr}")
    if planned_line(p.stdout):
        fail(f"merge said it planned the job on stdout:\n{p.stdout}")
    if "bubble, plan at measured costs (the last plan of each rank" not in info(cli, out):
        fail(f"no planned bubble in the merged trace:\n{info(cli, out)}")
    if os.path.exists(out + ".timing"):
        fail("merge left its .timing file behind")
    merged = plan_frames(out)
    ok("merge: the ranks' untimed plans timed with their costs; 'planned' on stderr; info has the bubble")

    # 2. profile writes the same plan from the same ranks' traces
    d = os.path.join(tmp, "profile")
    keep = os.path.join(d, "keep")
    os.makedirs(keep)
    script = os.path.join(d, "writer.py")
    with open(script, "w") as f:
        f.write(WRITER.format(here=HERE, pydir=PYDIR, me=os.path.abspath(__file__), keep=keep))
    prof = os.path.join(d, "profiled.pptrace")
    p = run([cli, "profile", "--trace", prof, "--", sys.executable, script], cwd=d)
    if p.returncode != 0 or not os.path.exists(prof):
        fail(f"profile: exit {p.returncode}:\n{p.stdout}\n{p.stderr}")
    by_profile = planned_line(p.stderr)
    out2 = os.path.join(d, "merged.pptrace")
    q = run([cli, "merge", "-o", out2] + [os.path.join(keep, f"job.rank{r}.pptrace") for r in range(P)])
    if q.returncode != 0:
        fail(f"merge of the profiled ranks: exit {q.returncode}:\n{q.stderr}")
    if plan_frames(prof) != plan_frames(out2):
        fail(f"profile's PLAN frames differ from merge's of the same ranks' traces (in {d})")
    if plan_frames(out2) != merged:
        fail("the same ranks' costs planned twice give different PLAN frames")
    if by_profile != planned_line(q.stderr) or len(by_profile) != 1:
        fail(f"profile said {by_profile}, merge {planned_line(q.stderr)}")
    ok("profile's timed plan is merge's, frame for frame, and both say so alike")

    # 3. no plan at all
    d = os.path.join(tmp, "noplan")
    os.mkdir(d)
    ranks = [os.path.join(d, f"job.rank{r}.pptrace") for r in range(P)]
    for r in range(P):
        write_rank(L, "merge-noplan", r, ranks[r], plan=False)
    out = os.path.join(d, "job.pptrace")
    p = run([cli, "merge", "-o", out] + ranks)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    if p.returncode != 0 or not os.path.exists(out):
        fail(f"merge without plans: exit {p.returncode}:\n{p.stderr}")
    if len(lines) != 1 or "the plan stays untimed" not in lines[0]:
        fail(f"merge without plans should say why in one line on stderr:\n{p.stderr}")
    if "bubble, plan at" in info(cli, out):
        fail("a planned bubble in a trace without plans")
    ok(f"no plan: merged, and one line says why it stays untimed ({lines[0]})")

    # 4. plans, nothing measured
    d = os.path.join(tmp, "noblocks")
    os.mkdir(d)
    ranks = [os.path.join(d, f"job.rank{r}.pptrace") for r in range(P)]
    for r in range(P):
        write_rank(L, "merge-noblocks", r, ranks[r], blocks=False)
    out = os.path.join(d, "job.pptrace")
    p = run([cli, "merge", "-o", out] + ranks)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    if p.returncode != 0 or not os.path.exists(out):
        fail(f"merge of plans without blocks: exit {p.returncode}:\n{p.stderr}")
    if len(lines) != 1 or "the plan stays untimed" not in lines[0]:
        fail(f"merge of plans without blocks should say why in one line on stderr:\n{p.stderr}")
    if os.path.exists(out + ".timing"):
        fail("merge left its .timing file behind")
    if "bubble, plan at" in info(cli, out):
        fail("a planned bubble in a trace whose plan could not be timed")
    if len(plan_frames(out)) != P:
        fail(f"the ranks' {P} untimed plans did not stay: {len(plan_frames(out))} PLAN frames")
    ok(f"nothing measured: merged with the untimed plans, one line says why ({lines[0]})")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
