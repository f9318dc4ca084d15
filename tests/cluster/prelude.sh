# Sourced by the scripts cluster.sh runs: the cluster's hosts as arrays, a
# work folder inside the cluster's own, fail(), and hostfiles.
#   hosts[i], namespaces[i]  host i's address and network namespace
#   write_hostfile S1 S2 ... an Open MPI hostfile `hostfile`: host i gets Si
#                            slots (one each when no slots are given)
read -r -a hosts <<<"$RLX_CLUSTER_HOSTS"
read -r -a namespaces <<<"$RLX_CLUSTER_NAMESPACES"
mkdir -p "$RLX_CLUSTER_DIR/work"
cd "$RLX_CLUSTER_DIR/work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

write_hostfile() {
  local i
  for i in "${!hosts[@]}"; do
    echo "${hosts[$i]} slots=${@:$((i + 1)):1}"
  done | sed 's/slots=$/slots=1/' >hostfile
}

# delay_host I DELAY_MS JITTER_MS [both]: host i's TCP connections (those it
# opens; with `both`, those it accepts too) pass through a relay that holds
# every byte DELAY_MS plus up to JITTER_MS (tests/cluster/delay_relay.cc:
# this kernel has no netem). ssh (port 22) is left alone. Needs $build.
# The relay dies with the cluster's namespaces.
delay_host() {
  local i=$1 delay=$2 jitter=$3 which=${4:-leaving} port=7999 mark=42
  ip netns exec "${namespaces[$i]}" "$build/tests/cluster/delay_relay" \
    "$port" "$delay" "$jitter" "$mark" >"relay.$i.txt" 2>&1 &
  local arriving=""
  if [[ $which == both ]]; then
    arriving="chain arriving {
      type nat hook prerouting priority dstnat;
      tcp dport 22 return
      meta l4proto tcp redirect to :$port
    }"
  fi
  ip netns exec "${namespaces[$i]}" nft -f - <<NFT
table ip rlx_delay {
  $arriving
  chain leaving {
    type nat hook output priority -100;
    meta mark $mark return
    ip daddr 127.0.0.0/8 return
    tcp dport 22 return
    meta l4proto tcp redirect to :$port
  }
}
NFT
  # The relay listens before any connection is redirected to it.
  local _
  for _ in $(seq 1 100); do
    grep -q listening "relay.$i.txt" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "the delay relay on host $i did not start: $(cat "relay.$i.txt")"
}
