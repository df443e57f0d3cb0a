#!/usr/bin/env python3
"""bench-export SYNTH CLI — the Chrome export of a large mesh, whole against
filtered (issue 36): a 16 x 128 job (2,048 processes, M = 32, 3 steps, each
block's transfers: pp-synth-mesh --comm, the job issue 36 measured at 403 MB
in 14 s), exported

  (1) whole, as before export took --steps, --ranks and --replicas;
  (2) one step, every process: --steps 1;
  (3) one step of 8 replicas: --steps 1 --replicas 0-7.

Prints, for each, the median over RUNS runs of the wall time and of the CPU
time (user + system: steadier than the wall on a loaded machine), the size
written, and each against (1).  A filter keeps what it selects and the
tracks' names: the size and the writing scale with the spans kept; the
whole trace is read either way.

Exits non-zero only if a command fails or a filtered export is not smaller."""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

P, D, M, STEPS = 16, 128, 32, 3
RUNS = int(os.environ.get("PIPESCOPE_BENCH_EXPORT_RUNS", "3"))


def timed(argv):
    """(wall s, cpu s) of one run of argv."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench-export: {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    synth, cli = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="bench-export-")
    try:
        base = os.path.join(tmp, "job")
        subprocess.run([synth, base, str(P), str(D), str(M), str(STEPS), "1f1b", "--comm"], check=True,
                       timeout=600)
        trace = base + ".pptrace"
        files = [f"{base}.rank{g}" for g in range(P * D)]
        subprocess.run([cli, "merge", "-o", trace, *files], check=True, capture_output=True, timeout=600)
        for f in files:
            os.unlink(f)
        cases = [("whole", []), ("--steps 1", ["--steps", "1"]),
                 ("--steps 1 --replicas 0-7", ["--steps", "1", "--replicas", "0-7"])]
        out = os.path.join(tmp, "out.json")
        res = {}
        for i in range(RUNS):
            for name, args in cases:   # interleaved: the machine's load falls on each alike
                w, c = timed([cli, "export", trace, "--format", "chrome", "-o", out, *args])
                size = os.path.getsize(out)
                os.unlink(out)
                r = res.setdefault(name, {"wall": [], "cpu": [], "size": size})
                r["wall"].append(w)
                r["cpu"].append(c)
        whole = res["whole"]
        mw, mc = statistics.median(whole["wall"]), statistics.median(whole["cpu"])
        print(f"bench-export: Chrome export of a {P} x {D} job ({P * D} processes, M = {M}, {STEPS} steps, "
              f"with transfers), median of {RUNS}:")
        bad = False
        for name, _ in cases:
            r = res[name]
            w, c = statistics.median(r["wall"]), statistics.median(r["cpu"])
            print(f"  {name:26s} {r['size'] / 1e6:8.1f} MB  wall {w:6.2f} s  cpu {c:6.2f} s  "
                  f"against whole: size {r['size'] / whole['size']:.3f}, wall {w / mw:.3f}, cpu {c / mc:.3f}")
            bad |= name != "whole" and r["size"] >= whole["size"]
        if bad:
            sys.exit("bench-export: a filtered export is not smaller than the whole one")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
