#!/usr/bin/env bash
# test-mpi-profile CLI RANK MPI_FOUND — profile's collector over two hosts:
# `pipescope-cli profile --listen HOSTA_IP:0 -- mpirun -H hostA,hostB -np 2
# RANK` in two network namespaces the test makes itself (as test-mpi-hosts
# does: a veth pair, a /24 of its own, host names with unshare --uts, an
# rsh agent entering the other namespace), RANK being a job that is not
# ours (mpi-probe-rank: libpipescope-probe.so's C API).  The agent starts
# the other host's daemon with a clean environment and a registry folder of
# its own, as ssh to another machine would: what reaches rank 1 is only
# what mpirun forwards, and profile is not in its registry.
# Asserts: rank 1 runs on hostB and records (profile's variables reached
# it); it pushes its stream to profile's endpoint, which says one stream
# was pushed; a viewer in the root namespace that records profile's
# endpoint (hostA's address, the token from a file) gets blocks of both
# ranks, as many of each as that rank wrote to its own trace (merged by
# profile) and said it wrote; with the user's own -x (which OpenMPI refuses
# beside mca_base_env_list) both the user's variable and profile's arrive
# and rank 1 pushes; rank 1's clock, skewed on purpose as on a host whose
# clock is off (PIPESCOPE_TEST_CLOCK_SKEW_NS, the probe's test-only knob),
# is measured over its push: the offset profile reports, and the one in
# the live recording and in the merged trace, is the skew within 0.1 ms,
# rank 0 (on profile's host) has none, and in both traces no block starts
# before the block of the other rank it depends on has ended (the ranks
# are a pipeline over MPI), which unaligned the skew would break; without --listen, profile says in one line
# that ranks on other hosts go to their own files only, and rank 1's file
# is still merged.  Every namespace and link is gone afterwards, also on
# failure.  Exits 77 (skip) where namespaces cannot be made, without MPI
# in the build or without mpirun, saying why.
set -uo pipefail
cli=$1
rank_prog=$2
mpi_found=$3
skip() { echo "1..0 # SKIP $*"; exit 77; }
[ "$mpi_found" = true ] || skip "this build has no MPI"
command -v mpirun >/dev/null || skip "no mpirun on PATH"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"

tag=$$
nsA=pp-profA-$tag nsB=pp-profB-$tag
linkA=vpA-$tag linkB=vpB-$tag              # hostA <-> hostB
linkV=ppprofv-$tag linkAV=ppvpA-$tag       # the root namespace (the viewer) <-> hostA
net=10.215.$(( tag % 200 + 20 ))
ipA=$net.1 ipB=$net.2 ipV=$net.254
tmp=$(mktemp -d)
jobs_started=()
cleanup() {
  for p in "${jobs_started[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${jobs_started[@]}"; do wait "$p" 2>/dev/null; done
  jobs_started=()
  ip link del "$linkV" 2>/dev/null
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null
  [ -d "$tmp" ] && rm -rf "$tmp"
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
ip addr add "$ipV/32" dev "$linkV"
ip link set "$linkV" up
ip -n "$nsA" link set "$linkAV" up
ip route add "$ipA/32" dev "$linkV" src "$ipV" \
  && ip -n "$nsA" route add "$ipV/32" dev "$linkAV" \
  || skip "cannot route between the root namespace and a test host"

# hostA's registry is profile's (mpirun forks rank 0 there); hostB has
# its own, and its daemon starts as from ssh: a clean environment
mkdir -m 700 "$tmp/run" "$tmp/run-hostB"
cat >"$tmp/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  $ipA) ns=$nsA name=hostA ;;
  $ipB) ns=$nsB name=hostB ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec env -i PATH="$PATH" HOME="\$HOME" XDG_RUNTIME_DIR="$tmp/run-\$name" \
  ip netns exec "\$ns" unshare --uts sh -c "hostname \$name; \$*"
