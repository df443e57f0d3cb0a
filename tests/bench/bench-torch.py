#!/usr/bin/env python3
"""bench-torch.py CLI — what recording costs a PyTorch job (issue 14).

A 2-rank CPU gloo job (tests/pytorch/train.py, Schedule1F1B, M=8, 4 linear
layers of width 256 per stage, batch 64; bench-run's P=2, M=8 shape).

Cost, in paired steps (as bench-run measures the probe): in one process,
every other step is recorded (PIPESCOPE_BENCH_ALTERNATE: the hook passes
the others through untouched; torch.profiler, CPU activities, the tool
users reach for today, on a wait=1/active=1 schedule), so each recorded
step has an unrecorded neighbour under the same load.  A step's time is
the slower rank's; the cost is the median over pairs of recorded /
unrecorded, over ROUNDS runs each.  Target for the hook: < 1.01.

CPU: wall-clock pairs on a machine with fewer cores than the job has busy
threads measure the machine as much as the hook (two training processes on
two cores: the recording's threads can only run by taking a core from the
job).  So beside them, from whole runs recording every step (plain, under
profile, under torch.profiler; ROUNDS each, medians), what recording costs
in CPU time, which load changes far less: the main thread's CPU a step
against the plain run's, the recording threads' (pp-drain, pp-live) and the
collector's (profile's own, sampled from /proc while it runs), each over the
plain run's step time.  On a machine with a core to spare, only the main
thread's part lengthens a step.

The same pairs in the main thread's CPU time a step (time.thread_time):
what the hook adds to the thread that runs the blocks, less sensitive to a
busy machine than wall time (a thread that waits for a core is not charged).

Size: bytes a block in pipescope's trace against torch.profiler's Chrome
JSON, each recording every step of one run.  Needs PIPESCOPE_TORCH_PYTHON.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = int(os.environ.get("BENCH_TORCH_ROUNDS", "3"))
STEPS, WARM = 80, 10


def step_times(out):
    ranks = [json.load(open(os.path.join(out, f"rank{r}.json")))["step_s"] for r in (0, 1)]
    return [max(a, b) for a, b in zip(*ranks)]


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py:
        print("bench-torch: skipped: PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test sets it)")
        return 77
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    tmp = tempfile.mkdtemp(prefix="pp-bench-torch-")
    env["XDG_RUNTIME_DIR"] = tmp
    os.chmod(tmp, 0o700)
    base = [torchrun, "--standalone", "--nproc-per-node", "2", os.path.join(HERE, "..", "pytorch", "train.py"),
            "--schedule", "Schedule1F1B", "--microbatches", "8", "--layers", "4", "--width", "256",
            "--batch", "64", "--steps", str(STEPS)]

    def run(cmd, extra_env, what, own_cpu=None, until=None):
        """own_cpu: a list that gets the command's own CPU seconds (not its
        children's), sampled from /proc every 50 ms until the files until
        names exist (the ranks' reports, written when training ends)."""
        p = subprocess.Popen(cmd, env=dict(env, **extra_env), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        last = [0.0]
        done = threading.Event()

        def sample():
            tick = os.sysconf("SC_CLK_TCK")
            while not done.is_set() and not all(os.path.exists(u) for u in until or []):
                try:
                    with open(f"/proc/{p.pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    if fields[0] != "Z":
                        last[0] = (int(fields[11]) + int(fields[12])) / tick
                except (OSError, IndexError):
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=sample, daemon=True)
        if own_cpu is not None:
            t.start()
        try:
            _, err = p.communicate(timeout=600)
        finally:
            done.set()
        if p.returncode != 0:
            raise SystemExit(f"bench-torch: {what} failed:\n{err[-2000:]}")
        if own_cpu is not None:
            t.join()
            own_cpu.append(last[0])

    # the hook alone: its environment as profile sets it, no collector
    lib = os.environ.get("PIPESCOPE_LIB") or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(cli))),
                                                          "probe", "libpipescope-probe.so")
    pkg = os.path.normpath(os.path.join(HERE, "..", "..", "probe", "python"))
    hook_env = {"PYTHONPATH": os.path.join(pkg, "pipescope", "_autoload"), "PIPESCOPE_PYTHON": pkg,
                "PIPESCOPE_LIB": lib, "PIPESCOPE_JOB": "bench-torch"}
    paired = {"pipescope": [], "hook alone": [], "torch.profiler": []}
    # the same pairs in the main thread's CPU time (time.thread_time a
    # step): what the hook adds to the thread that runs the blocks, which a
    # busy machine changes far less than it changes a step's wall time
    paired_cpu = {w: [] for w in paired}
    spread = {w: [] for w in paired}
    self_time = []
    for rnd in range(ROUNDS):
        for what in paired:
            out = os.path.join(tmp, f"pair-{what}-{rnd}")
            cmd = base + ["--out", out]
            extra = {"PIPESCOPE_BENCH_ALTERNATE": "1"}
            if what == "pipescope":
                cmd = [cli, "profile", "--trace", out + ".pptrace", "--"] + cmd
                on_even = True    # the hook records steps 0, 2, 4, ...
            elif what == "hook alone":
                extra.update(hook_env, PIPESCOPE_TRACE=out + ".pptrace", PIPESCOPE_FAST_SELFTIME="1")
                on_even = True
            else:
                cmd = cmd + ["--profile-trace", out + ".kineto"]
                on_even = False   # the profiler's wait=1, active=1: steps 1, 3, 5, ...
            run(cmd, extra, what)
            t = step_times(out)
            ratios = []
            for k in range(WARM - WARM % 2, STEPS - 1, 2):
                rec, plain = (t[k], t[k + 1]) if on_even else (t[k + 1], t[k])
                ratios.append(rec / plain)
            paired[what].append(statistics.median(ratios))
            # what the machine lets one run resolve: the standard error of
            # a median of these pairs (1.2533 sigma / sqrt(n))
            spread[what].append(1.2533 * statistics.stdev(ratios) / len(ratios) ** 0.5)
            per_rank = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)]
            extra, plain_s = [], []
            for d in per_rank:
                c = d["step_cpu_s"]
                diffs = []
                for k in range(WARM - WARM % 2, STEPS - 1, 2):
                    rec, unrec = (k, k + 1) if on_even else (k + 1, k)
                    diffs.append(c[rec] - c[unrec])
                    plain_s.append(t[unrec])
                extra.append(statistics.median(diffs))
            paired_cpu[what].append((statistics.mean(extra), statistics.median(plain_s)))
            if what == "hook alone":
                # the compiled wrappers' own time a recorded step (the
                # hook's Python around the step and the loss not in it)
                own = [statistics.median([x for x in d.get("hook_self_ns", [])[WARM:] if x > 0] or [0])
                       for d in per_rank]
                self_time.append((max(own) / 1e9, statistics.median(plain_s)))

    # whole runs, every step recorded: CPU time, and the files' sizes
    sizes = {}
    cpu = {w: {"main": [], "threads": [], "collector": [], "step": []}
           for w in ("plain", "pipescope", "torch.profiler")}

    def cpu_of(out, what):
        per_rank = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)]
        c = cpu[what]
        # a step's: the ranks' mean, over the steps the run timed
        steps = len(per_rank[0]["step_s"])
        c["main"].append(statistics.mean(statistics.median(d["step_cpu_s"][WARM:]) for d in per_rank))
        c["threads"].append(statistics.mean(d["threads_cpu_s"].get("pp-drain", 0.0)
                                            + d["threads_cpu_s"].get("pp-live", 0.0)
                                            for d in per_rank) / steps)
        c["step"].append(statistics.median(max(a, b) for a, b in zip(*(d["step_s"] for d in per_rank))))

    for rnd in range(ROUNDS):
        out = os.path.join(tmp, f"whole-plain-{rnd}")
        run(base + ["--out", out], {}, "plain")
        cpu_of(out, "plain")
        out = os.path.join(tmp, f"whole-pipescope-{rnd}")
        own = []
        run([cli, "profile", "--trace", out + ".pptrace", "--"] + base + ["--out", out], {}, "pipescope",
            own_cpu=own, until=[os.path.join(out, f"rank{r}.json") for r in (0, 1)])
        cpu_of(out, "pipescope")
        cpu["pipescope"]["collector"].append(own[0] / STEPS / 2)   # a rank's share, setup included
        sizes["pipescope"] = os.path.getsize(out + ".pptrace")
        out = os.path.join(tmp, f"whole-profiler-{rnd}")
        run(base + ["--out", out, "--profile-trace", out + ".kineto"], {}, "torch.profiler")
        cpu_of(out, "torch.profiler")
        sizes["torch.profiler"] = sum(os.path.getsize(f"{out}.kineto.rank{r}.json") for r in (0, 1))

    print(f"bench-torch: 1F1B, 2 ranks, M=8, {STEPS} steps ({WARM} warm-up left out), "
          f"every other step recorded, {ROUNDS} runs each")
    for what, v in paired.items():
        print(f"  {what:15s} recorded/unrecorded step time, median of pairs: {statistics.median(v):.4f}"
              f"   runs " + " ".join(f"{x:.4f}" for x in v)
              + f"   (a run's standard error +-{statistics.median(spread[what]):.4f})")
    print("  main thread's CPU a step, recorded minus unrecorded, median of pairs (mean of the ranks), "
          "as a share of the unrecorded step:")
    for what, v in paired_cpu.items():
        share = [x / st for x, st in v]
        print(f"  {what:15s} {statistics.median(x for x, _ in v) * 1e6:+8.0f} us  {statistics.median(share):+.2%}"
              f"   runs " + " ".join(f"{x:+.2%}" for x in share))
    if self_time and max(x for x, _ in self_time) > 0:
        print(f"  hook alone      its compiled wrappers' own time a recorded step, slower rank: "
              f"{statistics.median(x for x, _ in self_time) * 1e6:.0f} us, "
              f"{statistics.median(x / st for x, st in self_time):.2%} of the unrecorded step   runs "
              + " ".join(f"{x * 1e6:.0f}" for x, _ in self_time))
    med = {w: {k: (statistics.median(v) if v else 0.0) for k, v in c.items()} for w, c in cpu.items()}
    step = med["plain"]["step"]
    print(f"  CPU a step and rank, whole runs, medians of {ROUNDS}, as a share of the plain run's "
          f"step ({step * 1000:.2f} ms):")
    for what in ("pipescope", "torch.profiler"):
        m = med[what]
        extra_main = m["main"] - med["plain"]["main"]
        line = (f"  {what:15s} main thread {extra_main * 1000:+.3f} ms ({extra_main / step:+.2%})")
        if what == "pipescope":
            line += (f", recording threads {m['threads'] * 1000:.3f} ms ({m['threads'] / step:.2%})"
                     f", collector {m['collector'] * 1000:.3f} ms ({m['collector'] / step:.2%})"
                     f"; total {(extra_main + m['threads'] + m['collector']) / step:.2%}")
        print(line)
    blocks = 2 * 8 * 2 * STEPS   # F and B of 8 micro-batches on 2 ranks a step
    for what, n in sizes.items():
        print(f"  {what:15s} {n:10d} bytes for {STEPS} steps, {n / blocks:8.1f} bytes a block "
              f"(everything the file holds, over the {blocks} blocks)")
    for layout in MESH_LAYOUTS:
        mesh_bench(torchrun, env, hook_env, tmp, layout)
    return 0


