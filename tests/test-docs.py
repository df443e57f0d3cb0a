#!/usr/bin/env python3
"""The manual: the front page stays short, every link resolves, and the
command-line page names every option the programs' --help prints.

usage: test-docs.py SOURCE_DIR PIPESCOPE_CLI [PIPESCOPE_APP]

TAP output.  A link is checked where it points into the tree: the file
exists and, for `page.md#anchor`, the page has a heading whose GitHub slug
is the anchor.  Web links (http, https, mailto) are not fetched.
"""
import os
import re
import subprocess
import sys

import pp_tap

LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^(```|~~~)')


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped but
    '-' and '_', spaces to '-'."""
    h = heading.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')


def prose(path):
    """The page's lines outside fenced code blocks."""
    out, fenced = [], False
    for line in open(path, encoding='utf-8'):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def anchors(path):
    seen, out = {}, set()
    for line in prose(path):
        m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else '%s-%d' % (s, n))
    for line in prose(path):   # explicit anchors: <a id="x"></a>
        out.update(re.findall(r'<a (?:id|name)="([^"]+)"', line))
    return out


def broken_links(page):
    bad = []
    here = os.path.dirname(page)
    for line in prose(page):
        for target in LINK.findall(line):
            if re.match(r'^[a-z]+:', target):
                continue
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(here, path)) if path else page
            if not os.path.exists(dest):
                bad.append('%s: %s (no such file)' % (os.path.basename(page), target))
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                bad.append('%s: %s (no such heading)' % (os.path.basename(page), target))
    return bad


def options(text):
    return set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', text))


def helps(cli, app):
    top = subprocess.run([cli, '--help'], capture_output=True, text=True, timeout=60).stdout
    out = {'pipescope-cli': top}
    for cmd in re.findall(r'^  ([a-z]+)\s', top.split('Commands:', 1)[1], re.M):
        r = subprocess.run([cli, cmd, '--help'], capture_output=True, text=True, timeout=60)
        out['pipescope-cli ' + cmd] = r.stdout + r.stderr
    if app and os.path.exists(app):
        r = subprocess.run([app, '--help-all'], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, GTK_A11Y='none'))
        out['pipescope'] = r.stdout
    return out


def main():
    src, cli = sys.argv[1], sys.argv[2]
    app = sys.argv[3] if len(sys.argv) > 3 else None
    docs = os.path.join(src, 'docs')
    readme = os.path.join(src, 'README.md')
    pages = [readme] + sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith('.md'))
    checks = 0

    def check(cond, msg):
        nonlocal checks
        checks += 1
        (pp_tap.ok if cond else pp_tap.fail)(msg)

    n = sum(1 for _ in open(readme, encoding='utf-8'))
    check(n <= 250, 'the front page is at most 250 lines (%d)' % n)

    bad = [b for p in pages for b in broken_links(p)]
    check(not bad, 'every link of README.md and docs/*.md resolves (%d pages)%s'
         % (len(pages), ''.join('\n  ' + b for b in bad)))

    linked = set()
    for target in LINK.findall(''.join(prose(readme))):
        linked.add(os.path.normpath(os.path.join(src, target.partition('#')[0])))
    orphans = [os.path.basename(p) for p in pages[1:] if os.path.normpath(p) not in linked]
    check(not orphans, 'the front page links every page of docs/%s'
         % ''.join('\n  not linked: ' + o for o in orphans))

    cli_page = ''.join(prose(os.path.join(docs, 'cli.md'))) + open(os.path.join(docs, 'cli.md')).read()
    documented = options(cli_page)
    h = helps(cli, app)
    check(len(h) >= 12, '--help of pipescope-cli, of each of its commands and of the app (%d)' % len(h))
    for prog, text in sorted(h.items()):
        missing = sorted(options(text) - documented)
        check(text.strip() and not missing, "docs/cli.md names every option `%s --help` prints%s"
             % (prog, (': missing ' + ', '.join(missing)) if missing else ''))
    print('1..%d' % checks)


if __name__ == '__main__':
    main()
