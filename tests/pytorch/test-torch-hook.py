#!/usr/bin/env python3
"""test-torch-hook.py LIB — the Python hook never hurts a job (issue 14).

  1. On a PyTorch whose version it does not know, instrument() says so in
     one line and leaves the job untouched (nothing wrapped).
  2. Without its library, the same: one line, nothing wrapped.
  3. Loaded through sitecustomize, it costs a process that never pipelines
     nothing: pipescope.torch is not even imported.
  4. The sitecustomize it shadows still runs.
  5. A full disk under the trace (the rank's trace files are /dev/full):
     the job finishes with the losses and weights of a plain run.
  6. A registry folder open to other users (refused, as another user could
     plant entries there): the same, the ranks register in a private
     fallback and still write their traces.
  7. A stalled viewer on each rank's live socket (connected, never
     reading): the job finishes, results bit for bit, and each rank's
     trace file holds every step.
  8. The device calls (pipescope_device_*) where CUPTI cannot run (no
     module, or CUPTI without a GPU here): start says why in one line and
     returns 1, nothing on stderr; push gives 0, pop does nothing, a block
     and an overlapped pair keep the caller's times in the trace.
  9. The hook's CUDA path with CUPTI, on fakes (this machine has no GPU):
     each wrapped action pushes its block's id, runs once (a backward with
     autograd's threads off, restored after), pops even when it raises,
     and the block goes to the library with its id; without an id, or with
     CUPTI off or unavailable, the plain calls, nothing pushed, one line.
Cases 1 and 2 run in one process, as do the two halves of case 3, and
cases 5 to 7 compare with one plain run of 40 steps (the weights after
each step: a 3-step job's results are its first 3 steps'): each torch
import costs seconds.
Needs PIPESCOPE_TORCH_PYTHON (./dev.sh test sets it); skips without.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.normpath(os.path.join(HERE, "..", "..", "probe", "python"))
AUTO = os.path.join(PKG, "pipescope", "_autoload")
sys.path.insert(0, os.path.join(HERE, ".."))
from pp_tap import fail, ok  # noqa: E402


def py(python, code, env):
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=180)


def main():
    lib = sys.argv[1]
    python = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not python:
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test sets it)")
        return 0
    print("1..9")
    tmp = tempfile.mkdtemp(prefix="pp-hook-")
    base = dict(os.environ, PYTHONPATH=PKG, PIPESCOPE_LIB=lib, XDG_RUNTIME_DIR=tmp, OMP_NUM_THREADS="1")
    os.chmod(tmp, 0o700)
    wrapped = ("from torch.distributed.pipelining import stage as s; "
               "print('WRAPPED' if hasattr(s._PipelineStageBase.forward_one_chunk, '__wrapped__') else 'PLAIN')")

    # cases 1 and 2 in one process (one torch import): the unknown version
    # is refused before the library is looked for, so the second call of
    # instrument(), the version put back, meets the missing library; "--"
    # on stderr between the two
    p = py(python, "import os, sys, torch; real = torch.__version__; torch.__version__ = '9.99.0'; "
                   "import pipescope.torch as h; print(h.instrument()); " + wrapped + "; "
                   "torch.__version__ = real; os.environ['PIPESCOPE_LIB'] = '/nonexistent/libpipescope-probe.so'; "
                   "print('--', file=sys.stderr, flush=True); print(h.instrument()); " + wrapped, base)
    err = p.stderr.split("--\n")
    out = p.stdout.split()
    lines = err[0].strip().splitlines()
    if p.returncode != 0 or out[:2] != ["False", "PLAIN"] or len(err) != 2 or len(lines) != 1 \
            or "9.99.0 is not one this hook knows" not in lines[0]:
        fail(f"unknown version: rc {p.returncode}, {p.stdout!r}, {p.stderr!r}")
    ok("an unknown PyTorch: one line, the job untouched")
    lines = err[1].strip().splitlines()
    if out[2:] != ["False", "PLAIN"] or len(lines) != 1 or "cannot load" not in lines[0]:
        fail(f"no library: rc {p.returncode}, {p.stdout!r}, {p.stderr!r}")
    ok("no library: one line, the job untouched")

    # one process: torch imported, then pipelining ("--" on stderr between)
    auto = dict(base, PYTHONPATH=AUTO, PIPESCOPE_PYTHON=PKG, PIPESCOPE_JOB="hooktest")
    p = py(python, "import sys, torch; print('pipescope.torch' in sys.modules); "
                   "print('--', file=sys.stderr, flush=True); "
                   "import torch.distributed.pipelining; print('pipescope.torch' in sys.modules); " + wrapped, auto)
    out = p.stdout.split()
    if p.returncode != 0 or out[:1] != ["False"] or not p.stderr.startswith("--\n"):
        fail(f"a process that never pipelines: {p.stdout!r} {p.stderr!r}")
    if out[1:] != ["True", "WRAPPED"]:
        fail(f"a process that pipelines was not instrumented: {p.stdout!r} {p.stderr!r}")
    ok("sitecustomize: nothing for a process that never pipelines, the hook once it does")

    site = os.path.join(tmp, "site")
    os.makedirs(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    p = py(python, "import os; print(os.environ.get('SITE_RAN'))", dict(auto, PYTHONPATH=AUTO + ":" + site))
    if p.returncode != 0 or p.stdout.strip() != "yes":
        fail(f"the shadowed sitecustomize did not run: {p.stdout!r} {p.stderr!r}")
    ok("the sitecustomize it shadows still runs")

    # launched by forkrun.py (torchrun's environment, the imports once, issue 42)
    job = [python, os.path.join(HERE, "forkrun.py"), "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"),
           "--schedule", "Schedule1F1B", "--microbatches", "4", "--steps", "3"]
    full = os.path.join(tmp, "full")
    env = dict(base, PATH=os.path.dirname(python) + ":" + os.environ.get("PATH", ""))
    # the plain run of cases 5 to 7: 40 steps, the weights after each; a
    # 3-step job's results are its first 3 steps' (the same seeds and work)
    long_job = [x if x != "3" else "40" for x in job]        # --steps 40
    plain40 = os.path.join(tmp, "plain40")
    p = subprocess.run(long_job + ["--out", plain40, "--params-every-step"], env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the plain 40-step run: {p.stderr[-2000:]}")
    plain3 = []
    for r in (0, 1):
        a = json.load(open(os.path.join(plain40, f"rank{r}.json")))
        plain3.append({"losses": a["losses"][:3], "params": a["params_by_step"][2]})
    for r in (0, 1):
        os.symlink("/dev/full", os.path.join(tmp, f"trace.rank{r}"))
    p = subprocess.run(job + ["--out", full], env=dict(auto, PATH=env["PATH"], PIPESCOPE_TRACE=os.path.join(tmp, "trace")),
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the job with its trace on a full disk exited {p.returncode}: {p.stderr[-2000:]}")
    for r in (0, 1):
        a = plain3[r]
        b = json.load(open(os.path.join(full, f"rank{r}.json")))
        if a["losses"] != b["losses"] or a["params"] != b["params"]:
            fail(f"rank {r}: results differ with the trace on a full disk")
    said = [l for l in p.stderr.splitlines() if l.startswith("pipescope:")]
    if not said or len(said) > 2:
        fail(f"the full disk was not said once a rank: {said}")
    ok(f"a full disk under the trace: the job finishes, results bit for bit; said: {said[0]}")

    foreign = os.path.join(tmp, "foreign")
    os.makedirs(os.path.join(foreign, "pipescope"))
    os.chmod(os.path.join(foreign, "pipescope"), 0o777)   # open to others: refused
    out = os.path.join(tmp, "foreign-out")
    tr = os.path.join(tmp, "foreign-trace")
    p = subprocess.run(job + ["--out", out], env=dict(auto, PATH=env["PATH"], XDG_RUNTIME_DIR=foreign,
                                                      PIPESCOPE_TRACE=tr),
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the job with a foreign registry folder exited {p.returncode}: {p.stderr[-2000:]}")
    for r in (0, 1):
        a = plain3[r]
        b = json.load(open(os.path.join(out, f"rank{r}.json")))
        if a["losses"] != b["losses"] or a["params"] != b["params"]:
            fail(f"rank {r}: results differ with a foreign registry folder")
        if not os.path.getsize(f"{tr}.rank{r}"):
            fail(f"rank {r} wrote no trace with a foreign registry folder")
    if any("Traceback" in l for l in p.stderr.splitlines()):
        fail(f"a traceback: {p.stderr[-2000:]}")
    ok("a foreign registry folder: the job finishes, results bit for bit, traces written")

    import socket
    import time
    stall = os.path.join(tmp, "stall")
    os.makedirs(stall)
    os.chmod(stall, 0o700)
    out = os.path.join(tmp, "stall-out")
    tr = os.path.join(tmp, "stall-trace")
    # the job holds after its first step until both viewers are attached
    # (not a step count it must outlive them by: a loaded machine may run
    # 40 steps before the test connects)
    hold = os.path.join(tmp, "stall-attached")
    proc = subprocess.Popen(long_job + ["--out", out, "--hold", hold],
                            env=dict(auto, PATH=env["PATH"], XDG_RUNTIME_DIR=stall, PIPESCOPE_TRACE=tr),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    socks, deadline = [], time.monotonic() + 120
    reg = os.path.join(stall, "pipescope")
    while len(socks) < 2 and time.monotonic() < deadline and proc.poll() is None:
        for f in (os.listdir(reg) if os.path.isdir(reg) else []):
            path = os.path.join(reg, f)
            if f.endswith(".sock") and path not in [q for q, _ in socks]:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                try:
                    c.connect(path)
                    socks.append((path, c))    # and never read
                except OSError:
                    c.close()
        time.sleep(0.05)
    open(hold, "w").close()
    o, e = proc.communicate(timeout=300)
    for _, c in socks:
        c.close()
    if len(socks) < 2:
        fail(f"could not stall a viewer on both ranks ({len(socks)} connected)")
    if proc.returncode != 0:
        fail(f"the job with stalled viewers exited {proc.returncode}: {e[-2000:]}")
    cli = os.environ.get("PIPESCOPE_CLI")
    for r in (0, 1):
        a = json.load(open(os.path.join(plain40, f"rank{r}.json")))
        b = json.load(open(os.path.join(out, f"rank{r}.json")))
        if a["losses"] != b["losses"] or a["params"] != b["params"]:
            fail(f"rank {r}: results differ with a stalled viewer")
        if cli:
            info = subprocess.run([cli, "info", f"{tr}.rank{r}"], capture_output=True, text=True).stdout
            if "steps: 40\n" not in info:
                fail(f"rank {r}'s trace lacks steps with a stalled viewer:\n{info}")
    ok("a stalled viewer on both ranks: the job finishes, results bit for bit, every step in the traces")

    probe = ("import sys\n"
             "from pipescope import lib\n"
             "r, err = lib.Rank.open('nocupti', 0, 1, trace=sys.argv[1])\n"
             "assert r is not None, err\n"
             "rc, why = r.device_start()\n"
             "bid = r.device_push(lib.F, 0, 0, 0)\n"
             "r.device_pop()\n"
             "t = r.now()\n"
             "r.device_block(bid, lib.F, 0, 0, 0, t, t + 1000)\n"
             "r.device_overlap(0, 0, 0, 1, lib.B, 1, 1, 0, t + 2000, t + 3500)\n"
             "print(rc, bid, r.has_device)\n"
             "print(why)\n"
             "print(r.close() or 'closed')\n")
    said = []
    for what, extra in (("no CUPTI module", {"PIPESCOPE_CUPTI_LIB": "/nonexistent/libpipescope-cupti.so"}),
                        ("this build's CUPTI part, no GPU", {})):
        tr = os.path.join(tmp, "nocupti-" + str(len(said)))
        p = subprocess.run([python, "-c", probe, tr], env=dict(base, **extra), capture_output=True,
                           text=True, timeout=120)
        out = p.stdout.splitlines()
        if p.returncode != 0 or p.stderr.strip() or len(out) != 3:
            fail(f"device calls, {what}: rc {p.returncode}, {p.stdout!r}, {p.stderr!r}")
        if out[0] != "1 0 True" or "unavailable" not in out[1] or out[2] != "closed":
            fail(f"device calls, {what}: {out}")
        if cli:
            csv = tr + ".csv"
            e = subprocess.run([cli, "export", tr, "--format", "csv", "-o", csv], capture_output=True, text=True)
            rows = [l.split(",") for l in open(csv).read().splitlines()[1:]] if e.returncode == 0 else []
            f = [x for x in rows if x[3] == "F"]
            o = [x for x in rows if x[11] == "1B1"]
            if len(f) != 1 or int(f[0][6]) - int(f[0][5]) != 1000 or len(o) != 1 \
                    or int(o[0][6]) - int(o[0][5]) != 1500:
                fail(f"device calls, {what}: the trace's blocks: {rows} {e.stderr}")
        said.append(out[1])
    ok(f"device calls without CUPTI: no-ops, blocks with the caller's times; said: {said[0]}; {said[1]}")

    p = subprocess.run([python, "-c", FAKE_CUDA], env=base, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or p.stdout.strip() != "FAKE-CUDA-OK":
        fail(f"the CUDA path on fakes: rc {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}")
    ok("the CUDA path with CUPTI, on fakes: pushed, run once, popped, given with its id")
    return 0


# Case 9, in the torch environment's python: the hook's CUDA code with fake
# events, a fake library rank and a fake set_multithreading_enabled.
FAKE_CUDA = r"""
import io, os, sys, types
import torch
import pipescope.torch as T
from pipescope import lib