AGENT
chmod +x "$tmp/agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export XDG_RUNTIME_DIR=$tmp/run
fail=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fail=1; }
in_hostA=(timeout 120 ip netns exec "$nsA" unshare --uts sh -c 'hostname hostA; exec "$@"' sh)
mpirun_two=(mpirun --mca plm_rsh_agent "$tmp/agent"
            --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24"
            --bind-to none -host "$ipA,$ipB" -np 2)
steps=40
skew=-7500000   # ns: rank 1's clock 7.5 ms behind hostA's (a test-only knob of the probe's clock)
# rank 1 plays a host whose clock is off; mpirun starts the same command on both
skewed_rank1=(sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export PIPESCOPE_TEST_CLOCK_SKEW_NS='"$skew"'; exec "$0" "$@"')

# blocks (F and B) of rank R in a trace, by export's CSV
blocks() {
  timeout 60 "$cli" export --format csv -o "$tmp/$1.csv" "$tmp/$1.pptrace" 2>"$tmp/$1.csv.err" || return 1
  awk -F, -v r="$2" 'NR > 1 && $1 == r && ($4 == "F" || $4 == "B") { n++ } END { print n + 0 }' "$tmp/$1.csv"
}
# what rank R said it wrote
said() { sed -n "s/^rank $2 on [a-zA-Z]*: \([0-9]*\) blocks.*/\1/p" "$tmp/$1.out"; }
# rank R's clock offset in a trace, in ms, as info prints it ("" for none)
offset_of() {
  timeout 60 "$cli" info "$tmp/$1.pptrace" >"$tmp/$1.info" 2>&1
  sed -n "s/^rank $2: host [a-zA-Z?]* pid [0-9]*, clock \([-+0-9.]*\) ms to rank 0's.*/\1/p" "$tmp/$1.info"
}
# whether an offset in ms is -skew within TOL ns (rank 0's time = rank 1's +
# offset).  Both hosts are one machine, one clock: the true offset is -skew
# and the measured one's error is at most half the least round trip of its
# pings (profile prints it), however loaded the machine; a fixed bound
# (0.1 ms) was a claim on the load.
is_skew() { [ -n "$1" ] && [ -n "$2" ] && awk -v o="$1" -v s=$skew -v t="$2" 'BEGIN { d = o * 1e6 + s; exit !(d <= t && d >= -t) }'; }
# |offset + skew| in ns: the measured offset's own error
off_err() { awk -v o="$1" -v s=$skew 'BEGIN { d = o * 1e6 + s; printf "%d\n", d < 0 ? -d : d }'; }
# "LATE DEPS" of a trace's CSV (blocks() made it): of the blocks that depend
# on a block of the other rank (rank 1's F on rank 0's F, rank 0's B on
# rank 1's B, same step and micro-batch), how many start before it ends;
# SHIFT ns are added to rank 1's times first (0: the trace as it is); a
# block counts as late only by more than TOL ns (the offset's own error: a
# hand-off between namespaces of one machine can be quicker than it)
late_deps() {
  awk -F, -v shift_ns="$2" -v tol="${3:-0}" 'NR > 1 && ($4 == "F" || $4 == "B") {
      key = $5 "," $2 "," $3 "," $4; s = $6 + 0; e = $7 + 0
      if ($1 == 1) { s += shift_ns; e += shift_ns }
      end[key] = e; start[key] = s }
    END {
      for (k in start) {
        split(k, f, ","); dep = ""
        if (f[2] == 1 && f[4] == "F") dep = f[1] ",0," f[3] ",F"
        if (f[2] == 0 && f[4] == "B") dep = f[1] ",1," f[3] ",B"
        if (dep == "" || !(dep in end)) continue
        n++; if (end[dep] - start[k] > tol) late++
      }
      print late + 0, n + 0 }' "$tmp/$1.csv"
}

# ---- live: rank 1 on hostB pushes to profile on hostA ------------------------
"${in_hostA[@]}" "$cli" profile --listen "$ipA:0" --name pushjob --trace "$tmp/push.pptrace" -- \
  "${mpirun_two[@]}" "${skewed_rank1[@]}" "$rank_prog" $steps 4 5 >"$tmp/push.out" 2>"$tmp/push.err" &
