#!/usr/bin/env bash
# tools/mesh-screenshot.sh [OUT.png] — the README's picture of a job of
# replicas (docs/mesh-fold.png): tests/pytorch/mesh-train.py's PP 2 x DP 2
# DDP job (4 processes, CPU, gloo) recorded by `pipescope-cli profile`, one
# step drawn by `render` folded (a row a pipeline rank) above the same step
# unfolded (--replicas all, a row a process).
# Needs: the build, PIPESCOPE_TORCH_PYTHON (a Python with torch 2.15, as
# the tests use), imagemagick's convert.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="${1:-$here/docs/mesh-fold.png}"
cli="${PIPESCOPE_BUILD_DIR:-$here/build}/app/cli/pipescope-cli"
py="${PIPESCOPE_TORCH_PYTHON:?set PIPESCOPE_TORCH_PYTHON to a Python with torch}"
command -v convert >/dev/null || { echo "mesh-screenshot.sh: needs convert (apt-get install imagemagick)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/rt"
XDG_RUNTIME_DIR="$tmp/rt" OMP_NUM_THREADS=1 "$cli" profile --trace "$tmp/job.pptrace" -- \
  "$(dirname "$py")/torchrun" --standalone --nproc-per-node 4 "$here/tests/pytorch/mesh-train.py" \
  --layout ddp --steps 4 --microbatches 4 --out "$tmp/out" >/dev/null
"$cli" render "$tmp/job.pptrace" -o "$tmp/fold.png" --steps 2 -W 1400 -H 330 --replicas fold
"$cli" render "$tmp/job.pptrace" -o "$tmp/all.png" --steps 2 -W 1400 -H 450 --replicas all
convert "$tmp/fold.png" "$tmp/all.png" -append "$out"
echo "$out"
