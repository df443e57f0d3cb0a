#!/usr/bin/env python3
"""forkrun.py — torchrun for the tests: the job's heavy imports once, then
one fork a process (issue 42: the suite's budget).

    python forkrun.py [--standalone] --nproc-per-node N [--framework NAME] [--preload MOD,...]
                      SCRIPT [ARG ...]

On these 2-core machines a launch's cost is mostly imports, not training:
`import torch.distributed.pipelining` takes 5.4 s of CPU a process,
megatron-core's schedules 8-9 s (they pull in torch._inductor), torchrun's
own launcher 1.9 s.  A 4-process launch spent 20-40 s of CPU before its
first step.  Here the launcher imports torch once (and what the framework
--framework names imports on top, and the modules --preload names; one not
installed is passed over: these are savings, not needs), then forks N
processes that run SCRIPT as `python SCRIPT ARG ...` would, each with
the environment torchrun gives its workers (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID).

What a test of the hook must still see: every process imports the
framework's pipeline module itself, after the fork, as a torchrun worker
does, so the hook engages in each process at that import
(probe/python/pipescope/_autoload).  So the launcher refuses to preload
those modules: a --preload that imports one is an error, before any fork.
Nothing is imported here that the job would not import itself, and nothing
runs before the fork (no thread, no process group, no tensor op).

As torchrun: the exit status is 0 when every process exits 0; when one
fails, the others get SIGTERM (then SIGKILL 30 s later) and the status is
the first failure's (128 + N for a signal).  SIGINT, SIGTERM and SIGHUP are
passed to the processes; a process dies with the launcher (PDEATHSIG).
The tests that are about torchrun itself (the launcher left alone, a hung
job's process tree, the job's name from torchrun's run id) keep torchrun.
"""

import ctypes
import os
import runpy
import signal
import socket
import sys
import time
import traceback
import uuid

# the modules whose import engages the hook (pipescope's sitecustomize):
# each process must import them itself
HOOKED = ("torch.distributed.pipelining", "megatron.core.pipeline_parallel.schedules",
          "deepspeed.runtime.pipe.engine")


# what every process of a pipelined job imports (torch.distributed.pipelining
# imports them; so do megatron-core and DeepSpeed): most of a process's
# start, imported here once
PRELOAD = ["torch", "torch.distributed", "torch.distributed.tensor", "torch._dynamo"]
# what a framework's jobs import on top, measured with python -X importtime:
# megatron-core 0.16 pulls in torch._inductor (1.1 s), wandb (0.7 s) and
# tensorboard (0.1 s) before its schedules; DeepSpeed's own modules are
# most of its import (and `import deepspeed` imports its pipe engine)
FRAMEWORKS = {
    "torch": [],
    "megatron": ["torch._inductor.compile_fx", "wandb", "torch.utils.tensorboard"],
    "deepspeed": [],
}


def usage(msg):
    sys.stderr.write(f"forkrun.py: {msg}\n"
                     "usage: forkrun.py [--standalone] --nproc-per-node N [--framework NAME] [--preload MOD,...] "
                     "SCRIPT [ARG ...]\n")
    sys.exit(2)


def parse(argv):
    n, preload, i = None, [], 0
    while i < len(argv) and argv[i].startswith("--"):
        a = argv[i]
        if a == "--standalone":
            i += 1
        elif a in ("--nproc-per-node", "--nproc_per_node", "--preload", "--framework") and i + 1 < len(argv):
            if a == "--preload":
                preload += [m for m in argv[i + 1].split(",") if m]
            elif a == "--framework":
                if argv[i + 1] not in FRAMEWORKS:
                    usage(f"--framework is one of {', '.join(FRAMEWORKS)}, not '{argv[i + 1]}'")
                preload += FRAMEWORKS[argv[i + 1]]
            else:
                try:
                    n = int(argv[i + 1])
                except ValueError:
                    usage(f"{a} takes a number, not '{argv[i + 1]}'")
            i += 2
        else:
            usage(f"unknown option '{a}'")
    if n is None or not 1 <= n <= 64:
        usage("--nproc-per-node N (1 to 64) is needed")
    if i >= len(argv):
        usage("no script named")
    return n, preload, argv[i], argv[i + 1:]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(rank, n, port, run_id, script, args, parent):
    """Runs SCRIPT as this process's main program; its exit status."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:   # die with the launcher, as a worker does when torchrun is killed
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent:   # the launcher went before the line above
        return 1
    os.environ.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n),
        "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(n),
        "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": run_id,
    })
    sys.argv = [script] + args
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        sys.stderr.write(f"{e.code}\n")
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def status_of(st):
    return os.waitstatus_to_exitcode(st) if hasattr(os, "waitstatus_to_exitcode") else st >> 8


def main():
    n, preload, script, args = parse(sys.argv[1:])
    if not os.path.isfile(script):
        usage(f"no script '{script}'")
    import importlib
    for m in PRELOAD + preload:
        try:
            importlib.import_module(m)
        except ImportError:
            pass   # not installed here (tensorboard beside PyTorch 2.11): the job goes without the saving
    early = [h for h in HOOKED if h in sys.modules]
    if early:
        sys.stderr.write(f"forkrun.py: --preload imported {', '.join(early)}, which each process must "
                         "import itself (the hook engages there)\n")
        return 2
    port, run_id = free_port(), uuid.uuid4().hex[:12]
    sys.stdout.flush()
    sys.stderr.flush()
    pids, me = {}, os.getpid()
    for rank in range(n):
        pid = os.fork()
        if pid == 0:
            code = child(rank, n, port, run_id, script, args, me)
            sys.stdout.flush()
            sys.stderr.flush()
            return code   # through sys.exit: the job's atexit handlers run
        pids[pid] = rank

    def forward(sig, _frame):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)

    first, deadline = 0, None
    while pids:
        if deadline is not None and time.monotonic() > deadline:
            forward(signal.SIGKILL, None)
            deadline = None
        try:
            pid, st = os.waitpid(-1, os.WNOHANG if deadline is not None else 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == 0:
            time.sleep(0.1)
            continue
        pids.pop(pid, None)
        code = status_of(st)
        code = 128 - code if code < 0 else code
        if code != 0 and first == 0:
            first = code
            forward(signal.SIGTERM, None)
            deadline = time.monotonic() + 30
    return first


if __name__ == "__main__":
    sys.exit(main())