pid=$!
jobs_started+=("$pid")
addr=""
for ((i = 0; i < 600; i++)); do
  addr=$(sed -n 's/^pipescope-cli: profile: serving .* and \([0-9.]*:[0-9]*\) (token \([0-9a-f]*\))$/\1 \2/p' "$tmp/push.err" | head -1)
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$addr" ]; then
  notok "profile announced no TCP address: $(head -3 "$tmp/push.err")"
  exit 1
fi
(umask 077; echo "${addr#* }" >"$tmp/push.token")
timeout 120 "$cli" record "${addr% *}" --token-file "$tmp/push.token" -o "$tmp/live.pptrace" \
  >"$tmp/record.out" 2>"$tmp/record.err"
echo "# recorded ${addr% *} until profile ended (record exit $?): $(tail -1 "$tmp/record.err")"
wait "$pid"
rc=$?
jobs_started=()
echo "# profile: $(grep -v '^---' "$tmp/push.err" | tr '\n' '|')"
if [ $rc -eq 0 ]; then ok "profile -- mpirun across two hosts ran"
else notok "profile -- mpirun across two hosts exited $rc: $(grep -v '^---' "$tmp/push.err" | tail -3)"; fi
if grep -q '^rank 1 on hostB: [1-9]' "$tmp/push.out"; then ok "rank 1 ran on hostB and recorded: $(grep '^rank 1' "$tmp/push.out")"
else notok "rank 1 did not record on hostB: $(cat "$tmp/push.out" | tr '\n' ' ')"; fi
if grep -q "ranks on other hosts push their streams to $ipA:" "$tmp/push.err" \
   && grep -q 'profile: pushjob: 2 processes recorded (1 pushed from other hosts)' "$tmp/push.err"; then
  ok "profile told the ranks where it is, and rank 1 pushed its stream"
else
  notok "no stream was pushed: $(grep -E 'push|recorded' "$tmp/push.err" | tr '\n' ' ')"
fi
for r in 0 1; do
  live=$(blocks live $r) file=$(blocks push $r) own=$(said push $r)
  if [ -n "$own" ] && [ "$own" -gt 0 ] && [ "$live" = "$own" ] && [ "$file" = "$own" ]; then
    ok "rank $r: the viewer got all $live of its blocks live, as many as in its own trace"
  else
    notok "rank $r: the viewer got '$live' blocks live, its trace holds '$file', it wrote '$own'"
  fi
done

# ---- rank 1's clock, measured over its push -------------------------------------
said_off=$(sed -n "s/^pipescope-cli: profile: rank 1 (.*): clock \([-+0-9.]*\) ms to this host's, measured over the push.*/\1/p" "$tmp/push.err")
said_rtt=$(sed -n "s/^pipescope-cli: profile: rank 1 (.*, measured over the push (least round trip \([0-9.]*\) ms.*/\1/p" "$tmp/push.err")
# half the least round trip, and 2 us for the printed values' rounding
tol=$( [ -n "$said_rtt" ] && awk -v r="$said_rtt" 'BEGIN { printf "%d\n", r * 1e6 / 2 + 2000 }')
echo "# $(grep 'measured over the push' "$tmp/push.err")"
if is_skew "$said_off" "$tol" && [ "$(grep -c 'measured over the push' "$tmp/push.err")" = 1 ]; then
  ok "profile measured rank 1's clock over its push: $said_off ms, the skew of $((skew / 1000)) us taken out"
else
  notok "profile's offset for rank 1 is '$said_off' ms, not within half its least round trip ('$said_rtt' ms) of $((-skew / 1000)) us: $(grep -E 'clock' "$tmp/push.err" | tr '\n' ' ')"
