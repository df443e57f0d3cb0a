#!/usr/bin/env bash
# tools/why-screenshot.sh TRACE [OUT.png] — the README's picture of the host
# lane and the Why tab: pipescope opens TRACE under a virtual X server
# (--self-test=demo-why: its last two steps zoomed, the Why tab shown), and
# the screen is captured (the pointer moved to a corner first, so that no
# tooltip shows), trimmed, and written as a small PNG.
# Needs: the build, xvfb, imagemagick (xdotool to move the pointer).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
trace="${1:?usage: tools/why-screenshot.sh TRACE [OUT.png]}"
out="${2:-$here/docs/images/host-lane-why.png}"
app="${PIPESCOPE_BUILD_DIR:-$here/build}/app/gui/pipescope"
wait_s="${SCREENSHOT_WAIT:-6}"
[ -x "$app" ] || { echo "why-screenshot.sh: no $app; build first" >&2; exit 1; }
command -v xvfb-run >/dev/null && command -v import >/dev/null \
  || { echo "why-screenshot.sh: needs xvfb-run and import (apt-get install xvfb imagemagick)" >&2; exit 1; }
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
XDG_RUNTIME_DIR="$runtime" GTK_A11Y=none GSK_RENDERER=cairo GSETTINGS_BACKEND=memory \
  xvfb-run -a -s "-screen 0 1800x1000x24" \
  bash -c "\"$app\" --self-test=demo-why \"$trace\" & pid=\$!; sleep $wait_s; xdotool mousemove 1799 999 2>/dev/null || true; sleep 1; import -window root png:- | convert - -trim +repage -colors 128 \"$out\"; kill \$pid; wait \$pid || true"
echo "$out"
