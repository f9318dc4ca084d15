#!/usr/bin/env bash
# Inside a cluster.sh cluster (bench/scaling starts it): every host's
# connections delayed DELAY_MS by the relay of tests/cluster/prelude.sh, then
# rlx-bench all_sum on one rank per host with each all-reduce algorithm
# forced, rows appended to OUT as CSV (rlx-bench's columns).
#   cluster.sh run N -- bench/scaling_cluster.sh BUILD_DIR OUT DELAY_MS MAX_BYTES
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2 delay=$3 max_bytes=$4
source "$(dirname "${BASH_SOURCE[0]}")/../tests/cluster/prelude.sh"
write_hostfile
# Each connection passes one relay (its opener's), so a step's message is
# delayed once.
for i in "${!hosts[@]}"; do delay_host "$i" "$delay" 0; done
for algorithm in ring recursive_doubling; do
  timeout -k 5 600 "$build/bin/rlxrun" --hostfile hostfile --rsh "$RLX_CLUSTER_SSH" \
    -n "${#hosts[@]}" --no-tag-output --env RLX_ALL_REDUCE_ALGORITHM="$algorithm" \
    "$build/bench/rlx-bench" --op all_sum -b 4 -e "$max_bytes" -f 16 --seconds 0.3 --csv \
    --label "$algorithm" | grep -v '^system,' >>"$out"
done
