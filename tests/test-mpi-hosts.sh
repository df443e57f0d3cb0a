#!/usr/bin/env bash
# test-mpi-hosts CLI MPI_FOUND — one job over two hosts: two network
# namespaces the test makes itself (a veth pair, addresses on a /24 of its
# own, distinct host names with unshare --uts), mpirun in the first
# reaching the second through an rsh agent that enters its namespace.
# Asserts: the two-host run trains to the weights of the one-process run,
# bit for bit (--exact-grads); each rank's trace names its own host; every
# namespace and link is gone afterwards, also on failure.  Exits 77 (skip)
# where namespaces cannot be made (not root, no CAP_NET_ADMIN), without MPI
# in the build or without mpirun, saying why.
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
net=10.213.$(( tag % 200 + 20 ))
ipA=$net.1 ipB=$net.2
tmp=$(mktemp -d)
cleanup() {
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null   # deleting a namespace deletes its end of the veth pair
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$nsA" 2>"$tmp/why" || skip "cannot make a network namespace: $(head -1 "$tmp/why")"
ip netns add "$nsB" || skip "cannot make a second network namespace"
ip link add vethA-$tag netns "$nsA" type veth peer name vethB-$tag netns "$nsB" \
  || skip "cannot make a veth pair between the namespaces"
ip -n "$nsA" addr add "$ipA/24" dev vethA-$tag
ip -n "$nsB" addr add "$ipB/24" dev vethB-$tag
for n in "$nsA" "$nsB"; do ip -n "$n" link set lo up; done
ip -n "$nsA" link set vethA-$tag up
ip -n "$nsB" link set vethB-$tag up

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
shape=(-s ZBV -m 8 --layers 8 --width 32 --steps 3 --exact-grads --no-live)
fail=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fail=1; }

"$cli" run -p 2 "${shape[@]}" --save-params "$tmp/one.bin" >/dev/null 2>"$tmp/one.err" \
  || { notok "one-process run: $(tail -1 "$tmp/one.err")"; exit 1; }
timeout 120 ip netns exec "$nsA" unshare --uts sh -c 'hostname hostA; exec "$@"' sh \
  mpirun --mca plm_rsh_agent "$tmp/agent" \
         --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
         -host "$ipA,$ipB" -np 2 \
         "$cli" run "${shape[@]}" --save-params "$tmp/two.bin" --trace "$tmp/job.pptrace" \
         >"$tmp/two.out" 2>"$tmp/two.err"
rc=$?
if [ $rc -eq 0 ]; then ok "mpirun across two hosts ran"; else notok "mpirun across two hosts exited $rc: $(grep -v '^---' "$tmp/two.err" | head -3)"; fi
if cmp -s "$tmp/one.bin" "$tmp/two.bin"; then ok "two hosts train to the one process's weights, bit for bit"
else notok "two hosts' weights differ from one process's"; fi
for r in 0 1; do
  want=hostA; [ $r -eq 1 ] && want=hostB
  host=$("$cli" info "$tmp/job.rank$r.pptrace" 2>/dev/null | sed -n 's/^host: //p')
  if [ "$host" = "$want" ]; then ok "rank $r ran on $want"; else notok "rank $r's trace says host '$host', not $want"; fi
done
exit $fail
