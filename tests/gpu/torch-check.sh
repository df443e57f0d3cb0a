#!/bin/sh
# torch-check.sh CLI OUT — a PyTorch job on the GPU machine's one GPU under
# `pipescope-cli profile` (issue 14): one process holding two stages
# (LoopedBFS, V=2), block times from CUDA events.  Prints the trace's info
# and the step times with and without the hook; leaves the traces in OUT.
# Needs python3 with torch (the GPU machine has 2.11).
set -u
cli=$1; out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
py=${PYTHON:-python3}
torchrun="$py -m torch.distributed.run"
if ! $py -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "torch-check: skipped: no CUDA device for PyTorch"; exit 77
fi
args="--standalone --nproc-per-node 1 $here/pytorch/train.py --device cuda --schedule ScheduleLoopedBFS \
  --stages-per-rank 2 --microbatches 8 --steps 30 --width 2048 --layers 4 --batch 256"
$torchrun $args --out "$out/plain" > "$out/plain.log" 2>&1 || { tail "$out/plain.log"; exit 1; }
"$cli" profile --trace "$out/job.pptrace" -- $torchrun $args --out "$out/prof" > "$out/prof.log" 2>&1 \
  || { tail "$out/prof.log"; exit 1; }
"$cli" info "$out/job.pptrace"
$py - "$out" <<'PY'
import json, sys, statistics
d = sys.argv[1]
a = json.load(open(f"{d}/plain/rank0.json")); b = json.load(open(f"{d}/prof/rank0.json"))
ma, mb = statistics.median(a["step_s"][5:]), statistics.median(b["step_s"][5:])
print(f"step median plain {ma*1e3:.3f} ms, under profile {mb*1e3:.3f} ms, ratio {mb/ma:.4f}")
print("losses equal:", a["losses"] == b["losses"])
PY
