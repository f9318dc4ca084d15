#!/usr/bin/env bash
# torch.distributed's "rlx" backend beside gloo (bench/torch/torch_compare.py,
# both in one run) on this host: 2 and 4 ranks with shared memory, 2 ranks
# over TCP alone (RLX_SHM=0), then the cost of the torch layer: a 4 B
# all_reduce through torch against rlx-bench's 4 B all_sum (the C++ API).
# Usage: bench/torch/compare.sh [--build DIR] [--quick] > tables.md
set -euo pipefail
build=build/release quick=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --quick) quick=(--reps 1 --max-bytes 65536 --ddp-steps 2); shift ;;
    *) echo "usage: $0 [--build DIR] [--quick]" >&2; exit 2 ;;
  esac
done
here=$(dirname "$(realpath "$0")")
rlxrun=$build/bin/rlxrun
export PYTHONPATH=$(realpath "$build")/python${PYTHONPATH:+:$PYTHONPATH}
# Rank 0's tables, as markdown: a blank line around each heading.
tables() { sed -n 's/^\[0\] //p' | grep -E '^(###|\|)' | sed 's/^\(###.*\)/\n\1\n/' || true; }

for ranks in 2 4; do
  "$rlxrun" -n "$ranks" --timeout 900 /usr/bin/python3 "$here/torch_compare.py" "${quick[@]}" |
    tables
  echo
done
echo "#### RLX_SHM=0: rlx over TCP"
"$rlxrun" -n 2 --timeout 900 --env RLX_SHM=0 /usr/bin/python3 "$here/torch_compare.py" \
  --ops all_reduce --ddp-steps 0 "${quick[@]}" | tables
echo
echo "#### The torch layer's cost: 4 B all_reduce, 2 ranks, shared memory"
"$rlxrun" -n 2 --timeout 300 /usr/bin/python3 "$here/torch_compare.py" --ops all_reduce \
  --max-bytes 4 --ddp-steps 0 | tables | sed -n 's/^| 4 B | \([0-9.]*\) |.*/through torch: \1 us/p'
"$rlxrun" -n 2 --timeout 300 "$build/bench/rlx-bench" --op all_sum -b 4 -e 4 |
  awk '$2 == 4 {print "through the C++ API (rlx-bench): " $7 " us"}'
