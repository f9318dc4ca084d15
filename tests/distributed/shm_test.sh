#!/usr/bin/env bash
# The same-host shared-memory path end to end, through rlxrun. Each case runs
# in a mount namespace of its own with a private /dev/shm, so "nothing is left
# in /dev/shm" is checked exactly while other tests run beside it.
#   full       a /dev/shm too small for the segments: every rank warns with
#              the reason, the job runs over TCP (the debug log's paths say so)
#   two_jobs   two jobs on one host at once, each checking every result of
#              thousands of collectives: they never see each other's segments
#   killed     a rank SIGKILLed mid-collective: every survivor names it
#   stopped    a rank SIGSTOPped mid-collective: every survivor times out naming it
#   off        RLX_SHM=0: TCP to every peer, nothing created in /dev/shm
# Usage: shm_test.sh CASE RLXRUN HELLO_ALLREDUCE FAULT_PROGRAM CONFORMANCE_TEST
# Exits 77 (skipped) where it cannot make a mount namespace (not root).
set -uo pipefail
case_name=$1 rlxrun=$2 hello=$3 fault_program=$4 conformance=$5

if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
  echo "shm_test: skipped: a private /dev/shm needs root and unshare" >&2
  exit 77
fi
# Re-run this script inside a new mount namespace with a private /dev/shm.
if [[ -z ${RLX_SHM_TEST_INSIDE:-} ]]; then
  size=64m
  [[ $case_name == full ]] && size=512k
  exec unshare --mount --propagation private env RLX_SHM_TEST_INSIDE="$size" "$0" "$@"
fi
mount -t tmpfs -o "size=$RLX_SHM_TEST_INSIDE,mode=1777" rlx-shm-test /dev/shm || {
  echo "shm_test: skipped: cannot mount a tmpfs on /dev/shm" >&2
  exit 77
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "shm_test ($case_name): $*" >&2
  failures=$((failures + 1))
}
expect() {  # expect COUNT REGEX FILE: at least COUNT lines match
  local matched
  matched=$(grep -cE -- "$2" "$3" || true)
  ((matched >= $1)) || fail "$matched lines of $(basename "$3") match '$2', expected $1"
}
expect_empty_dev_shm() {
  local left
  left=$(ls -A /dev/shm)
  [[ -z $left ]] || fail "left in /dev/shm: $left"
}

case $case_name in
  full)
    "$rlxrun" -n 3 --timeout 120 --env RLX_LOG=debug "$hello" >"$work/out" 2>&1 ||
      fail "the job failed over TCP"
    cat "$work/out"
    for rank in 0 1 2; do
      expect 1 "^\[$rank\] rlx warning: .*cannot reserve .* of shared memory in /dev/shm" "$work/out"
      expect 1 "^\[$rank\] rlx warning: shared memory with ranks 0,1,2 is off: .*using the network" \
        "$work/out"
      expect 2 "^\[$rank\] rlx info: peer [0-2]: calls go through the network \(same host, but shared memory could not" \
        "$work/out"
    done
    expect 3 "0 wrong" "$work/out"
    ;;
  two_jobs)
    for job in a b; do
      "$rlxrun" -n 2 --timeout 120 --env RLX_STEADY_MS=3000 "$fault_program" steady \
        >"$work/$job" 2>&1 &
    done
    for job in a b; do wait -n || fail "a job failed"; done
    cat "$work/a" "$work/b"
    expect 2 "RESULT kind=none rounds=[0-9]+" "$work/a"
    expect 2 "RESULT kind=none rounds=[0-9]+" "$work/b"
    ;;
  killed | stopped)
    mode=peer_killed timeout_s=60
    [[ $case_name == stopped ]] && mode=frozen timeout_s=2
    "$rlxrun" -n 4 --timeout 120 --env "RLX_TIMEOUT_S=$timeout_s" "$fault_program" "$mode" \
      >"$work/out" 2>&1
    cat "$work/out"
    for rank in 0 1 2; do
      expect 1 "^\[$rank\] MESSAGE .*rank 3" "$work/out"
    done
    ;;
  off)
    "$rlxrun" -n 2 --timeout 60 --env RLX_SHM=0 --env RLX_LOG=debug "$hello" >"$work/out" 2>&1 ||
      fail "the job failed"
    expect 2 "info: peer [01]: calls go through the network \(same host, but RLX_SHM=0" "$work/out"
    expect 2 "0 wrong" "$work/out"
    ;;
  *)
    echo "shm_test: unknown case $case_name" >&2
    exit 2
    ;;
esac
expect_empty_dev_shm
((failures == 0)) && echo "shm_test ($case_name): passed"
exit $((failures > 0))
