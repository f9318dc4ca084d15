#!/usr/bin/env bash
# Network faults between the hosts of a cluster.sh cluster, under an rlxrun
# job of 3 ranks (one per host) running the soak (every result checked):
#   degraded:  host 1's link capped at 200 Mbit/s (tbf) and 1% of the TCP
#              packets host 2 receives dropped (nftables numgen): every
#              result must still be right.
#   link_cut:  host 2's link taken down mid-run: a rank that can still
#              report fails with a clear timeout naming rank 2 within
#              RLX_TIMEOUT_S, and rlxrun exits non-zero naming it and its host.
#   delayed:   every TCP connection of host 2, in and out, through a relay
#              that holds each byte 10 ms plus up to 5 ms of jitter (this
#              kernel has no netem; delay_relay.cc stands in for it): every
#              result must still be right, and the soak must show the delay.
# Usage (through cluster.sh): cluster.sh run 3 -- network_faults.sh BUILD_DIR CASE
set -euo pipefail
build=$(cd "$1" && pwd)
case_name=$2
source "$(dirname "${BASH_SOURCE[0]}")/prelude.sh"
write_hostfile

run_soak() {
  local limit=$1 seconds=$2 timeout_s=$3
  timeout -k 5 "$limit" "$build/bin/rlxrun" --hostfile hostfile --rsh "$RLX_CLUSTER_SSH" -n 3 \
    --env RLX_TIMEOUT_S="$timeout_s" "$build/tests/soak/soak" --seconds "$seconds"
}

n=${RLX_CLUSTER_BRIDGE#rlxbr}  # host i's link is rlx$n-vI
case $case_name in
  degraded)
    tc qdisc add dev "rlx$n-v1" root tbf rate 200mbit burst 256kb latency 100ms
    ip netns exec "${namespaces[2]}" nft -f - <<'EOF'
table inet rlx_faults {
  chain input {
    type filter hook input priority 0;
    meta l4proto tcp numgen random mod 100 < 1 drop
  }
}
EOF
    run_soak 180 20 60 | tee out.txt
    [[ $(grep -c "soak: rank .* 0 mismatches.*(ok)" out.txt) -eq 3 ]] ||
      fail "not every rank finished the soak with 0 mismatches"
    dropped=$(ip netns exec "${namespaces[2]}" nft list ruleset | grep -c drop || true)
    [[ $dropped -ge 1 ]] || fail "the loss rule was not in place"
    ;;
  delayed)
    delay_host 2 10 5 both
    run_soak 240 20 60 | tee out.txt
    cat relay.2.txt
    [[ $(grep -c "soak: rank .* 0 mismatches.*(ok)" out.txt) -eq 3 ]] ||
      fail "not every rank finished the soak with 0 mismatches"
    relayed=$(grep -c -- " -> " relay.2.txt || true)
    # Host 2's rank: the rendezvous, and 2 connections with each of 2 peers.
    [[ $relayed -ge 5 ]] || fail "the relay carried $relayed connections; host 2's rank has at least 5"
    # Every operation but a ring exchange waits on host 2's data, which the
    # relay holds >= 10 ms: 20 s leave room for at most 20 s / (10 ms * 5/6).
    iterations=$(grep -oE "[0-9]+ iterations" out.txt | head -1 | cut -d' ' -f1)
    [[ $iterations -le 2400 ]] || fail "$iterations iterations in 20 s: the delay was not in the path"
    echo "with host 2 delayed 10-15 ms each way: $iterations iterations in 20 s, 0 mismatches"
    ;;
  link_cut)
    set +e
    # Cut host 2's link once its rank is connected to both others (the job is
    # running), waiting for that at most 30 s.
    (
      for _ in $(seq 1 300); do
        peers=$(ip netns exec "${namespaces[2]}" ss -Htn state established |
          grep -cE "${hosts[0]}:|${hosts[1]}:" || true)
        [[ $peers -ge 2 ]] && break
        sleep 0.1
      done
      ip link set "rlx$n-v2" down
    ) &
    start=$SECONDS
    run_soak 120 60 10 >out.txt 2>err.txt
    status=$?
    elapsed=$((SECONDS - start))
    set -e
    cat out.txt err.txt >&2
    [[ $status -ne 0 && $status -ne 124 ]] || fail "rlxrun exited $status (0: nothing noticed; 124: hung until timeout)"
    [[ $elapsed -le 45 ]] || fail "the job took $elapsed s to end after a link cut (RLX_TIMEOUT_S=10)"
    grep -q "rlxrun: rank .* (on .*)" err.txt || fail "rlxrun did not name the failed rank and its host"
    # The first of ranks 0 and 1 to reach its deadline reports it, naming the
    # peer it waited for (in a collective step or a recv_bytes); rlxrun then
    # stops the rest, so the other may be stopped before it prints its own.
    grep -qE "^\[[01]\] soak: rlx rank [01] of 3: .*(peer rank [0-2]: timeout|timeout: .*waiting for rank [0-2])" \
      out.txt err.txt || fail "neither rank 0 nor rank 1 gave a clear timeout naming its peer"
    echo "the job ended ${elapsed} s after it started (link cut once the ranks were connected), rlxrun status $status"
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "PASS: network faults: $case_name"