fi
for t in live push; do
  off1=$(offset_of $t 1) off0=$(offset_of $t 0)
  if is_skew "$off1" "$tol" && [ -z "$off0" ] && grep -q '^rank 0: host hostA' "$tmp/$t.info"; then
    ok "$t trace: rank 1's clock $off1 ms to rank 0's, rank 0 (profile's host) with none"
  else
    notok "$t trace: rank 1's clock offset '$off1' ms (want $((-skew / 1000)) us within $((${tol:-0} / 1000)) us), rank 0's '$off0': $(grep '^rank [01]:' "$tmp/$t.info" | tr '\n' ' ')"
  fi
  read -r late deps < <(late_deps $t 0 "$( [ -n "$off1" ] && off_err "$off1" || echo 0)")
  read -r late_raw deps_raw < <(late_deps $t $skew)
  # 4 micro-batches x 2 a step
  if [ "$late" -eq 0 ] && [ "$deps" -ge $(( (steps - 1) * 4 * 2 )) ] && [ "$late_raw" -gt 0 ]; then
    ok "$t trace: no block starts before the block of the other rank it depends on ends, by more than the offset's error ($late of $deps; $late_raw with rank 1's own clock)"
  else
    notok "$t trace: $late of $deps blocks start before their dependency ends ($late_raw of $deps_raw with rank 1's own clock)"
  fi
done

# ---- the user's own -x: OpenMPI refuses it beside mca_base_env_list, so ------
# profile forwards with -x too; the user's variable still arrives.  The
# ranks run some 800 ms: a local rank is found by profile's registry scan,
# every 100 ms, and one that has closed before it is not collected
"${in_hostA[@]}" env PP_USER_VAR=kept "$cli" profile --listen "$ipA:0" --name xjob --trace "$tmp/x.pptrace" -- \
  "${mpirun_two[@]}" -x PP_USER_VAR sh -c 'echo "rank $OMPI_COMM_WORLD_RANK var ${PP_USER_VAR-unset}"; exec "$0" 20 4 5' "$rank_prog" \
  >"$tmp/x.out" 2>"$tmp/x.err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^rank 1 var kept' "$tmp/x.out" && grep -q '^rank 1 on hostB: [1-9]' "$tmp/x.out" \
   && grep -q 'xjob: 2 processes recorded (1 pushed from other hosts)' "$tmp/x.err"; then
  ok "with the user's -x, rank 1 gets the user's variable and profile's, and pushes"
else
  notok "with the user's -x (exit $rc): $(tr '\n' ' ' <"$tmp/x.out") $(grep -v '^---' "$tmp/x.err" | head -4 | tr '\n' ' ')"
fi

# ---- without --listen: one line, and rank 1's own file --------------------------
"${in_hostA[@]}" "$cli" profile --name quietjob --trace "$tmp/quiet.pptrace" -- \
  "${mpirun_two[@]}" "$rank_prog" 3 4 1 >"$tmp/quiet.out" 2>"$tmp/quiet.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c 'ranks on other hosts are recorded to their own files only' "$tmp/quiet.err")" = 1 ] \
   && ! grep -q 'pushed from' "$tmp/quiet.err"; then
  ok "without --listen, profile says in one line that other hosts' ranks go to their own files"
else
  notok "without --listen (exit $rc): $(grep -v '^---' "$tmp/quiet.err" | tr '\n' ' ')"
fi
file=$(blocks quiet 1) own=$(said quiet 1)
if [ -n "$own" ] && [ "$own" -gt 0 ] && [ "$file" = "$own" ]; then ok "without --listen, rank 1's $file blocks are in the merged trace"
else notok "without --listen, the merged trace holds '$file' blocks of rank 1, which wrote '$own'"; fi

# ---- the namespaces go ---------------------------------------------------------
cleanup
left=$(ip netns list | grep -c -- "-$tag\b")
if [ "$left" = 0 ] && ! ip link show "$linkV" >/dev/null 2>&1; then ok "every namespace and link the test made is gone"
else notok "$left namespaces of the test are left"; fi
exit $fail
