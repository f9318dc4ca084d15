#!/bin/bash
# A real Slurm on this machine for the tests: slurmctld and one slurmd (one
# node with 8 CPUs on loopback; slurm_across_hosts.sh runs one slurmd per
# network-namespace host instead), configured by slurm_common.sh.
#   slurm_cluster.sh start DIR   writes DIR/slurm.conf, starts both daemons,
#                                 waits until the node is idle; prints
#                                 SLURM_CONF=DIR/slurm.conf
#   slurm_cluster.sh stop DIR    stops them
# Exit 77 when Slurm is not installed or its daemons cannot run here (the
# reason on stderr).
set -euo pipefail
action=${1:?start or stop}
dir=${2:?state directory}
skip() {
  echo "slurm_cluster: $*" >&2
  exit 77
}

source "$(dirname "$0")/slurm_common.sh"
stop() { stop_slurm_daemons "$dir"; }

if [[ $action == stop ]]; then
  stop
  exit 0
fi

command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null ||
  skip "slurmctld, slurmd or srun is not installed (Debian: apt-get install slurm-wlm)"
[[ $(id -u) == 0 ]] || skip "the daemons run as root here (SlurmUser=root)"
plugins=$(dirname "$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep '/auth_none.so$' | head -1)")
[[ -f $plugins/auth_none.so && -f $plugins/mpi_pmix.so ]] ||
  skip "Slurm's auth/none or mpi/pmix plugin is missing"

host=$(hostname -s)
write_slurm_conf "$dir" 127.0.0.1 "" "$host=127.0.0.1"
export SLURM_CONF=$dir/slurm.conf
stop
# A daemon that fails to start takes the other down with it: nothing outlives a skip.
slurmctld -i -f "$SLURM_CONF" || { stop; skip "slurmctld did not start: $(tail -n 5 "$dir/slurmctld.log" 2>/dev/null)"; }
slurmd -f "$SLURM_CONF" || { stop; skip "slurmd did not start: $(tail -n 5 "$dir"/slurmd-*.log 2>/dev/null)"; }
if wait_for_idle_nodes 1; then
  echo "SLURM_CONF=$SLURM_CONF"
  exit 0
fi
stop
skip "the node did not become idle within 20 s: $(tail -n 5 "$dir/slurmd-$host.log" "$dir/slurmctld.log" 2>/dev/null)"
