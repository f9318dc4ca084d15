#!/bin/bash
# Inside the RDMA VM (run by run_in_vm.sh): every verbs check of the test
# suite in one boot, since a boot costs tens of seconds under TCG.
#  * the conformance suite over verbs with 2 ranks (RLX_IFNAME=dummy0, the
#    rxe device's interface) and 3 ranks (address chosen automatically: the
#    coordinator is on loopback, which has no RDMA device), RLX_SHM=0 so
#    every byte crosses the queue pairs although the ranks share the VM;
#  * the same with shared memory (the default): verbs sets up the mesh, the
#    ranks of the one host exchange through shared memory;
#  * the 64 MiB cases (every *Large* collective and the point-to-point size
#    sweeps) run once, with 2 ranks over the queue pairs: under TCG each
#    costs seconds, and the other runs add ranks or shared memory, not size;
#  * the fault cases of tests/faults on verbs (those that are TCP's own skip,
#    saying why) with RLX_SHM=0, and strangers on the rdma_cm port.
# Ranks run unbound (--bind-to none): the VM's vCPUs are threads that share
# the host's cores with the rest of the suite, so a rank held to one of them
# could not move off a starved one.
# Prints one line per check and the log of any that failed.
set -u
status=0
run() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  "$@" >"$name.log" 2>&1 || rc=$?
  if ((rc == 0)) && grep -q "FAILED" "$name.log"; then rc=1; fi
  echo "[$name] exit $rc after $((SECONDS - start)) s"
  if ((rc != 0)); then
    status=1
    tail -n 60 "$name.log"
  fi
}
run conformance_verbs_n2 ./rlxrun --bind-to none -n 2 --backend verbs --ifname dummy0 --timeout 200 \
  --env RLX_TIMEOUT_S=60 --env RLX_SHM=0 ./conformance_test --gtest_brief=1
not_large='--gtest_filter=-*Large*:SendRecv.*EverySize*'
run conformance_verbs_n3 ./rlxrun --bind-to none -n 3 --backend verbs --timeout 200 \
  --env RLX_TIMEOUT_S=60 --env RLX_SHM=0 ./conformance_test --gtest_brief=1 "$not_large"
run conformance_verbs_shm_n2 ./rlxrun --bind-to none -n 2 --backend verbs --ifname dummy0 --timeout 200 \
  --env RLX_TIMEOUT_S=60 ./conformance_test --gtest_brief=1 "$not_large"
export RLX_FAULTS_BACKEND=verbs
run faults_verbs env RLX_SHM=0 ./faults_test --gtest_filter='Faults.*' --gtest_brief=1
run rdma_cm_strangers ./rdma_cm_strangers_test --gtest_brief=1
exit $status
