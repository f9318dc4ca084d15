# Sourced by slurm_cluster.sh and slurm_across_hosts.sh: the one slurm.conf
# the tests run (no munge: auth/none, the daemons listen on test addresses
# only; MpiDefault=pmix, so `srun -n N prog` gives every task a PMIx server),
# the wait for its nodes, and stopping its daemons.

slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# write_slurm_conf DIR CONTROLLER_ADDRESS TMPFS NAME=ADDRESS...
#   DIR/slurm.conf for slurmctld on CONTROLLER_ADDRESS and one node per
#   NAME=ADDRESS (8 CPUs each, whatever the hardware: tasks outnumber cores
#   on purpose). Per-node files are named by node (%n). TMPFS empty: /tmp.
write_slurm_conf() {
  local dir=$1 controller=$2 tmpfs=$3
  shift 3
  local names=() node
  mkdir -p "$dir/state"
  {
    echo "ClusterName=rlxtest"
    echo "SlurmctldHost=$(hostname -s)($controller)"
    echo "SlurmctldPort=$(slurm_free_port)"
    echo "SlurmdPort=$(slurm_free_port)"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool-%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/slurmctld.log"
    echo "SlurmdLogFile=$dir/slurmd-%n.log"
    echo "ProctrackType=proctrack/pgid"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "MpiDefault=pmix"
    echo "ReturnToService=2"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    [[ -n $tmpfs ]] && echo "TmpFS=$tmpfs"
    for node in "$@"; do
      echo "NodeName=${node%%=*} NodeAddr=${node#*=} CPUs=8 State=UNKNOWN"
      names+=("${node%%=*}")
      mkdir -p "$dir/spool-${node%%=*}"
    done
    echo "PartitionName=rlx Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE" \
      "State=UP OverSubscribe=YES"
  } >"$dir/slurm.conf"
}

# Until COUNT nodes are idle (true) or 20 s passed (false). slurmctld has no
# event to wait on for a node's registration, so this polls its state.
wait_for_idle_nodes() {
  local count=$1 deadline=$((SECONDS + 20))
  while ((SECONDS < deadline)); do
    (($(sinfo -h -N -t idle -o '%N' 2>/dev/null | wc -l) == count)) && return 0
    sleep 0.2
  done
  return 1
}

# TERM to every daemon started here, then KILL to any still running after
# 5 s. They are not this shell's children, so there is no exit to wait on:
# their pids are polled.
stop_slurm_daemons() {  # DIR: the one write_slurm_conf wrote
  local dir=$1 file pid
  for file in "$dir"/slurm*.pid; do
    [[ -f $file ]] && kill "$(cat "$file")" 2>/dev/null || true
  done
  for file in "$dir"/slurm*.pid; do
    [[ -f $file ]] || continue
    pid=$(cat "$file")
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
  done
}
