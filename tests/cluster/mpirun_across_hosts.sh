#!/usr/bin/env bash
# Programs built with rlx, unchanged, under Open MPI's mpirun across the hosts
# of a cluster.sh cluster: mpirun starts its daemons over real ssh, and the
# ranks reach each other over TCP between the hosts' namespaces.
# Usage (through cluster.sh): cluster.sh run 3 -- mpirun_across_hosts.sh BUILD_DIR MPIRUN CASE
#   CASE: conformance | example
set -euo pipefail
build=$(cd "$1" && pwd)
mpirun=$2
case_name=$3
source "$(dirname "${BASH_SOURCE[0]}")/prelude.sh"

# One rank per host; the example takes 4 ranks (its hidden size divides by
# 4), so the first host takes two.
write_hostfile
ranks=${#hosts[@]}
if [[ $case_name == example ]]; then
  write_hostfile 2 1 1
  ranks=4
fi

# Root in CI; ssh with the cluster's key; Open MPI's own traffic (daemons and
# the TCP byte-transfer layer) on the cluster's subnet only; no shared memory
# between hosts, which here share one kernel but stand for separate machines.
run_mpirun() {
  timeout -k 5 "$1" "$mpirun" --allow-run-as-root --hostfile hostfile -np "$ranks" \
    --mca plm_rsh_agent "$RLX_CLUSTER_SSH" \
    --mca oob_tcp_if_include "$RLX_CLUSTER_SUBNET" --mca btl_tcp_if_include "$RLX_CLUSTER_SUBNET" \
    --mca btl self,vader,tcp --tag-output "${@:2}"
}

case $case_name in
  conformance)
    run_mpirun 300 "$build/tests/conformance/conformance_test" --gtest_brief=1 | tee out.txt
    [[ $(grep -c '\[  PASSED  \]' out.txt) -eq $ranks ]] || fail "not every rank reported PASSED"
    ;;
  example)
    run_mpirun 120 "$build/examples/tensor_parallel_mlp" | tee out.txt
    [[ $(grep -c "of $ranks (mpi).*(ok)" out.txt) -eq $ranks ]] || fail "not every rank reported (ok)"
    run_mpirun 60 sh -c 'echo "on $(hostname)"' | tee names.txt
    [[ $(sort -u <(grep -o 'on rlx.*' names.txt) | wc -l) -eq ${#hosts[@]} ]] ||
      fail "the ranks did not run on ${#hosts[@]} distinct hosts"
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "PASS: mpirun across ${#hosts[@]} hosts: $case_name"