calls = []

class Rank:
    has_device = True
    def __init__(self, bid=7, rc=0):
        self.bid, self.rc = bid, rc
    def device_start(self):
        calls.append(("start",))
        return self.rc, "GPU tracing unavailable: fake"
    def device_push(self, *a):
        calls.append(("push",) + a)
        return self.bid
    def device_pop(self):
        calls.append(("pop",))
    def device_block(self, *a):
        calls.append(("dblock",) + a)
    def device_overlap(self, *a):
        calls.append(("doverlap",) + a)
    def block(self, *a):
        calls.append(("block",) + a)
    def overlap(self, *a):
        calls.append(("overlap",) + a)
    def wait(self, *a):
        pass

class Single:
    def __init__(self, mode):
        calls.append(("threads", mode))
    def __exit__(self, *exc):
        calls.append(("threads back",))

class Ev:
    def __init__(self, ms):
        self.ms = ms
    def record(self):
        pass
    def query(self):
        return True
    def synchronize(self):
        pass
    def elapsed_time(self, other):
        return other.ms - self.ms

def hook(rank):
    h = T._Hook(torch, None, None, None)
    h.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=lambda enable_timing=False: Ev(2.0)),
                                    autograd=types.SimpleNamespace(set_multithreading_enabled=Single))
    h.rank = rank
    h.step_index = 1
    h.gpu_ref = (Ev(0.0), 1000)
    h.gpu_events = lambda: Ev(1.0)
    return h

