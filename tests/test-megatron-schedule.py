#!/usr/bin/env python3
"""test-megatron-schedule.py — `pipescope-cli schedule -s Megatron-Interleaved`
(and `-s Megatron-1F1B`) against megatron-core's own code.

The expected orders come from megatron-core itself, in the PyTorch virtual
environment (PIPESCOPE_TORCH_PYTHON): tools/gen-megatron-golden.py --grid test
runs its real schedule loop (forward_backward_pipelining_with_interleaving,
..._without_interleaving) once per rank with recording forward/backward steps,
cross-checked against its schedule-table helpers (get_schedule_table,
get_pp_rank_microbatches, convert_schedule_table_to_order), for a grid of P,
V, M and microbatch_group_size_per_vp_stage past the checked-in golden's
(P up to 8, V 4).  For every configuration:

  - megatron-core runs it: `schedule --format actions` prints exactly its
    per-rank order (virtual stage = chunk x P + rank), and one line says how
    it stands to PyTorch's Interleaved1F1B (equal, differs, or PyTorch
    cannot run it);
  - megatron-core refuses it: `schedule` exits 2 with one line that names
    the rule.

Skips (TAP "1..0 # SKIP") where PIPESCOPE_TORCH_PYTHON is unset or has no
megatron-core.  Usage: test-megatron-schedule.py PIPESCOPE_CLI
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pp_tap import fail, ok  # noqa: E402

TOOL = os.path.join(HERE, "..", "tools", "gen-megatron-golden.py")


def records(text):
    """(name, P, V, M, G, reject-or-None, [rank orders]) of the tool's output."""
    out, cur = [], None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        w = line.split()
        if w[0] == "schedule":
            kv = dict(zip(w[2::2], map(int, w[3::2])))
            cur = [w[1], kv["P"], kv["V"], kv["M"], kv["G"], None, []]
        elif w[0] == "reject":
            cur[5] = line[len("reject "):]
        elif w[0] == "rank":
            cur[6].append(w[2:])
        elif w[0] == "end":
            out.append(cur)
            cur = None
    return out


def cli_order(cli, name, P, V, M, G):
    cmd = [cli, "schedule", "-s", name, "-p", str(P), "-m", str(M), "-f", "actions"]
    if name == "Megatron-Interleaved":
        cmd += ["-v", str(V), "-g", str(G)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or not os.path.exists(py):
        print("1..0 # SKIP PIPESCOPE_TORCH_PYTHON is not set (./dev.sh test installs PyTorch and sets it)")
        return
    if subprocess.run([py, "-c", "import megatron.core"], capture_output=True).returncode != 0:
        print("1..0 # SKIP megatron-core is not installed in PIPESCOPE_TORCH_PYTHON's environment")
        return
    print("1..4")
    tmp = tempfile.mkdtemp(prefix="pp-msched-")
    try:
        expected = os.path.join(tmp, "expected.txt")
        p = subprocess.run([py, TOOL, "--grid", "test", "-o", expected],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            fail(f"megatron-core's orders: {p.stderr.strip()[-2000:]}")
        with open(expected) as f:
            recs = records(f.read())
        runs = [r for r in recs if r[5] is None]
        refused = [r for r in recs if r[5] is not None]
        if len(runs) < 50 or len(refused) < 20:
            fail(f"the grid is too thin: {len(runs)} orders, {len(refused)} refusals")
        ok(f"megatron-core's own loop gave {len(runs)} orders and {len(refused)} refusals "
           "(its schedule table agrees on each)")

        verdicts = {"equals": 0, "differs": 0, "cannot": 0}
        for name, P, V, M, G, _, ranks in runs:
            p = cli_order(cli, name, P, V, M, G)
            what = f"{name} P={P} V={V} M={M} G={G}"
            if p.returncode != 0:
                fail(f"{what}: megatron-core runs it, pipescope-cli refuses: {p.stderr.strip()}")
            lines = p.stdout.splitlines()
            got = [ln.split()[2:] for ln in lines if ln.startswith("rank ")]
            if got != ranks:
                r = next(i for i in range(max(len(got), len(ranks)))
                         if i >= len(got) or i >= len(ranks) or got[i] != ranks[i])
                fail(f"{what}: rank {r}:\n  pipescope: {' '.join(got[r]) if r < len(got) else '-'}"
                     f"\n  megatron:  {' '.join(ranks[r]) if r < len(ranks) else '-'}")
            if name == "Megatron-Interleaved":
                said = [ln for ln in lines if ln.startswith("megatron-core's order for")
                        or ln.startswith("PyTorch's Interleaved1F1B cannot run")]
                if len(said) != 1:
                    fail(f"{what}: no one line saying how it stands to Interleaved1F1B:\n{p.stdout}")
                key = "cannot" if "cannot run" in said[0] else "equals" if " equals " in said[0] else "differs"
                verdicts[key] += 1
                if key == "differs" and not any(ln.startswith("  rank ") and "PyTorch:" in ln for ln in lines):
                    fail(f"{what}: differs, but PyTorch's order is not shown:\n{p.stdout}")
        ok(f"pipescope-cli schedule prints megatron-core's order for all {len(runs)}")
        if min(verdicts.values()) == 0:
            fail(f"the grid does not cover every verdict: {verdicts}")
        ok(f"each interleaved order says how it stands to PyTorch's Interleaved1F1B: {verdicts}")

        for name, P, V, M, G, why, _ in refused:
            p = cli_order(cli, name, P, V, M, G)
            err = p.stderr.strip().splitlines()
            if p.returncode != 2 or len(err) != 1 or "megatron-core" not in err[0]:
                fail(f"{name} P={P} V={V} M={M} G={G}: megatron-core refuses ({why}); "
                     f"pipescope-cli exits {p.returncode} with {p.stderr!r}")
        ok(f"the {len(refused)} configurations megatron-core refuses are refused with one line")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
