#!/usr/bin/env bash
# test-mpi-hosts CLI MPI_FOUND — one job over two hosts: two network
# namespaces the test makes itself (a veth pair, addresses on a /24 of its
# own, distinct host names with unshare --uts), mpirun in the first
# reaching the second through an rsh agent that enters its namespace, and a
# viewer in the root namespace that reaches the first host's address
# through a third veth pair (a point-to-point link, /32 routes at both
# ends: the stage traffic stays on the hosts' own link).
# Asserts: the two-host run trains to the weights of the one-process run,
# bit for bit (--exact-grads); each rank's trace names its own host;
# `record HOST:PORT --token-file` in the root namespace, given rank 0's one
# address, records the whole job until it ends: both ranks, rank 1's clock
# (skewed on purpose, as on a host whose clock is off) measured and taken
# out, no block before the block on the other rank it depends on (by more
# than the offset's own error).  With PIPESCOPE_BENCH=1 (bench-mpi-hosts), a
# benchmark: the bubble against the same run on one host (recorded the same
# way), medians printed.  Every namespace and link is gone afterwards, also on
# failure.  Exits 77 (skip) where namespaces cannot be made (not root, no
# CAP_NET_ADMIN), without MPI in the build or without mpirun, saying why.
set -uo pipefail
cli=$1
mpi_found=$2
skip() { echo "1..0 # SKIP $*"; exit 77; }
[ "$mpi_found" = true ] || skip "this build has no MPI"
command -v mpirun >/dev/null || skip "no mpirun on PATH"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"

tag=$$
nsA=pp-hostA-$tag nsB=pp-hostB-$tag
linkA=vethA-$tag linkB=vethB-$tag          # hostA <-> hostB
linkV=ppview-$tag linkAV=ppvA-$tag         # the root namespace (the viewer) <-> hostA
net=10.213.$(( tag % 200 + 20 ))
ipA=$net.1 ipB=$net.2 ipV=$net.254
tmp=$(mktemp -d)
jobs_started=()
cleanup() {
  # what is still running first (a failed check leaves mpirun behind): a
  # timeout(1) passes its TERM on to its process group
  for p in "${jobs_started[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${jobs_started[@]}"; do wait "$p" 2>/dev/null; done
  ip link del "$linkV" 2>/dev/null     # and its end in hostA
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null      # deleting a namespace deletes its end of the veth pair
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$nsA" 2>"$tmp/why" || skip "cannot make a network namespace: $(head -1 "$tmp/why")"
ip netns add "$nsB" || skip "cannot make a second network namespace"
ip link add "$linkA" netns "$nsA" type veth peer name "$linkB" netns "$nsB" \
  || skip "cannot make a veth pair between the namespaces"
ip link add "$linkV" type veth peer name "$linkAV" netns "$nsA" \
  || skip "cannot make a veth pair from the root namespace to a test host"
ip -n "$nsA" addr add "$ipA/24" dev "$linkA"
ip -n "$nsB" addr add "$ipB/24" dev "$linkB"
for n in "$nsA" "$nsB"; do ip -n "$n" link set lo up; done
ip -n "$nsA" link set "$linkA" up
ip -n "$nsB" link set "$linkB" up
# the viewer's link: hostA's address, and nothing else of the test's
# subnet, reachable from the root namespace (no address on hostA's end, so
# OpenMPI, kept to the subnet, never uses it)
ip addr add "$ipV/32" dev "$linkV"
ip link set "$linkV" up
ip -n "$nsA" link set "$linkAV" up
ip route add "$ipA/32" dev "$linkV" src "$ipV" \
  && ip -n "$nsA" route add "$ipV/32" dev "$linkAV" \
  || skip "cannot route between the root namespace and a test host"

# OpenMPI starts its daemon on the other host through this: host, command
cat >"$tmp/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  $ipA) ns=$nsA name=hostA ;;
  $ipB) ns=$nsB name=hostB ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name; \$*"
