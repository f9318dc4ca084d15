#!/usr/bin/env bash
# RLX_LOG end to end: 3 ranks under rlxrun print rank-prefixed lines for the
# connection setup, each peer's path and each collective's algorithm with its
# reason, on the same-host shared-memory path (the default) and over TCP
# (RLX_SHM=0); RLX_COST_MODEL's file moves the TCP all-reduce crossover;
# a training loop's choices print once per collective and size class;
# RLX_TUNE forces algorithms (network ones over shared memory too), and a
# forced algorithm that cannot run, an unknown name, malformed syntax and
# ranks that force differently each fail with the error that says so;
# without RLX_LOG nothing but the program's own output appears.
# Usage: debug_log_test.sh RLXRUN HELLO_ALLREDUCE DATA_PARALLEL_TRAIN
set -uo pipefail
rlxrun=$1 program=$2 train=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

expect() {  # expect COUNT REGEX FILE: at least COUNT lines match
  local matched
  matched=$(grep -cE -- "$2" "$3" || true)
  if ((matched < $1)); then
    echo "debug_log_test: $matched lines of $3 match '$2', expected $1" >&2
    failures=$((failures + 1))
  fi
}

"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug --env RLX_SHM=0 "$program" >"$work/debug.log" 2>&1 ||
  { echo "debug_log_test: the debug run failed" >&2; failures=$((failures + 1)); }
cat "$work/debug.log"
for rank in 0 1 2; do
  expect 1 "^\[$rank\] rlx debug: connected to the rendezvous at 127\.0\.0\.1:" "$work/debug.log"
  expect 2 "^\[$rank\] rlx info: peer [0-2]: connected by tcp to 127\.0\.0\.1:[0-9]+, 3 connections" \
    "$work/debug.log"
  expect 1 "^\[$rank\] rlx info: rank $rank of 3 on the tcp backend" "$work/debug.log"
  expect 1 "^\[$rank\] rlx debug: all_reduce sum of 1048576 x f32 .*: ring \(network\), at or above the crossover of [0-9]+ B at 3 ranks \(cost model: rank 0's constants; this rank's are built in" \
    "$work/debug.log"
  expect 1 "^\[$rank\] rlx debug: all_gather of 1 x i32 .*: direct \(network\), blocks below" "$work/debug.log"
  expect 2 "^\[$rank\] rlx info: peer [0-2]: calls go through the network \(same host, but RLX_SHM=0" "$work/debug.log"
done

"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug "$program" >"$work/shm.log" 2>&1 ||
  { echo "debug_log_test: the shared-memory run failed" >&2; failures=$((failures + 1)); }
cat "$work/shm.log"
for rank in 0 1 2; do
  expect 1 "^\[$rank\] rlx info: shared memory with ranks 0,1,2 on host " "$work/shm.log"
  expect 2 "^\[$rank\] rlx info: peer [0-2]: calls go through shared memory \(same host " "$work/shm.log"
  expect 1 "^\[$rank\] rlx debug: all_reduce sum of 1048576 x f32 .*collective #0: shared_memory \(shared memory\), every rank on one host: shared memory among 3 ranks, pipelined" \
    "$work/shm.log"
  expect 1 "^\[$rank\] rlx debug: all_gather of 1 x i32 .*: shared memory among 3 ranks, one-shot" \
    "$work/shm.log"
done

# A cost model whose steps cost a second: recursive doubling wins at any size.
printf '# slow steps\ndedicated 1 1e-12 1e-12\nshared 1 1e-12 1e-12\n' >"$work/model.txt"
"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug --env RLX_SHM=0 --env "RLX_COST_MODEL=$work/model.txt" \
  "$program" >"$work/model.log" 2>&1 ||
  { echo "debug_log_test: the cost-model run failed" >&2; failures=$((failures + 1)); }
expect 3 "debug: all_reduce sum of 1048576 x f32 .*: recursive_doubling \(network\), below the crossover .*RLX_COST_MODEL=$work/model.txt" \
  "$work/model.log"

# A training loop: each (collective, size class) is named once per rank,
# though the loop runs it every step.
"$rlxrun" -n 2 --timeout 60 --env RLX_LOG=debug "$train" >"$work/train.log" 2>&1 ||
  { echo "debug_log_test: the training run failed" >&2; failures=$((failures + 1)); }
for rank in 0 1; do
  grep -E "^\[$rank\] rlx debug: .*collective #" "$work/train.log" |
    sed -E 's/collective #[0-9]+//' | sort >"$work/train.$rank"
  if [[ ! -s $work/train.$rank ]] || [[ -n $(uniq -d "$work/train.$rank") ]]; then
    echo "debug_log_test: rank $rank's choices are missing or repeat:" >&2
    cat "$work/train.$rank" >&2
    failures=$((failures + 1))
  fi
