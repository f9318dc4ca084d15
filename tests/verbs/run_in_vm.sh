#!/usr/bin/env bash
# Runs a script inside a QEMU VM with a Soft-RoCE (rxe) device, because this
# host's kernel has no RDMA stack. The VM is the shared harness
# ../shared/rdma-vm/run-in-rdma-vm beside the source tree (override with
# RLX_RDMA_VM); see its README for timings and caveats.
#
#   run_in_vm.sh LIMIT_S GUEST_SCRIPT [FILE...] [-- ARGS...]
#
# Copies GUEST_SCRIPT and the FILEs (binaries: their shared libraries follow)
# into one folder in the guest, runs `./GUEST_SCRIPT ARGS` there under a hard
# limit of LIMIT_S seconds (boot included) and exits with its status
# (124: the limit was hit; 125: the VM failed).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=${RLX_RDMA_VM:-$here/../../../shared/rdma-vm/run-in-rdma-vm}
if (($# < 2)); then
  echo "usage: run_in_vm.sh LIMIT_S GUEST_SCRIPT [FILE...] [-- ARGS...]" >&2
  exit 2
fi
limit=$1 script=$2
shift 2
if [[ ! -x $vm ]]; then
  echo "run_in_vm.sh: the RDMA VM harness is missing: $vm" >&2
  echo "  It lives in the 'shared' checkout beside this repository (shared/rdma-vm);" >&2
  echo "  clone it there, or point RLX_RDMA_VM at run-in-rdma-vm." >&2
  exit 1
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/rlx-verbs-vm.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp "$script" "$stage/"
while (($#)) && [[ $1 != -- ]]; do
  cp "$1" "$stage/"
  shift
done
[[ ${1:-} == -- ]] && shift
args=""
for a in "$@"; do args+=" $(printf '%q' "$a")"; done

status=0
"$vm" -t "$limit" -f "$stage" -- "./$(basename "$script")$args" || status=$?
exit "$status"
