#!/bin/bash
# Slurm across hosts: run by tests/cluster/cluster.sh (each host a network
# namespace with its own address). slurmctld runs in the root namespace, one
# slurmd per host (named by its address), and:
#   * srun -N 2 -n 4: tasks on two hosts join one TCP group through PMIx;
#   * salloc -N 2 -n 4 rlxrun -n 4: rlxrun takes its hosts and slots from
#     the allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) and starts
#     its agents with srun, not ssh (no key is given to it).
# Usage: slurm_across_hosts.sh BUILD_DIR
set -uo pipefail
build=$1
hello=$build/examples/hello_allreduce
rlxrun=$build/bin/rlxrun
command -v slurmctld >/dev/null && command -v slurmd >/dev/null || {
  echo "slurm_across_hosts: skipped: Slurm is not installed (apt-get install slurm-wlm)" >&2
  exit 77
}
read -r -a hosts <<<"$RLX_CLUSTER_HOSTS"
read -r -a namespaces <<<"$RLX_CLUSTER_NAMESPACES"
root_address=${RLX_CLUSTER_SUBNET%.0/24}.1
dir=$RLX_CLUSTER_DIR/slurm
source "$(dirname "$0")/slurm_common.sh"
# Slurm's PMIx plugin keeps per-step files under TmpFS, named by job and
# step only: two slurmds sharing one /tmp collide. Each host gets its own,
# bind-mounted at this path in a mount namespace of its slurmd.
tmpfs=/var/tmp/rlx-slurm-tmpfs
mkdir -p "$tmpfs"
nodes=()
for address in "${hosts[@]}"; do nodes+=("$address=$address"); done
write_slurm_conf "$dir" "$root_address" "$tmpfs" "${nodes[@]}"
export SLURM_CONF=$dir/slurm.conf

# RLX_SLURM_KEEP=DIR keeps the daemons' configuration and logs there.
trap 'stop_slurm_daemons "$dir"; [[ -n ${RLX_SLURM_KEEP:-} ]] && cp -r "$dir" "$RLX_SLURM_KEEP" 2>/dev/null' EXIT
slurmctld -i -f "$SLURM_CONF" || { cat "$dir/slurmctld.log"; exit 1; }
# nsenter, not `ip netns exec`: that one mounts a fresh /sys without the
# cgroup file system slurmd needs.
for i in "${!hosts[@]}"; do
  mkdir -p "$dir/tmp-${hosts[$i]}"
  nsenter --net="/run/netns/${namespaces[$i]}" unshare --mount --propagation private \
    sh -c "mount --bind '$dir/tmp-${hosts[$i]}' '$tmpfs' &&
           exec slurmd -N '${hosts[$i]}' -f '$SLURM_CONF'" ||
    { cat "$dir/slurmd-${hosts[$i]}.log"; exit 1; }
done
wait_for_idle_nodes "${#hosts[@]}" || {
  echo "slurm_across_hosts: the nodes did not become idle within 20 s" >&2
  sinfo -N
  exit 1
}
sinfo -N

failures=0
check() {
  if (($1)); then echo "[slurm] PASS $2"; else echo "[slurm] FAIL $2"; failures=$((failures + 1)); fi
}

out=$(timeout 120 srun -N 2 -n 4 "$hello" 2>&1)
rc=$?
printf '%s\n' "$out"
ok=$((rc == 0 && $(grep -c 'of 4 (tcp): all_sum of 1048576 floats = 10, 0 wrong' <<<"$out") == 4))
check "$ok" "srun -N 2 -n 4: one TCP group across two hosts through PMIx"

out=$(timeout 120 salloc -N 2 -n 4 "$rlxrun" -n 4 --timeout 100 "$hello" 2>&1)
rc=$?
printf '%s\n' "$out"
ok=$((rc == 0 && $(grep -c 'of 4 (tcp): all_sum of 1048576 floats = 10, 0 wrong' <<<"$out") == 4))
check "$ok" "salloc -N 2 -n 4 rlxrun -n 4: hosts from the allocation, agents through srun"

echo "$((2 - failures)) passed, $failures failed"
((failures == 0))
