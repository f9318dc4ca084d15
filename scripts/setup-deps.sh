#!/usr/bin/env bash
# Installs the Debian 12 packages rlx needs, only those that are missing.
# Usage: scripts/setup-deps.sh [extra-package ...]
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config clang-format
  libboost-dev libboost-program-options-dev libssl-dev libopenblas-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  libibverbs-dev librdmacm-dev
  libpmix-dev slurm-wlm  # joining PMIx jobs; tests/slurm: a real slurmctld and slurmd
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev iperf3  # bench/compare: the Gloo peer, and loopback TCP's ceiling
  openssh-server openssh-client iproute2 nftables  # tests/cluster: hosts, sshd, faults
  clang-14 libclang-rt-14-dev             # tests/fuzz: libFuzzer
  python3-dev pybind11-dev python3-numpy python3-torch  # the Python module and its tests
  libtorch-dev  # bindings/torch: torch.distributed's "rlx" backend
  "$@"
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "rlx: installing missing Debian packages: ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    echo "rlx: run as root, or install: apt-get install ${missing[*]}" >&2
    exit 1
  }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# apt may be busy (another install, unattended upgrades): wait for its lock, bounded.
apt_opts=(-o DPkg::Lock::Timeout=300)
"${sudo[@]}" apt-get "${apt_opts[@]}" update -qq
"${sudo[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}"