stage = types.SimpleNamespace(stage_index=1, device=types.SimpleNamespace(type="cuda"))

def orig(self, *a, **k):
    calls.append(("orig",) + a)
    if k.get("boom"):
        raise ValueError("the job's own error")
    return "result"

def expect(got, want, what):
    if got != want:
        print(f"{what}:\n got  {got}\n want {want}")
        sys.exit(1)

# CUPTI started: a backward (I) pushed, autograd's threads off, run once, popped
h = hook(Rank())
h.start_device(h.rank)
expect(h.device, True, "started")
calls.clear()
back = T._wrap_block(h, orig, T._bwd_kind)
expect(back(stage, 3, full_backward=False), "result", "the result")
expect(calls, [("push", lib.I, 1, 3, 0), ("threads", False), ("orig", 3), ("threads back",), ("pop",)],
       "a backward")
h.resolve_gpu()
expect(calls[-1], ("dblock", 7, lib.I, 1, 3, 0, 1000 + 1000000, 1000 + 2000000), "given with its id")

# a forward: no change to autograd's threads
calls.clear()
fwd = T._wrap_block(h, orig, T._fwd_kind)
fwd(stage, 4)
expect(calls, [("push", lib.F, 1, 4, 0), ("orig", 4), ("pop",)], "a forward")

