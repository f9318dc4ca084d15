#!/usr/bin/env bash
# RLX_LOG end to end: 3 ranks under rlxrun print rank-prefixed lines for the
# connection setup, each peer's path and each collective's algorithm with its
# reason, on the same-host shared-memory path (the default) and over TCP
# (RLX_SHM=0); RLX_COST_MODEL's file moves the TCP all-reduce crossover;
# without RLX_LOG nothing but the program's own output appears.
# Usage: debug_log_test.sh RLXRUN HELLO_ALLREDUCE
set -uo pipefail
rlxrun=$1 program=$2
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
  expect 1 "^\[$rank\] rlx\[$rank\] debug: connected to the rendezvous at 127\.0\.0\.1:" "$work/debug.log"
  expect 2 "^\[$rank\] rlx\[$rank\] info: peer [0-2]: tcp to 127\.0\.0\.1:[0-9]+, 3 connections" \
    "$work/debug.log"
  expect 1 "^\[$rank\] rlx\[$rank\] info: rank $rank of 3 on the tcp backend" "$work/debug.log"
  expect 1 "^\[$rank\] rlx\[$rank\] debug: all_reduce sum of 1048576 x f32 .*: ring, at or above the crossover of [0-9]+ B at 3 ranks \(cost model: built in" \
    "$work/debug.log"
  expect 1 "^\[$rank\] rlx\[$rank\] debug: all_gather of 1 x i32 .*: direct exchange" "$work/debug.log"
  expect 2 "^\[$rank\] rlx\[$rank\] debug: peer [0-2]: the network \(same host, but RLX_SHM=0" "$work/debug.log"
done

"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug "$program" >"$work/shm.log" 2>&1 ||
  { echo "debug_log_test: the shared-memory run failed" >&2; failures=$((failures + 1)); }
cat "$work/shm.log"
for rank in 0 1 2; do
  expect 1 "^\[$rank\] rlx\[$rank\] info: shared memory with ranks 0,1,2 on host " "$work/shm.log"
  expect 2 "^\[$rank\] rlx\[$rank\] debug: peer [0-2]: shared memory \(same host " "$work/shm.log"
  expect 1 "^\[$rank\] rlx\[$rank\] debug: all_reduce sum of 1048576 x f32 .*collective #0: shared memory among 3 ranks, pipelined" \
    "$work/shm.log"
  expect 1 "^\[$rank\] rlx\[$rank\] debug: all_gather of 1 x i32 .*: shared memory among 3 ranks, one-shot" \
    "$work/shm.log"
done

# A cost model whose steps cost a second: recursive doubling wins at any size.
printf '# slow steps\ndedicated 1 1e-12 1e-12\nshared 1 1e-12 1e-12\n' >"$work/model.txt"
"$rlxrun" -n 3 --timeout 60 --env RLX_LOG=debug --env RLX_SHM=0 --env "RLX_COST_MODEL=$work/model.txt" \
  "$program" >"$work/model.log" 2>&1 ||
  { echo "debug_log_test: the cost-model run failed" >&2; failures=$((failures + 1)); }
expect 3 "debug: all_reduce sum of 1048576 x f32 .*: recursive doubling, below the crossover .*RLX_COST_MODEL=$work/model.txt" \
  "$work/model.log"

"$rlxrun" -n 3 --timeout 60 "$program" >"$work/quiet.log" 2>&1 ||
  { echo "debug_log_test: the quiet run failed" >&2; failures=$((failures + 1)); }
if grep -E 'rlx\[[0-9]+\] (debug|info)' "$work/quiet.log"; then
  echo "debug_log_test: debug or info lines without RLX_LOG" >&2
  failures=$((failures + 1))
fi
expect 3 "0 wrong" "$work/quiet.log"
((failures == 0)) && echo "debug_log_test: passed"
exit $((failures > 0))
