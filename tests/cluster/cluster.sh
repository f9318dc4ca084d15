#!/usr/bin/env bash
# A cluster of test hosts on this machine: each host is a Linux network
# namespace with its own address on a private bridge, its own hostname (a UTS
# namespace) and a real sshd that accepts a key made for this cluster. The
# file system is shared, as on a cluster with a shared home: every host sees
# the build tree at the same path.
#
#   cluster.sh run HOSTS -- COMMAND [ARGS...]
#       Brings a cluster up, runs COMMAND in this (the root) namespace with the
#       variables below, and takes the cluster down however COMMAND ends.
#       Exits with COMMAND's status, or 77 (skipped) when this machine cannot
#       make network namespaces (not root, no `ip netns`, no sshd).
#   cluster.sh sweep
#       Removes what killed runs left behind (namespaces, bridges, sshds).
#
# COMMAND sees:
#   RLX_CLUSTER_DIR        the cluster's folder (keys, configs, sshd logs)
#   RLX_CLUSTER_SSH        an ssh command that logs into any host: $RLX_CLUSTER_SSH ADDR CMD
#   RLX_CLUSTER_HOSTS      the hosts' addresses, space-separated (host i is 198.18.N.(10+i))
#   RLX_CLUSTER_NAMESPACES the hosts' namespaces, space-separated
#   RLX_CLUSTER_SUBNET     198.18.N.0/24; the root namespace is 198.18.N.1 on it
#   RLX_CLUSTER_BRIDGE     the bridge; each host's link is veth rlxN-vI (eth0 inside)
#
# Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for
# benchmarking: they exist only on this bridge and reach nothing else.
set -euo pipefail

readonly kSkip=77
readonly kClaims=/run/rlx-cluster

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

can_make_clusters() {
  [[ $(id -u) -eq 0 ]] || { echo "cluster.sh: skipped: network namespaces need root" >&2; return 1; }
  command -v ip >/dev/null || { echo "cluster.sh: skipped: no ip (iproute2)" >&2; return 1; }
  [[ -x /usr/sbin/sshd ]] || { echo "cluster.sh: skipped: no sshd (openssh-server)" >&2; return 1; }
  command -v unshare >/dev/null || { echo "cluster.sh: skipped: no unshare" >&2; return 1; }
}

# Takes the lowest free cluster number: a folder under $kClaims holding the
# owner's pid. A claim whose owner is gone is swept and reused.
claim_number() {
  mkdir -p "$kClaims"
  local n
  for n in $(seq 1 250); do
    if mkdir "$kClaims/$n" 2>/dev/null; then
      echo $$ >"$kClaims/$n/owner"
      echo "$n"
      return
    fi
    local owner
    owner=$(cat "$kClaims/$n/owner" 2>/dev/null || echo 0)
    if ! kill -0 "$owner" 2>/dev/null && [[ -s $kClaims/$n/owner ]]; then
      teardown "$n"
      if mkdir "$kClaims/$n" 2>/dev/null; then
        echo $$ >"$kClaims/$n/owner"
        echo "$n"
        return
      fi
    fi
  done
  die "no free cluster number under $kClaims"
}

# Removes cluster N's hosts: links, namespaces (and every process left in
# them) and bridge. Safe to call on a half-made cluster, or on none.
remove_hosts() {
  local n=$1 ns pid link
  # The root ends of the hosts' links first: deleting one removes its pair at
  # once, while a namespace's links go away asynchronously after `netns del`.
  for link in $(ip -o link show 2>/dev/null | grep -oE "rlx${n}-v[0-9]+" | sort -u); do
    ip link del "$link" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^rlx${n}-h[0-9]+$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "rlxbr$n" 2>/dev/null || true
}

# Removes cluster N and its claim.
teardown() {
  remove_hosts "$1"
  rm -rf "${kClaims:?}/$1"
}

write_sshd_config() {
  local dir=$1 address=$2 index=$3
  cat >"$dir/sshd.h$index.conf" <<EOF
ListenAddress $address
HostKey $dir/host_key
PidFile $dir/sshd.h$index.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
MaxStartups 200
MaxSessions 200
EOF
}

