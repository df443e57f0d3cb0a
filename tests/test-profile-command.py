#!/usr/bin/env python3
"""test-profile-command.py CLI — profile leaves the command its own (issue 14).

  1. A command that runs no pipeline: its exit status (0, and 3) and its
     stdout, byte for byte, are profile's; what profile says (serving, no
     rank wrote a trace) is on stderr only.
  2. A command that does not exist: exit 127 and one line naming it, before
     anything registers (the registry folder holds no entry).
  3. PIPESCOPE_LIB naming no file: exit 2, one line naming it, the command
     not run.
No PyTorch needed.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from pp_tap import fail, ok  # noqa: E402 (tests/ is the script's folder, on sys.path)


def main():
    cli = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="pp-profile-cmd-")
    try:
        return checks(cli, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def checks(cli, tmp):
    os.chmod(tmp, 0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp)
    print("1..3")
    for code in (0, 3):
        script = f"import sys; sys.stdout.write('hi\\n'); sys.stdout.flush(); sys.exit({code})"
        p = subprocess.run([cli, "profile", "--trace", os.path.join(tmp, "t.pptrace"), "--",
                            sys.executable, "-c", script], env=env, cwd=tmp, capture_output=True,
                           text=True, timeout=120)
        # the trace promised is not there: not 0, and one line with the command's status
        if p.returncode != (code or 1):
            fail(f"exit {p.returncode} for a command that exits {code} and leaves no trace:\n{p.stderr}")
        if p.stdout != "hi\n":
            fail(f"stdout is not the command's own: {p.stdout!r}")
        said = [x for x in p.stderr.splitlines() if "no rank wrote a trace" in x]
        if len(said) != 1 or f"the command exited {code}, but no trace was written" not in said[0]:
            fail(f"profile did not say in one line why it has no trace:\n{p.stderr}")
    ok("no pipeline: exit 1 for a command that exits 0 (3 for 3), one line saying no trace was written "
       "with the command's status; stdout the command's")

    reg = os.path.join(tmp, "pipescope")
    before = set(os.listdir(reg)) if os.path.isdir(reg) else set()
    p = subprocess.run([cli, "profile", "--", "pipescope-no-such-command", "x"], env=env, cwd=tmp,
                       capture_output=True, text=True, timeout=60)
    after = set(os.listdir(reg)) if os.path.isdir(reg) else set()
    lines = p.stderr.strip().splitlines()
    if p.returncode != 127 or len(lines) != 1 or "pipescope-no-such-command" not in lines[0]:
        fail(f"a missing command: exit {p.returncode}, stderr {p.stderr!r}")
    if after - before:
        fail(f"a missing command registered {sorted(after - before)}")
    ok("a missing command: exit 127, one line naming it, nothing registered")

    marker = os.path.join(tmp, "ran")
    p = subprocess.run([cli, "profile", "--", sys.executable, "-c", f"open({marker!r}, 'w')"],
                       env=dict(env, PIPESCOPE_LIB="/nonexistent/libpipescope-probe.so"), cwd=tmp,
                       capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or "/nonexistent/libpipescope-probe.so" not in lines[0]:
        fail(f"PIPESCOPE_LIB naming no file: exit {p.returncode}, stderr {p.stderr!r}")
    if os.path.exists(marker):
        fail("the command ran although profile refused")
    ok("PIPESCOPE_LIB naming no file: exit 2, one line naming it, the command not run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
