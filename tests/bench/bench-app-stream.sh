#!/bin/sh
# bench-app-stream — the benchmark: while a job streams >= 100,000
# spans a second, the window keeps >= 30 frames a second and its main loop
# never blocks.  A simulated ZBV job (16 ranks, 64 micro-batches, ~6,100
# spans a step) is served at --speed S, and the real window attaches to it
# under Xvfb with --self-test=bench-stream, which prints
#   bench-stream: N spans/s, F fps, main-loop gap max X ms p99 Y ms
# Exits non-zero only if something fails to run; the figures are reported,
# not judged.
#
# Usage: bench-app-stream.sh PIPESCOPE-CLI PIPESCOPE [SPEED]
#        (SPEED also from $BENCH_SPEED; default 8, about 123,000 spans/s)
set -u

cli=${1:?usage: bench-app-stream.sh PIPESCOPE-CLI PIPESCOPE [SPEED]}
app=${2:?usage: bench-app-stream.sh PIPESCOPE-CLI PIPESCOPE [SPEED]}
speed=${3:-${BENCH_SPEED:-8}}

if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "bench-app-stream: xvfb-run not found" >&2
  exit 1
fi

tmp=$(mktemp -d) || exit 1
chmod 700 "$tmp"
server=
cleanup () {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null
    wait "$server" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A private runtime dir (the job registry lives there) and cache (the app
# keeps a copy of what it receives there).
export XDG_RUNTIME_DIR="$tmp/run" XDG_CACHE_HOME="$tmp/cache"
mkdir -p "$XDG_RUNTIME_DIR" "$XDG_CACHE_HOME"
chmod 700 "$XDG_RUNTIME_DIR"

"$cli" schedule -s ZBV -p 16 -m 64 -f actions --serve --speed "$speed" \
  >/dev/null 2>"$tmp/server.err" &
server=$!

# Wait until it serves ("serving NAME (pid N) on ...").
i=0
until grep -q '^serving ' "$tmp/server.err" 2>/dev/null; do
  if ! kill -0 "$server" 2>/dev/null; then
    echo "bench-app-stream: the job did not start:" >&2
    cat "$tmp/server.err" >&2
    server=
    exit 1
  fi
  i=$((i + 1))
  if [ "$i" -gt 100 ]; then
    echo "bench-app-stream: the job did not start serving within 10 s" >&2
    exit 1
  fi
  sleep 0.1
done
echo "bench-app-stream: ZBV P=16 M=64 served at --speed $speed (pid $server)"

# Twice: with GTK's default renderer (GL; under Xvfb that is llvmpipe, GL in
# software on these CPUs) and with the cairo renderer (what a machine without
# a GPU for the display does best).  GSK_RENDERER, if set, picks one.
for renderer in ${GSK_RENDERER:-default cairo}; do
  if [ "$renderer" = default ]; then r_env=NO_RENDERER_OVERRIDE=1; else r_env=GSK_RENDERER=$renderer; fi
  xvfb-run -a env GTK_A11Y=none NO_AT_BRIDGE=1 "$r_env" "$app" --attach "$server" \
    --self-test=bench-stream >"$tmp/app.out" 2>"$tmp/app.err"
  rc=$?
  line=$(grep '^bench-stream: ' "$tmp/app.out")
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
    echo "bench-app-stream: the app failed (exit $rc, renderer $renderer):" >&2
    cat "$tmp/app.err" >&2
    exit 1
  fi
  echo "$line (renderer: $renderer)"
done
if ! kill -0 "$server" 2>/dev/null; then
  echo "bench-app-stream: the job died during the run:" >&2
  cat "$tmp/server.err" >&2
  server=
  exit 1
fi
grep -i 'drop\|error' "$tmp/server.err" >&2
exit 0