write_ssh_command() {
  local dir=$1
  cat >"$dir/ssh" <<EOF
#!/bin/sh
# Logs into a host of this cluster with the cluster's key.
exec ssh -F /dev/null -i $dir/client_key -o StrictHostKeyChecking=no \\
  -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \\
  -o ConnectTimeout=10 -o ServerAliveInterval=5 "\$@"
EOF
  chmod +x "$dir/ssh"
}

# Waits until host `address` answers ssh, for at most 20 s.
wait_for_sshd() {
  local dir=$1 address=$2
  for _ in $(seq 1 100); do
    "$dir/ssh" "$address" true 2>/dev/null && return
    sleep 0.2
  done
  die "sshd on $address did not answer within 20 s; its log: $(cat "$dir"/sshd.*.log 2>/dev/null)"
}

bring_up() {
  local n=$1 hosts=$2 dir=$3 i
  local subnet="198.18.$n"
  ssh-keygen -q -t ed25519 -N '' -C rlx-cluster -f "$dir/client_key"
  ssh-keygen -q -t ed25519 -N '' -C rlx-cluster-host -f "$dir/host_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  write_ssh_command "$dir"
  mkdir -p /run/sshd  # sshd's privilege-separation folder

  ip link add "rlxbr$n" type bridge
  ip addr add "$subnet.1/24" dev "rlxbr$n"
  ip link set "rlxbr$n" up
  local addresses=() namespaces=()
  for ((i = 0; i < hosts; i++)); do
    local ns="rlx$n-h$i" address="$subnet.$((10 + i))"
    ip netns add "$ns"
    ip link add "rlx$n-v$i" type veth peer name eth0 netns "$ns"
    ip link set "rlx$n-v$i" master "rlxbr$n" up
    ip -n "$ns" addr add "$address/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    write_sshd_config "$dir" "$address" "$i"
    ip netns exec "$ns" unshare --uts sh -c \
      "hostname rlx$n-h$i && exec /usr/sbin/sshd -f '$dir/sshd.h$i.conf' -E '$dir/sshd.h$i.log'"
    addresses+=("$address")
    namespaces+=("$ns")
  done
  for address in "${addresses[@]}"; do wait_for_sshd "$dir" "$address"; done

  export RLX_CLUSTER_DIR=$dir RLX_CLUSTER_SSH=$dir/ssh RLX_CLUSTER_SUBNET="$subnet.0/24"
  export RLX_CLUSTER_HOSTS="${addresses[*]}" RLX_CLUSTER_NAMESPACES="${namespaces[*]}"
  export RLX_CLUSTER_BRIDGE="rlxbr$n"
}

run() {
  local hosts=$1
  shift
  [[ ${1:-} == -- ]] && shift
  [[ $# -gt 0 ]] || die "usage: cluster.sh run HOSTS -- COMMAND [ARGS...]"
  can_make_clusters || exit $kSkip
  local n dir
  n=$(claim_number)
  remove_hosts "$n"  # what a killed run with this number may have left
  dir=$(mktemp -d "${TMPDIR:-/tmp}/rlx-cluster.XXXXXX")
  # However the command ends (failure, timeout's SIGTERM, Ctrl-C), nothing stays.
  trap 'teardown '"$n"'; rm -rf '"$dir" EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  bring_up "$n" "$hosts" "$dir"
  echo "cluster.sh: $hosts hosts up: $RLX_CLUSTER_HOSTS (ssh: $RLX_CLUSTER_SSH)" >&2
  local status=0
  "$@" || status=$?
  if [[ $status -ne 0 ]]; then
    for log in "$dir"/sshd.*.log; do
      [[ -s $log ]] && echo "cluster.sh: $(basename "$log"): $(cat "$log")" >&2
    done
  fi
  return $status
}

sweep() {
  local n
  for n in $(ip link show type bridge 2>/dev/null | grep -oE 'rlxbr[0-9]+' | sed 's/rlxbr//' | sort -u); do
    local owner
    owner=$(cat "$kClaims/$n/owner" 2>/dev/null || echo 0)
    kill -0 "$owner" 2>/dev/null || teardown "$n"
  done
}

case ${1:-} in
  run) shift; run "$@" ;;
  sweep) sweep ;;
  *) die "usage: cluster.sh run HOSTS -- COMMAND [ARGS...] | cluster.sh sweep" ;;
esac
