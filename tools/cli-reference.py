#!/usr/bin/env python3
"""Write docs/cli.md's reference section from the built programs' --help.

usage: tools/cli-reference.py [BUILD_DIR]   (default: build)

Runs `pipescope-cli --help`, `pipescope-cli COMMAND --help` for every
command the first lists, and `pipescope --help` where the app is built, and
puts their output, verbatim, between the page's reference markers.
test-docs checks that every option they print appears on the page.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, 'docs', 'cli.md')
BEGIN, END = '<!-- reference: begin -->', '<!-- reference: end -->'


def helps(build):
    """[(title, text)] of every --help, in the order the CLI lists them."""
    cli = os.path.join(build, 'app', 'cli', 'pipescope-cli')
    top = subprocess.run([cli, '--help'], capture_output=True, text=True, check=True).stdout
    out = [('pipescope-cli', top)]
    for cmd in re.findall(r'^  ([a-z]+)\s', top.split('Commands:', 1)[1], re.M):
        r = subprocess.run([cli, cmd, '--help'], capture_output=True, text=True)
        out.append(('pipescope-cli ' + cmd, r.stdout + r.stderr))
    app = os.path.join(build, 'app', 'gui', 'pipescope')
    if os.path.exists(app):
        r = subprocess.run([app, '--help-all'], capture_output=True, text=True,
                           env=dict(os.environ, GTK_A11Y='none'))
        out.append(('pipescope', r.stdout))
    return out


def section(build):
    parts = [BEGIN]
    for title, text in helps(build):
        parts += ['', '### `%s`' % title, '', '```', text.rstrip('\n'), '```']
    parts.append(END)
    return '\n'.join(parts)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'build')
    page = open(PAGE).read()
    if BEGIN not in page or END not in page:
        sys.exit('cli-reference: %s has no reference markers' % PAGE)
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    open(PAGE, 'w').write(head + section(build) + tail)


if __name__ == '__main__':
    main()
