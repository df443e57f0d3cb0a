#!/usr/bin/env bash
# tools/straggler-screenshot.sh [OUT.png] — docs/stragglers.md's picture:
# tests/pytorch/mesh-train.py's DDP job, PP 2 x DP 4 (8 processes, CPU,
# gloo), process 3 sleeping 50 ms in each forward, recorded by
# `pipescope-cli profile`; `render --heatmap` (stages x replicas, colored by
# slowdown) beside one step of the folded timeline (`render --replicas
# fold`), and info's straggler table printed.
# Needs: the build, PIPESCOPE_TORCH_PYTHON (a Python with torch 2.15, as
# the tests use), imagemagick's convert.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="${1:-$here/docs/stragglers.png}"
cli="${PIPESCOPE_BUILD_DIR:-$here/build}/app/cli/pipescope-cli"
py="${PIPESCOPE_TORCH_PYTHON:?set PIPESCOPE_TORCH_PYTHON to a Python with torch}"
command -v convert >/dev/null || { echo "straggler-screenshot.sh: needs convert (apt-get install imagemagick)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/rt"
XDG_RUNTIME_DIR="$tmp/rt" OMP_NUM_THREADS=1 "$cli" profile --trace "$tmp/job.pptrace" -- \
  "$(dirname "$py")/torchrun" --standalone --nproc-per-node 8 "$here/tests/pytorch/mesh-train.py" \
  --layout ddp --steps 4 --microbatches 4 --out "$tmp/out" --slow-forward 3:0.05 >/dev/null 2>&1
"$cli" info "$tmp/job.pptrace" | sed -n '/^stragglers (/,/^dropped/p' | grep -v '^dropped'
"$cli" render "$tmp/job.pptrace" --heatmap -o "$tmp/heat.png" -W 560 -H 330
"$cli" render "$tmp/job.pptrace" -o "$tmp/fold.png" --steps 2 -W 1000 -H 330 --replicas fold 2>/dev/null
convert "$tmp/heat.png" "$tmp/fold.png" +append "$out"
echo "$out"
