#!/usr/bin/env bash
# tools/screenshot.sh [OUT.png] — the README's screenshot, made the way a user
# sees the app: pipescope starts its default run under a virtual X server (wide,
# so the pointer, at its centre, rests beside the window, not on a block), and
# after a few seconds of live training the whole screen is captured.
# Needs: the build (./dev.sh test or ./dev.sh run once), xvfb, imagemagick.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="${1:-$here/docs/screenshot.png}"
app="${PIPESCOPE_BUILD_DIR:-$here/build}/app/gui/pipescope"
wait_s="${SCREENSHOT_WAIT:-10}"
[ -x "$app" ] || { echo "screenshot.sh: no $app; build first (./dev.sh test)" >&2; exit 1; }
command -v xvfb-run >/dev/null && command -v import >/dev/null \
  || { echo "screenshot.sh: needs xvfb-run and import (apt-get install xvfb imagemagick)" >&2; exit 1; }
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
# GL under Xvfb is llvmpipe, which competes with the training threads for the
# cores; the cairo renderer leaves them the machine.  No session bus: a
# pipescope running on the desktop would take the run (the app is unique
# on its bus) and this one would exit before its picture.
env -u DBUS_SESSION_BUS_ADDRESS XDG_RUNTIME_DIR="$runtime" GTK_A11Y=none GSK_RENDERER="${GSK_RENDERER:-cairo}" xvfb-run -a -s "-screen 0 3200x1000x24" \
  bash -c "\"$app\" & pid=\$!; sleep $wait_s; import -window root png:- | convert - -trim +repage \"$out\"; kill \$pid; wait \$pid || true"
echo "$out"
