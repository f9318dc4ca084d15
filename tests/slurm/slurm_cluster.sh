#!/bin/bash
# A real Slurm on this machine for the tests: slurmctld and one slurmd (one
# node with 8 CPUs on loopback; slurm_across_hosts.sh runs one slurmd per
# network-namespace host instead), no munge (auth/none: the daemons listen
# on loopback only), MpiDefault=pmix so `srun -n N prog` gives every task a
# PMIx server.
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

stop() {
  for daemon in slurmd slurmctld; do
    if [[ -f $dir/$daemon.pid ]]; then
      kill "$(cat "$dir/$daemon.pid")" 2>/dev/null || true
    fi
  done
  for daemon in slurmd slurmctld; do
    local pid
    pid=$(cat "$dir/$daemon.pid" 2>/dev/null || true)
    for _ in $(seq 50); do
      [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$daemon.pid"
  done
}

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

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$dir/state" "$dir/spool"
host=$(hostname -s)
cat >"$dir/slurm.conf" <<CONF
ClusterName=rlxtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=2
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=rlx Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
stop
# A daemon that fails to start takes the other down with it: nothing outlives a skip.
slurmctld -i -f "$SLURM_CONF" || { stop; skip "slurmctld did not start: $(tail -n 5 "$dir/slurmctld.log" 2>/dev/null)"; }
slurmd -f "$SLURM_CONF" || { stop; skip "slurmd did not start: $(tail -n 5 "$dir/slurmd.log" 2>/dev/null)"; }
for _ in $(seq 100); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)
  if [[ $state == idle ]]; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
stop
skip "the node did not become idle within 20 s (state '${state:-none}'): $(tail -n 5 "$dir/slurmd.log" "$dir/slurmctld.log" 2>/dev/null)"