done
expect 2 "all_sum of 2 ranks|loss" "$work/train.log"

# RLX_TUNE: network algorithms forced over shared memory, by size range.
tune="all_reduce:0-64k:recursive_doubling,64k-inf:ring;all_gather:ring;barrier:dissemination"
"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug --env "RLX_TUNE=$tune" "$program" \
  >"$work/tune.log" 2>&1 || { echo "debug_log_test: the RLX_TUNE run failed" >&2; failures=$((failures + 1)); }
expect 3 "debug: all_reduce sum of 1048576 x f32 .*: ring \(network\), forced by RLX_TUNE all_reduce:64k-inf:ring" \
  "$work/tune.log"
expect 3 "debug: all_gather of 1 x i32 .*: ring \(network\), forced by RLX_TUNE all_gather:ring" "$work/tune.log"
expect 3 "debug: barrier, .*: dissemination \(network\), forced by RLX_TUNE" "$work/tune.log"
expect 3 "0 wrong" "$work/tune.log"

# A forced algorithm that cannot run fails the call on every rank, saying why.
"$rlxrun" -n 3 --timeout 60 --env RLX_TUNE=all_gather:recursive_doubling "$program" \
  >"$work/cannot.log" 2>&1 && { echo "debug_log_test: a 3-rank recursive doubling ran" >&2; failures=$((failures + 1)); }
expect 3 "all_gather of 1 x i32 .*invalid argument: RLX_TUNE all_gather:recursive_doubling forces recursive_doubling, which cannot run here: it needs a power-of-two group, not 3 ranks" \
  "$work/cannot.log"

# An unknown algorithm fails every rank at start; malformed syntax stops
# rlxrun before any rank starts (exit 2).
"$rlxrun" -n 2 --timeout 60 --env RLX_TUNE=all_gather:bruck "$program" >"$work/unknown.log" 2>&1 &&
  { echo "debug_log_test: an unknown algorithm ran" >&2; failures=$((failures + 1)); }
expect 2 "all_gather has no algorithm 'bruck'.*its algorithms are recursive_doubling, direct, ring, shared_memory" \
  "$work/unknown.log"
"$rlxrun" -n 2 --timeout 60 --env RLX_TUNE=all_gather:5-1:ring "$program" >"$work/syntax.log" 2>&1
status=$?
if ((status != 2)); then
  echo "debug_log_test: malformed RLX_TUNE exited $status, expected 2" >&2
  failures=$((failures + 1))
fi
expect 1 "RLX_TUNE='all_gather:5-1:ring' is not valid: '5-1:ring' is an empty range" "$work/syntax.log"

# Ranks that force differently are refused at start on every rank (else
# they would wait for each other's other steps).
"$rlxrun" -n 3 --timeout 60 sh -c '[ "$RLX_RANK" = 1 ] && export RLX_TUNE=all_gather:ring; exec "$0"' \
  "$program" >"$work/differ.log" 2>&1 &&
  { echo "debug_log_test: ranks with different RLX_TUNE ran" >&2; failures=$((failures + 1)); }
expect 3 "rank 1 forces other algorithms than rank 0 \(RLX_TUNE or RLX_ALL_REDUCE_ALGORITHM differ\)" \
  "$work/differ.log"

"$rlxrun" -n 3 --timeout 60 "$program" >"$work/quiet.log" 2>&1 ||
  { echo "debug_log_test: the quiet run failed" >&2; failures=$((failures + 1)); }
if grep -E 'rlx(\[[0-9]+\])? (debug|info)' "$work/quiet.log"; then
  echo "debug_log_test: debug or info lines without RLX_LOG" >&2
  failures=$((failures + 1))
fi
expect 3 "0 wrong" "$work/quiet.log"

# The rank is said once: by rlxrun's tag, else by rlx itself.
if grep -E '^\[[0-9]+\] rlx\[' "$work/debug.log" "$work/shm.log"; then
  echo "debug_log_test: lines that carry the rank twice" >&2
  failures=$((failures + 1))
fi
"$rlxrun" -n 2 --timeout 60 --no-tag-output --env RLX_LOG=info "$program" >"$work/untagged.log" 2>&1 ||
  { echo "debug_log_test: the untagged run failed" >&2; failures=$((failures + 1)); }
expect 1 "^rlx\[1\] info: rank 1 of 2 on the tcp backend" "$work/untagged.log"
((failures == 0)) && echo "debug_log_test: passed"
exit $((failures > 0))
