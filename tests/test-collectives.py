#!/usr/bin/env python3
"""test-collectives.py CLI SYNTH — the collectives the hook counts inside
blocks (trace format 1.5: PP_COUNTER_COLLECTIVE_CALLS and _BYTES, one
value a step a process), read back per process (issue 27).

pp-synth-mesh --collectives writes a 2 x 2 job whose process G counts
10 + G + step calls and 1 MiB x (G + 1) bytes a step; merged, this checks
that

  1. info prints a line per process, at its place, with the per-step mean
     and the total of each, every replica on its own line;
  2. the Chrome export has the two counter tracks on each process's own
     track (the pid its process_name names), with each step's value;
  3. a trace without them prints no such section and has no such track.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CLI, SYNTH = sys.argv[1], sys.argv[2]
P, D, STEPS = 2, 2, 2
failures = 0
n_checks = 0


def check(cond, what):
    global failures, n_checks
    n_checks += 1
    print(("ok " if cond else "not ok ") + str(n_checks) + " - " + " ".join(what.split()))
    if not cond:
        failures += 1


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def job(tmp, name, *opts):
    base = os.path.join(tmp, name)
    rc, _, se = run(SYNTH, base, str(P), str(D), "4", str(STEPS), "1f1b", *opts)
    check(rc == 0, f"pp-synth-mesh {name}: {se.strip()}")
    out = base + ".pptrace"
    files = [f"{base}.rank{g}" for g in range(P * D)]
    rc, _, se = run(CLI, "merge", *files, "-o", out)
    check(rc == 0, f"merge {name}: {se.strip()}")
    return out


def chrome(trace):
    out = trace + ".json"
    rc, _, se = run(CLI, "export", trace, "--format", "chrome", "-o", out)
    check(rc == 0, f"export chrome: {se.strip()}")
    with open(out) as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def main():
    with tempfile.TemporaryDirectory(prefix="pp-collectives-") as tmp:
        trace = job(tmp, "counted", "--collectives")
        rc, info, se = run(CLI, "info", trace)
        check(rc == 0, f"info: {se.strip()}")
        lines = re.findall(r"^  process (\d+) \(pp (\d+) dp (\d+) tp 0\): calls ([\d.]+) a step, (\d+) in all "
                           r"\((\d+) steps\); bytes ([\d.]+) MiB a step, ([\d.]+) MiB in all", info, re.M)
        check(len(lines) == P * D, f"info: a collectives line a process ({len(lines)})")
        for g, pp, dp, mean, total, steps, bmean, btotal in lines:
            g = int(g)
            want = sum(10 + g + s for s in range(STEPS))
            check((int(pp), int(dp)) == (g // D, g % D), f"process {g} at its place pp {pp} dp {dp}")
            check(int(total) == want and float(mean) == want / STEPS and int(steps) == STEPS,
                  f"process {g}: calls {total} in all, {mean} a step (want {want})")
            check(float(bmean) == g + 1 and float(btotal) == STEPS * (g + 1),
                  f"process {g}: {bmean} MiB a step, {btotal} MiB in all")

        ev = chrome(trace)
        pid_of = {}
        for e in ev:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                m = re.search(r"\(process (\d+)\)", e["args"]["name"])
                if m:
                    pid_of[int(m.group(1))] = e["pid"]
        check(sorted(pid_of) == list(range(P * D)), f"a track a process ({sorted(pid_of)})")
        for g in range(P * D):
            calls = [e["args"]["calls"] for e in ev
                     if e.get("ph") == "C" and e["name"] == "collective calls a step" and e["pid"] == pid_of.get(g)]
            mib = [e["args"]["MiB"] for e in ev
                   if e.get("ph") == "C" and e["name"] == "collective bytes a step (MiB)" and e["pid"] == pid_of.get(g)]
            check(calls == [10 + g + s for s in range(STEPS)], f"process {g}: its calls track {calls}")
            check(mib == [g + 1] * STEPS, f"process {g}: its MiB track {mib}")

        plain = job(tmp, "plain")
        rc, info, _ = run(CLI, "info", plain)
        check(rc == 0 and "collectives inside" not in info, "no collectives: no such section")
        check(not any(e.get("ph") == "C" and e["name"].startswith("collective") for e in chrome(plain)),
              "no collectives: no such track")
    print(f"1..{n_checks}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
