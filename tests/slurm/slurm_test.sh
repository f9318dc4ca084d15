#!/bin/bash
# rlx under a real Slurm (tests/slurm/slurm_cluster.sh: slurmctld and one
# slurmd on this machine, several tasks on its one node; several nodes:
# slurm_across_hosts.sh): srun's tasks join
# one TCP group through Slurm's PMIx server, the conformance suite passes
# over it, and a task killed mid-job is named by every survivor while srun
# exits non-zero. Exit 77 (ctest: skipped, with the reason) when Slurm's
# daemons cannot run here.
# Usage: slurm_test.sh HELLO_ALLREDUCE CONFORMANCE_TEST FAULT_PROGRAM
set -uo pipefail
hello=$1 conformance=$2 faults=$3
here=$(cd "$(dirname "$0")" && pwd)
state=$(mktemp -d /tmp/rlx-slurm.XXXXXX)
cleanup() {
  "$here/slurm_cluster.sh" stop "$state" || true
  rm -rf "$state"
}
trap cleanup EXIT
started=$("$here/slurm_cluster.sh" start "$state")
status=$?
if ((status != 0)); then
  exit "$status"  # 77: the reason is on stderr
fi
export "${started?}"
failures=0
check() {  # NAME: report and count
  if (($1)); then
    echo "[slurm] PASS $2"
  else
    echo "[slurm] FAIL $2"
    failures=$((failures + 1))
  fi
}

out=$(timeout 120 srun -n 4 --kill-on-bad-exit=0 "$hello" 2>&1)
rc=$?
printf '%s\n' "$out"
ok=$((rc == 0 && $(grep -c 'of 4 (tcp): all_sum of 1048576 floats = 10, 0 wrong' <<<"$out") == 4))
check "$ok" "srun -n 4: one 4-rank TCP group through PMIx"

out=$(timeout 200 srun -n 3 env RLX_TIMEOUT_S=60 "$conformance" --gtest_brief=1 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 20
ok=$((rc == 0 && $(grep -c 'PASSED' <<<"$out") == 3))
check "$ok" "srun -n 3: the conformance suite"

# The last task kills itself mid-loop: every other rank reports peer_lost
# naming it, and srun's exit status says the job failed.
out=$(timeout 120 srun -n 3 --kill-on-bad-exit=0 env RLX_TIMEOUT_S=30 "$faults" peer_killed 2>&1)
rc=$?
printf '%s\n' "$out"
named=$(grep -c 'MESSAGE .*rank 2' <<<"$out")
ok=$((rc != 0 && $(grep -c 'RESULT kind=peer lost' <<<"$out") == 2 && named == 2))
check "$ok" "srun -n 3, task 2 killed: both survivors name it, srun exits $rc"

# srun without a PMIx server: every task refuses to run as a group of one.
out=$(timeout 60 srun -n 2 --mpi=none "$hello" 2>&1)
rc=$?
printf '%s\n' "$out"
ok=$((rc != 0 && $(grep -c 'SLURM_STEP_NUM_TASKS=2.*srun --mpi=pmix' <<<"$out") >= 1))
check "$ok" "srun --mpi=none: an error naming srun --mpi=pmix, no groups of one"

echo "$((4 - failures)) passed, $failures failed"
((failures == 0))