AGENT
chmod +x "$tmp/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the jobs' registry entries and sockets stay in the test's folder
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
shape=(-s ZBV -m 8 --layers 8 --width 32 --steps 3 --exact-grads --no-live)
fail=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fail=1; }
# mpirun in hostA, ranks on both hosts, MPI kept to the test's subnet
on_two_hosts=(timeout 120 ip netns exec "$nsA" unshare --uts sh -c 'hostname hostA; exec "$@"' sh
  mpirun --mca plm_rsh_agent "$tmp/agent"
         --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24")

timeout 120 "$cli" run -p 2 "${shape[@]}" --save-params "$tmp/one.bin" >/dev/null 2>"$tmp/one.err" \
  || { notok "one-process run: $(tail -1 "$tmp/one.err")"; exit 1; }
"${on_two_hosts[@]}" -host "$ipA,$ipB" -np 2 \
         "$cli" run "${shape[@]}" --save-params "$tmp/two.bin" --trace "$tmp/job.pptrace" \
         >"$tmp/two.out" 2>"$tmp/two.err"
rc=$?
if [ $rc -eq 0 ]; then ok "mpirun across two hosts ran"; else notok "mpirun across two hosts exited $rc: $(grep -v '^---' "$tmp/two.err" | head -3)"; fi
if cmp -s "$tmp/one.bin" "$tmp/two.bin"; then ok "two hosts train to the one process's weights, bit for bit"
else notok "two hosts' weights differ from one process's"; fi
for r in 0 1; do
  want=hostA; [ $r -eq 1 ] && want=hostB
  host=$(timeout 60 "$cli" info "$tmp/job.rank$r.pptrace" 2>/dev/null | sed -n 's/^host: //p')
  if [ "$host" = "$want" ]; then ok "rank $r ran on $want"; else notok "rank $r's trace says host '$host', not $want"; fi
done

# ---- live: a viewer in the root namespace, one address for the job ----------
#
# The shape: 1F1B, P = 2, M = 4, 8 blocks of width 384, batch 64.  Its
# bubble is the schedule's, (P-1)/(M+P-1) = 20%: a forward or backward
# block takes milliseconds (a step some 200 ms here), far above a
# scheduler's tick, and a boundary's 24 KiB cross the veth link in a
# fraction of one, so the bubble says what the schedule does, not what the
# machine's noise or the link does (at width 256 the link's round trips
# alone put two hosts some 3 points above one on this 2-core machine);
# 15 steps keep a run to a few seconds and give the median over steps
# (what info prints) enough steps that a preempted one does not move it.
# Three runs of each, in turns (one host, two, two, one, one, two),
# compared by their medians: a load that comes and goes on a shared
# machine weighs on both alike, and one run it hit hard does not decide;
# --bind-to none in all: on the test's two hosts (one machine) mpirun
# would bind each host's one rank to core 0, both to the same core.
live_steps=15
live_shape=(-s 1F1B -m 4 --layers 8 --width 384 --batch 64 --steps $live_steps)
skew=7500000   # ns: rank 1's clock 7.5 ms off rank 0's

# live_record NAME LAUNCH...: runs the job LAUNCH (whose rank 0 listens on
# TCP), reads rank 0's address and token from what it prints, and records
# it from here until it ends into $tmp/NAME.pptrace, then info's summary of
# it into $tmp/NAME.info.  0 when the job ran and record wrote a file; else
# a 'not ok' line.
live_record() {
  local name=$1; shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$! addr="" i
  jobs_started+=("$pid")
  # the announce line: "serving NAME (pid N) on SOCKET and HOST:PORT, token T; Ctrl-C stops"
  for ((i = 0; i < 1200; i++)); do
    addr=$(sed -n 's/^serving .* and \([0-9.]*:[0-9]*\), token \([0-9a-f]*\);.*/\1 \2/p' "$tmp/$name.err" | head -1)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$addr" ]; then
    notok "$name: the job announced no TCP address: $(grep -v '^---' "$tmp/$name.err" | head -3)"
    return 1
  fi
  # the token in a file only we read, not on a command line
  (umask 077; echo "${addr#* }" >"$tmp/$name.token")
  timeout 120 "$cli" record "${addr% *}" --token-file "$tmp/$name.token" -o "$tmp/$name.pptrace" \
    >"$tmp/$name.record.out" 2>"$tmp/$name.record.err"
  echo "# $name: recorded ${addr% *} until the job ended (record exit $?) $(tail -1 "$tmp/$name.record.err")"
  wait "$pid"
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$tmp/$name.pptrace" ]; then
    notok "$name: job exit $rc, record left $(stat -c %s "$tmp/$name.pptrace" 2>/dev/null || echo no) bytes: $(grep -v '^---' "$tmp/$name.err" | tail -2)"
    return 1
  fi
  timeout 60 "$cli" info "$tmp/$name.pptrace" >"$tmp/$name.info" 2>&1
}

# rank R's "bubble a step" of a trace, as info prints it (the median over
# the steps of the rank's idle share of the step's window across ranks)
bubble() { sed -n "s/^  rank $2 bubble: \([0-9.]*\)%.*/\1/p" "$tmp/$1.info"; }
mean_bubble() { sed -n 's/^mean bubble a step: \([0-9.]*\)%.*/\1/p' "$tmp/$1.info"; }

# one host: the same job, mpirun in the root namespace, recorded the same way
one_host() {
  live_record "$1" timeout 120 mpirun --oversubscribe --bind-to none -np 2 \
    "$cli" run "${live_shape[@]}" --listen 127.0.0.1:0 --name "$1"
}
# two hosts: rank 0 on hostA listening on its test address, rank 1 on
# hostB with its clock skewed; the viewer here sees hostA's address and no
# other.  Then what the viewer recorded: both ranks, the skew measured and
# taken out.
two_hosts() {
  local name=$1 off late deps
  live_record "$name" "${on_two_hosts[@]}" --bind-to none \
    -host "$ipA" -np 1 "$cli" run "${live_shape[@]}" --listen "$ipA:0" --name "$name" : \
    -host "$ipB" -np 1 env PIPESCOPE_TEST_CLOCK_SKEW_NS=$skew "$cli" run "${live_shape[@]}" --listen "$ipA:0" --name "$name" \
    || return 1
  if grep -q '^rank 0: host hostA pid' "$tmp/$name.info" && grep -q '^rank 1: host hostB pid' "$tmp/$name.info" \
     && [ -n "$(bubble "$name" 0)" ] && [ -n "$(bubble "$name" 1)" ]; then
    ok "$name: the viewer in the root namespace recorded both ranks, hostA's and hostB's, through $ipA"
  else
    notok "$name: the recorded job lacks a rank: $(grep -E '^(rank [01]:|ranks:|spans:)' "$tmp/$name.info" | tr '\n' ' ')"
    return 1
  fi
  # the skew as measured (rank 0's time = rank 1's + offset: -skew).  Its
  # error is at most half the least round trip of the ranks' pings, which
  # a loaded machine stretches (a scheduler's tick and more): the bound
  # tells a skew measured and taken out (error 0.0x ms on a quiet machine)
  # from one that is not (7.5 ms), not how quiet the machine was
  off=$(sed -n "s/^rank 1: host hostB pid [0-9]*, clock \([-+0-9.]*\) ms to rank 0's.*/\1/p" "$tmp/$name.info")
  if [ -n "$off" ] && awk -v o="$off" -v s=$skew 'BEGIN { d = o * 1e6 + s; exit !(d <= 2000000 && d >= -2000000) }'; then
    ok "$name: rank 1's clock, $((skew / 1000)) us off, measured across the hosts: $off ms to rank 0's"
  else
    notok "$name: rank 1's clock offset is '$off' ms, not within 2 ms of -$((skew / 1000)) us"
  fi
  # both hosts are one machine, one clock: |offset + skew| is the offset's
  # own error, and a hand-off between the namespaces can be quicker than it
  local err_ns
  err_ns=$(awk -v o="${off:-0}" -v s=$skew 'BEGIN { d = o * 1e6 + s; printf "%d\n", d < 0 ? -d : d }')
  # every reader puts rank 1 on rank 0's clock: in the CSV no block starts
  # before the block on the other rank it needs has ended (1F1B on 2 ranks:
  # stage 1's F needs stage 0's F, stage 0's B stage 1's B, same step and
  # micro-batch); unaligned, the skew would put every one of them early or late
  if ! timeout 60 "$cli" export --format csv -o "$tmp/$name.csv" "$tmp/$name.pptrace" 2>"$tmp/$name.csv.err"; then
    notok "$name: export --format csv of the recorded job: $(tail -1 "$tmp/$name.csv.err")"
    return 1
  fi
  read -r late deps < <(awk -F, -v tol="$err_ns" 'NR > 1 && ($4 == "F" || $4 == "B") {
      key = $5 "," $2 "," $3 "," $4; end[key] = $7; start[key] = $6 }
    END {
      for (k in start) {
        split(k, f, ","); dep = ""
        if (f[2] == 1 && f[4] == "F") dep = f[1] ",0," f[3] ",F"
        if (f[2] == 0 && f[4] == "B") dep = f[1] ",1," f[3] ",B"
        if (dep == "" || !(dep in end)) continue
        n++; if (end[dep] - start[k] > tol + 0) late++
      }
      print late + 0, n + 0 }' "$tmp/$name.csv")
  # 4 micro-batches x 2 a step (the last step's may not have reached rank 0)
  if [ "$late" -eq 0 ] && [ "$deps" -ge $(( (live_steps - 1) * 4 * 2 )) ]; then
    ok "$name: aligned: no block starts before the block it depends on ended, by more than the offset's error of $((err_ns / 1000)) us ($late of $deps)"
  else
    notok "$name: after alignment $late of $deps blocks start before their dependency ends by more than the offset's error of $((err_ns / 1000)) us"
  fi
}

# The test: one run of each, their checks.  The bubble across two hosts
# against one host's is a comparison of two runs' shares, which the
# machine's load decides: only as a benchmark (PIPESCOPE_BENCH=1,
# bench-mpi-hosts), the medians of three runs of each, taken in turns,
# printed, never failed on.
if [ -z "${PIPESCOPE_BENCH:-}" ]; then
  one_host one1 && two_hosts two1
  exit $fail
fi
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
if one_host one1 && two_hosts two1 && two_hosts two2 && one_host one2 && one_host one3 && two_hosts two3; then
  b1=$(median3 "$(mean_bubble one1)" "$(mean_bubble one2)" "$(mean_bubble one3)")
  b2=$(median3 "$(mean_bubble two1)" "$(mean_bubble two2)" "$(mean_bubble two3)")
  detail="two hosts $b2% (median of"
  for n in two1 two2 two3; do detail+=" $(mean_bubble $n)% [rank 0 $(bubble $n 0)%, rank 1 $(bubble $n 1)%]"; done
  detail+="), one host $b1% (median of"
  for n in one1 one2 one3; do detail+=" $(mean_bubble $n)% [rank 0 $(bubble $n 0)%, rank 1 $(bubble $n 1)%]"; done
  detail+=")"
  echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "$b1" ] && [ -n "$b2" ] && awk -v a="$b1" -v b="$b2" 'BEGIN { d = a - b; exit !(d <= 5 && d >= -5) }'; then
    echo "# the bubble across two hosts is within 5 points of one host's (the target): $detail"
  else
    echo "# the bubble across two hosts is NOT within 5 points of one host's (the target): $detail"
  fi
fi
exit $fail