# issue 27: the hook on a PP 2 x DP 2 job (tests/pytorch/mesh-train.py, 4
# processes): DDP (1F1B: the last backward's all-reduce cut out of its B,
# post-accumulate-grad hooks) and FSDP2 (Interleaved1F1B: UNSHARD's issue
# and wait, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD).  BENCH_TORCH_MESH=""
# leaves them out.
MESH_LAYOUTS = [x for x in os.environ.get("BENCH_TORCH_MESH", "ddp fsdp").split() if x]
MESH_STEPS = 40


def mesh_bench(torchrun, env, hook_env, tmp, layout):
    """The hook's self-time a step on a mesh job, every other step
    recorded (the hook alone): the main thread's CPU a recorded step minus
    its unrecorded neighbour's (every Python and C wrapper of the hook, the
    post-accumulate-grad hooks, the records), the compiled wrappers' own
    part, and the step's wall time; medians over pairs, the slowest
    process's share."""
    job = [torchrun, "--standalone", "--nproc-per-node", "4",
           os.path.join(HERE, "..", "pytorch", "mesh-train.py"), "--layout", layout, "--width", "256",
           "--microbatches", "8", "--steps", str(MESH_STEPS), "--timing"]
    rounds = []
    for rnd in range(ROUNDS):
        out = os.path.join(tmp, f"mesh-{layout}-{rnd}")
        extra = dict(hook_env, PIPESCOPE_TRACE=out + ".pptrace", PIPESCOPE_FAST_SELFTIME="1",
                     PIPESCOPE_BENCH_ALTERNATE="1")
        p = subprocess.run(job + ["--out", out], env=dict(env, **extra), capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"bench-torch: the {layout} mesh job failed:\n{p.stderr[-2000:]}")
        procs = [json.load(open(os.path.join(out, f"process{g}.json"))) for g in range(4)]
        wall = [max(x) for x in zip(*(d["step_s"] for d in procs))]
        # which steps were recorded: those the compiled wrappers ran in
        # (PIPESCOPE_BENCH_ALTERNATE records every other one); even ones
        # where the wrappers are not compiled
        own_ns = [sum(x) for x in zip(*(d["hook_self_ns"] or [0] * MESH_STEPS for d in procs))]
        first = 1 if sum(own_ns[1::2]) > sum(own_ns[0::2]) else 0
        pairs = range(WARM + first, MESH_STEPS - 1, 2)   # step k recorded, k + 1 not
        cpu = max(statistics.median(d["step_cpu_s"][k] - d["step_cpu_s"][k + 1] for k in pairs) for d in procs)
        own = max(statistics.median([d["hook_self_ns"][k] for k in pairs] or [0]) for d in procs) / 1e9
        plain = statistics.median(wall[k + 1] for k in pairs)
        ratio = statistics.median(wall[k] / wall[k + 1] for k in pairs)
        rounds.append((cpu, own, plain, ratio))
    cpu, own, plain, ratio = (statistics.median(r[i] for r in rounds) for i in range(4))
    print(f"bench-torch: PP 2 x DP 2 {layout} (mesh-train.py, width 256, M=8, {MESH_STEPS} steps, "
          f"every other recorded, {ROUNDS} runs): hook self-time a step (main thread CPU, recorded minus "
          f"unrecorded, slowest process) {cpu * 1e6:+.0f} us = {cpu / plain:+.2%} of the unrecorded step "
          f"{plain * 1000:.2f} ms; its compiled wrappers' part {own * 1e6:.0f} us; recorded/unrecorded "
          f"wall {ratio:.4f}   runs " + " ".join(f"{r[0] * 1e6:+.0f}us/{r[2] * 1000:.1f}ms" for r in rounds))


if __name__ == "__main__":
    sys.exit(main())
