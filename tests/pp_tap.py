"""pp_tap.py — what the Python tests share: TAP lines (ok, fail) and a
trace's spans through `pipescope-cli export --format csv`."""

import csv
import os
import subprocess
import sys

_n = 0


def ok(msg):
    """One passed check: "ok N - msg"."""
    global _n
    _n += 1
    print(f"ok {_n} - {msg}")


def fail(msg):
    """The next check failed: "not ok N - msg" (later lines as comments), exit 1."""
    print(f"not ok {_n + 1} - " + msg.replace("\n", "\n# "))
    sys.exit(1)


def spans_of(cli, trace, tmp):
    """The trace's spans as the CSV export's rows (dicts), or fail."""
    out = os.path.join(tmp, "spans.csv")
    p = subprocess.run([cli, "export", trace, "--format", "csv", "-o", out],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"export {trace}: {p.stderr.strip()}")
    with open(out) as f:
        return list(csv.DictReader(f))
