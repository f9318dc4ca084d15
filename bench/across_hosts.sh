#!/usr/bin/env bash
# Runs a program on one rank per host of a tests/cluster/cluster.sh cluster,
# every host's connections delayed DELAY_MS by the relay of
# tests/cluster/prelude.sh: how a benchmark behaves when the network, not
# this machine's two cores, is what a collective waits for.
#   tests/cluster/cluster.sh run N -- bench/across_hosts.sh BUILD_DIR DELAY_MS PROGRAM [ARGS...]
# e.g. tests/cluster/cluster.sh run 2 -- bench/across_hosts.sh build/release 1 \
#        build/release/bench/overlap-bench
set -euo pipefail
build=$(cd "$1" && pwd)
delay=$2
shift 2
program=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
source "$(dirname "${BASH_SOURCE[0]}")/../tests/cluster/prelude.sh"
write_hostfile
for i in "${!hosts[@]}"; do delay_host "$i" "$delay" 0; done
"$build/bin/rlxrun" --hostfile hostfile --rsh "$RLX_CLUSTER_SSH" -n "${#hosts[@]}" \
  "$program" "$@"