# the job's exception passes through; the block is popped, the threads restored
calls.clear()
try:
    back(stage, 5, boom=True)
    expect("no exception", "ValueError", "the exception")
except ValueError as e:
    expect(str(e), "the job's own error", "the exception")
expect(calls, [("push", lib.B, 1, 5, 0), ("threads", False), ("orig", 5), ("threads back",), ("pop",)],
       "a raising backward")
expect(h.failed, False, "the hook after the job's exception")

# an overlapped pair: both ids to the library
calls.clear()
h.gpu_pending.clear()
h.overlap = []
fwd(stage, 6)
back(stage, 2)
blocks, h.overlap = h.overlap, None
h.overlap_end(blocks)
h.resolve_gpu()
expect(calls[-1], ("doverlap", 7, 7, 1, 6, lib.B, 1, 2, 0, 1001000, 2001000), "an overlapped pair")

# no id (CUPTI refused the push): nothing popped, the plain block
h = hook(Rank(bid=0))
h.device = True
h.single_thread = Single
calls.clear()
T._wrap_block(h, orig, T._bwd_kind)(stage, 1)
h.resolve_gpu()
expect(calls, [("push", lib.B, 1, 1, 0), ("orig", 1), ("block", lib.B, 1, 1, 0, 1001000, 2001000)], "no id")

# CUPTI off (PIPESCOPE_CUPTI=0): never started, nothing pushed
os.environ["PIPESCOPE_CUPTI"] = "0"
h = hook(Rank())
calls.clear()
h.start_device(h.rank)
T._wrap_block(h, orig, T._fwd_kind)(stage, 1)
expect(calls, [("orig", 1)], "CUPTI off")
del os.environ["PIPESCOPE_CUPTI"]

# unavailable: one line, nothing pushed
h = hook(Rank(rc=1))
err, sys.stderr = sys.stderr, io.StringIO()
h.start_device(h.rank)
said, sys.stderr = sys.stderr.getvalue(), err
expect(len(said.splitlines()), 1, "one line")
expect("GPU tracing unavailable: fake" in said and said.startswith("pipescope: "), True, said)
expect(h.device, False, "unavailable")
print("FAKE-CUDA-OK")
"""


if __name__ == "__main__":
    sys.exit(main())
