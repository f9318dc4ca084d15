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
