#!/usr/bin/env python3
"""test-forkrun.py — the launcher the framework tests run their jobs with
(tests/pytorch/forkrun.py, issue 42) behaves as torchrun where the tests
rely on it; if it did not, a test could pass on a job that failed.

  1. Each process has torchrun's environment (RANK, LOCAL_RANK,
     WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), no hooked module
     (torch.distributed.pipelining) imported before its own import, and
     the processes form a gloo group: an all_reduce of the ranks gives
     their sum in each.  The script's atexit handlers run in each process
     (the hook closes its trace file there), and the status is 0.
  2. A process that fails: the launch's status is its status, and the
     other process, blocked forever, is ended (the launch returns).
  3. A --preload that imports a module the hook engages on is refused in
     one line, status 2, before any process starts.
Needs PIPESCOPE_TORCH_PYTHON (./dev.sh test sets it); skips without.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FORKRUN = os.path.join(HERE, "forkrun.py")

RANK_PROGRAM = r'''
import atexit, json, os, sys
early = "torch.distributed.pipelining" in sys.modules
import torch
import torch.distributed as dist
import torch.distributed.pipelining   # the import a hooked job makes itself
out, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
if mode == "fail":
    if rank == 1:
        sys.exit(7)
    import time
    while True:
        time.sleep(1)   # ended by the launcher, not by itself
dist.init_process_group("gloo")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
dist.destroy_process_group()
atexit.register(lambda: open(os.path.join(out, f"exit{rank}"), "w").close())
json.dump({"env": env, "early": early, "sum": t.item(), "main": __name__, "argv": sys.argv[1:]},
          open(os.path.join(out, f"rank{rank}.json"), "w"))
'''


def main():
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        return 0
    print("1..3", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pp-forkrun-") as tmp:
        prog = os.path.join(tmp, "ranks.py")
        with open(prog, "w") as f:
            f.write(RANK_PROGRAM)

        def launch(args, timeout=300):
            return subprocess.run([py, FORKRUN] + args, env=env, capture_output=True, text=True,
                                  timeout=timeout)

        # 1. three processes, a gloo group
        n, problems = 3, []
        p = launch(["--standalone", "--nproc-per-node", str(n), prog, tmp, "ok"])
        if p.returncode != 0:
            problems.append(f"status {p.returncode}:\n{p.stderr[-2000:]}")
        else:
            import json
            ports, runs = set(), set()
            for r in range(n):
                try:
                    d = json.load(open(os.path.join(tmp, f"rank{r}.json")))
                except (OSError, ValueError) as e:
                    problems.append(f"rank {r} wrote no result ({e})")
                    continue
                e = d["env"]
                want = {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n),
                        "MASTER_ADDR": "127.0.0.1"}
                for k, v in want.items():
                    if e[k] != v:
                        problems.append(f"rank {r}: {k}={e[k]!r}, not {v!r}")
                ports.add(e["MASTER_PORT"])
                runs.add(e["TORCHELASTIC_RUN_ID"])
                if d["early"]:
                    problems.append(f"rank {r}: torch.distributed.pipelining was imported before the job's import")
                if d["sum"] != sum(range(n)):
                    problems.append(f"rank {r}: all_reduce gave {d['sum']}, not {sum(range(n))}")
                if d["main"] != "__main__" or d["argv"] != [tmp, "ok"]:
                    problems.append(f"rank {r}: ran as {d['main']} with {d['argv']}")
                if not os.path.exists(os.path.join(tmp, f"exit{r}")):
                    problems.append(f"rank {r}: its atexit handler did not run")
            if len(ports) != 1 or len(runs) != 1 or None in runs:
                problems.append(f"the processes disagree on the port {ports} or the run id {runs}")
        if problems:
            failed += 1
            print("not ok 1 - " + "\n# ".join(problems))
        else:
            print(f"ok 1 - {n} processes with torchrun's environment formed a gloo group, the hooked module "
                  "imported by each itself, atexit handlers run, status 0")

        # 2. a process fails; the other, blocked, is ended
        try:
            p = launch(["--nproc-per-node", "2", prog, tmp, "fail"], timeout=240)
            if p.returncode != 7:
                failed += 1
                print(f"not ok 2 - a process exited 7 and the launch's status is {p.returncode}\n# "
                      + p.stderr[-2000:].replace("\n", "\n# "))
            else:
                print("ok 2 - a process exited 7: the launch's status is 7 and the other process was ended")
        except subprocess.TimeoutExpired:
            failed += 1
            print("not ok 2 - a process exited 7 and the launch never returned")

        # 3. a preload that would hide the hook's engagement
        p = launch(["--nproc-per-node", "2", "--preload", "torch.distributed.pipelining", prog, tmp, "ok"])
        lines = p.stderr.strip().splitlines()
        if p.returncode != 2 or len(lines) != 1 or "torch.distributed.pipelining" not in lines[0]:
            failed += 1
            print(f"not ok 3 - --preload torch.distributed.pipelining: status {p.returncode}, said {lines}")
        else:
            print(f"ok 3 - a preload of a hooked module refused: {lines[0]}")
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
