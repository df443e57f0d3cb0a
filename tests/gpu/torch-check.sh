#!/bin/sh
# torch-check.sh CLI OUT — PyTorch jobs on the GPU machine's one GPU under
# `pipescope-cli profile` (issue 14): one process holding two stages, block
# times from CUDA events, the kernels and copies of each block from the
# library's CUPTI collector.  Builds nothing; needs python3 with torch (the
# GPU machine has 2.11) and a build whose probe/ holds libpipescope-probe.so
# and libpipescope-cupti.so.  Each check prints one line, "torch-check: ok
# ..." or "torch-check: FAIL ...":
#   1. a plain run and one under profile (LoopedBFS, V=2, CUPTI on): the
#      losses bit for bit (the hook runs each backward on the calling
#      thread while CUPTI tags it);
#   2. that profiled trace: every F and B block has kernels as children
#      (its rank, stage, micro-batch and step, inside its span), and no
#      tagged device span lies outside its block;
#   3. the same for I and W (InterleavedZeroBubble, V=2; ZBVZeroBubble if
#      that cannot run on one rank);
#   4. (measured, not checked) the step time with CUPTI on and off
#      (PIPESCOPE_CUPTI=0), three pairs of profiled runs in alternating
#      order, each run's median step after 5 warm-up steps, and the plain
#      run's beside them.
# Leaves traces, CSV exports and logs in OUT.  Exit: 0 all ok, 1 a check
# failed, 77 no CUDA device for PyTorch.  About 10 job starts: 2-4 minutes.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 CLI OUT" >&2
  exit 2
fi
cli=$1; out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
py=${PYTHON:-python3}
torchrun="$py -m torch.distributed.run"
limit=${PP_TORCH_CHECK_TIMEOUT:-180}   # seconds, each job
if ! $py -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "torch-check: skipped: no CUDA device for PyTorch"; exit 77
fi
# A GPU machine may lack the build's non-CUDA libraries (GLib): the
# build's device-libs.tar.xz (tests/gpu/bundle-libs.sh), as device-check.sh.
build=$(cd "$(dirname "$cli")/../.." && pwd)
if [ -f "$build/device-libs.tar.xz" ] && [ ! -d "$out/device-libs" ]; then
  tar -C "$out" -xJf "$build/device-libs.tar.xz" || echo "torch-check: cannot unpack $build/device-libs.tar.xz"
fi
if [ -d "$out/device-libs" ]; then
  LD_LIBRARY_PATH="$out/device-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
status=0
say() { echo "torch-check: $*"; }
fail() { say "FAIL $*"; status=1; }

job="--standalone --nproc-per-node 1 $here/pytorch/train.py --device cuda --stages-per-rank 2 \
  --microbatches 8 --width 2048 --layers 4 --batch 256"
# run NAME [ENV=VALUE...] -- ARGS...: torchrun under profile (or plain with
# NAME plain*), its output in OUT/NAME/, its log OUT/NAME.log
run() {
  name=$1; shift
  envs=""
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  case $name in
    plain*) cmd="$torchrun $job $* --out $out/$name" ;;
    *) cmd="$cli profile --trace $out/$name.pptrace -- $torchrun $job $* --out $out/$name" ;;
  esac
  # shellcheck disable=SC2086  # word splitting of the command is wanted
  env $envs timeout "$limit" $cmd > "$out/$name.log" 2>&1
}

# ---- 1. losses, plain and profiled (CUPTI on) -------------------------------
if ! run plain -- --schedule ScheduleLoopedBFS --steps 30; then
  fail "the plain run failed:"; tail "$out/plain.log"; exit 1
fi
if ! run prof -- --schedule ScheduleLoopedBFS --steps 30; then
  fail "the profiled run failed:"; tail "$out/prof.log"; exit 1
fi
grep "^pipescope:" "$out/prof.log" | head -5
"$cli" info "$out/prof.pptrace" | head -30
if $py - "$out/plain/rank0.json" "$out/prof/rank0.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if a["losses"] == b["losses"] and a["params"] == b["params"] else 1)
PY
then say "ok losses and weights bit for bit, plain and profiled with CUPTI"
else fail "losses or weights differ between the plain and the profiled run"
fi

