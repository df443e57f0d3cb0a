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
n = 0


def ok(msg):
    global n
    n += 1
    print(f"ok {n} - {msg}")


def fail(msg):
    print(f"not ok {n + 1} - " + msg.replace("\n", "\n# "))
    sys.exit(1)


def py(python, code, env):
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=180)


def main():
    lib = sys.argv[1]
    python = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not python:
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test sets it)")
        return 0
    print("1..7")
    tmp = tempfile.mkdtemp(prefix="pp-hook-")
    base = dict(os.environ, PYTHONPATH=PKG, PIPESCOPE_LIB=lib, XDG_RUNTIME_DIR=tmp, OMP_NUM_THREADS="1")
    os.chmod(tmp, 0o700)
    wrapped = ("from torch.distributed.pipelining import stage as s; "
               "print('WRAPPED' if hasattr(s._PipelineStageBase.forward_one_chunk, '__wrapped__') else 'PLAIN')")

    p = py(python, "import torch; torch.__version__ = '9.99.0'; import pipescope.torch as h; "
                   "print(h.instrument()); " + wrapped, base)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 0 or "False\nPLAIN" not in p.stdout or len(lines) != 1 \
            or "9.99.0 is not one this hook knows" not in lines[0]:
        fail(f"unknown version: rc {p.returncode}, {p.stdout!r}, {p.stderr!r}")
    ok("an unknown PyTorch: one line, the job untouched")

    p = py(python, "import pipescope.torch as h; print(h.instrument()); " + wrapped,
           dict(base, PIPESCOPE_LIB="/nonexistent/libpipescope-probe.so"))
    lines = p.stderr.strip().splitlines()
    if p.returncode != 0 or "False\nPLAIN" not in p.stdout or len(lines) != 1 or "cannot load" not in lines[0]:
        fail(f"no library: rc {p.returncode}, {p.stdout!r}, {p.stderr!r}")
    ok("no library: one line, the job untouched")

    auto = dict(base, PYTHONPATH=AUTO, PIPESCOPE_PYTHON=PKG, PIPESCOPE_JOB="hooktest")
    p = py(python, "import sys, torch; print('pipescope.torch' in sys.modules)", auto)
    if p.returncode != 0 or p.stdout.strip() != "False" or p.stderr.strip():
        fail(f"a process that never pipelines: {p.stdout!r} {p.stderr!r}")
    p = py(python, "import sys; import torch.distributed.pipelining; print('pipescope.torch' in sys.modules); "
                   + wrapped, auto)
    if p.returncode != 0 or p.stdout.split() != ["True", "WRAPPED"]:
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

    torchrun = os.path.join(os.path.dirname(python), "torchrun")
    job = [torchrun, "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "train.py"),
           "--schedule", "Schedule1F1B", "--microbatches", "4", "--steps", "3"]
    plain, full = os.path.join(tmp, "plain"), os.path.join(tmp, "full")
    env = dict(base, PATH=os.path.dirname(python) + ":" + os.environ.get("PATH", ""))
    p = subprocess.run(job + ["--out", plain], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the plain run: {p.stderr[-2000:]}")
    for r in (0, 1):
        os.symlink("/dev/full", os.path.join(tmp, f"trace.rank{r}"))
    p = subprocess.run(job + ["--out", full], env=dict(auto, PATH=env["PATH"], PIPESCOPE_TRACE=os.path.join(tmp, "trace")),
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the job with its trace on a full disk exited {p.returncode}: {p.stderr[-2000:]}")
    for r in (0, 1):
        a = json.load(open(os.path.join(plain, f"rank{r}.json")))
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
        a = json.load(open(os.path.join(plain, f"rank{r}.json")))
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
    long_job = [x if x != "3" else "40" for x in job]        # --steps 40
    plain40 = os.path.join(tmp, "plain40")
    p = subprocess.run(long_job + ["--out", plain40], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"the plain 40-step run: {p.stderr[-2000:]}")
    proc = subprocess.Popen(long_job + ["--out", out],
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