# ---- 2, 3. kernels as children of their blocks --------------------------------
# children CSV KINDS: each block of KINDS (letters) has device children
children() {
  $py - "$1" "$2" <<'PY'
import csv, sys
path, kinds = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(path)))
dev = [r for r in rows if r["kind"] in ("KERNEL", "MEMCPY", "MEMSET")]
key = lambda r: (r["rank"], r["stage"], r["microbatch"], r["step"])
by = {}
for d in dev:
    if d["stage"] != "-1":
        by.setdefault(key(d), []).append((int(d["start_ns"]), int(d["end_ns"])))
blocks = [r for r in rows if r["kind"] in tuple(kinds)]
ok = True
inside = 0
for k in kinds:
    bs = [b for b in blocks if b["kind"] == k]
    n = [sum(1 for s, e in by.get(key(b), []) if s >= int(b["start_ns"]) and e <= int(b["end_ns"]))
         for b in bs]
    with_kids = sum(1 for x in n if x > 0)
    inside += sum(n)
    print(f"  {k}: {len(bs)} blocks, {with_kids} with device children, "
          f"{sum(n) / max(1, len(bs)):.1f} children a block")
    ok &= len(bs) > 0 and with_kids == len(bs)
tagged = sum(len(v) for v in by.values())
untagged = sum(1 for d in dev if d["stage"] == "-1")
named = sum(1 for d in dev if d["name"])
print(f"  device spans: {len(dev)}, {tagged} tagged with a block, {untagged} untagged "
      f"(the step's own work, or launched where no block was pushed), {named} named")
# a tagged span of a kind checked here but outside every block of its tags
blocks_by = {}
for b in rows:
    if b["kind"] in ("F", "B", "I", "W", "OVERLAP_F_B"):
        blocks_by.setdefault(key(b), []).append((int(b["start_ns"]), int(b["end_ns"])))
outside = sum(1 for d in dev if d["stage"] != "-1"
              and not any(s <= int(d["start_ns"]) and int(d["end_ns"]) <= e for s, e in blocks_by.get(key(d), [])))
print(f"  tagged device spans outside their block: {outside}")
sys.exit(0 if ok and outside == 0 else 1)
PY
}
if "$cli" export "$out/prof.pptrace" --format csv -o "$out/prof.csv" && children "$out/prof.csv" FB; then
  say "ok every F and B block has kernels as children (LoopedBFS)"
else
  fail "F or B blocks without kernel children, or tagged kernels outside their block (LoopedBFS)"
fi
zb=ScheduleInterleavedZeroBubble
if ! run zb -- --schedule $zb --steps 10; then
  tail -3 "$out/zb.log"
  zb=ScheduleZBVZeroBubble
  run zb -- --schedule $zb --steps 10 || { fail "neither zero-bubble schedule ran on one rank:"; tail "$out/zb.log"; }
fi
if [ -f "$out/zb.pptrace" ] && "$cli" export "$out/zb.pptrace" --format csv -o "$out/zb.csv" \
   && children "$out/zb.csv" FIW; then
  say "ok every F, I and W block has kernels as children ($zb)"
else
  fail "F, I or W blocks without kernel children ($zb)"
fi

# ---- 4. step time, CUPTI on and off, paired -----------------------------------
pairs="on off
off on
on off"
i=0
echo "$pairs" | while read -r first second; do
  i=$((i + 1))
  for m in $first $second; do
    if [ "$m" = on ]; then e=PIPESCOPE_CUPTI=1; else e=PIPESCOPE_CUPTI=0; fi
    run "t$i$m" "$e" -- --schedule ScheduleLoopedBFS --steps 40 \
      || { say "timing run t$i$m failed (left out)"; tail -3 "$out/t$i$m.log"; }
  done
done
if ! $py - "$out" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def med(name):
    p = f"{d}/{name}/rank0.json"
    return statistics.median(json.load(open(p))["step_s"][5:]) if os.path.exists(p) else None
plain = med("plain")
ratios = []
for i in (1, 2, 3):
    on, off = med(f"t{i}on"), med(f"t{i}off")
    if on and off:
        ratios.append(on / off)
        print(f"  pair {i}: CUPTI on {on * 1e3:.3f} ms, off {off * 1e3:.3f} ms a step, on/off {on / off:.4f}")
if ratios:
    print(f"torch-check: measured step time with CUPTI on / off, median of {len(ratios)} pairs: "
          f"{statistics.median(ratios):.4f}; plain (no hook) {plain * 1e3:.3f} ms a step")
else:
    print("torch-check: FAIL no timing pair ran")
    sys.exit(1)
PY
then
  status=1
fi
if [ $status -eq 0 ]; then say "all checks ok"; else say "a check failed"; fi
exit $status
