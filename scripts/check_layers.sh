#!/usr/bin/env bash
# Fails when a library folder includes from a folder it must not depend on:
# the layers of docs/ARCHITECTURE.md, checked on every #include "..." of the
# library's sources (tests, benchmarks and examples may include anything).
# Usage: scripts/check_layers.sh [REPO_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# Each folder and the folders its files may include from (besides itself).
declare -A may_include=(
  [rlx/core]=""
  [rlx/transport]="rlx/core"
  [rlx/transport/rendezvous]="rlx/core rlx/transport"
  [rlx/transport/shm]="rlx/core rlx/transport"
  [rlx/collectives]="rlx/core rlx/transport rlx/transport/shm"
  [rlx/backends/singleton]="rlx/core rlx/transport"
  [rlx/backends/tcp]="rlx/core rlx/transport rlx/transport/rendezvous rlx/transport/shm rlx/collectives"
  [rlx/backends/mpi]="rlx/core rlx/transport rlx/collectives"
  [rlx/backends/verbs]="rlx/core rlx/transport rlx/transport/rendezvous rlx/transport/shm rlx/collectives"
  [rlx]="rlx/core rlx/transport rlx/transport/rendezvous rlx/transport/shm rlx/collectives
         rlx/backends/singleton rlx/backends/tcp rlx/backends/mpi rlx/backends/verbs"
  [bindings/python]="rlx rlx/core rlx/transport"  # the public headers rlx/rlx.h exports
  [bindings/torch]="rlx rlx/core rlx/transport"
)
# The launcher shares only the contract with the library: these files.
launcher_may_include=" rlx/transport/launch_env.h rlx/transport/endpoint.h rlx/transport/rendezvous/server.h
  rlx/transport/auth.h rlx/transport/hostfile_reader.h
  rlx/transport/shm/segment.h rlx/version.h "

violations=0
report() {
  echo "layering: $1:$2 includes \"$3\": $4" >&2
  violations=$((violations + 1))
}

# Every quoted include of the library's sources, as FILE:LINE:TEXT, in one grep.
while IFS=: read -r file number line; do
  folder=${file%/*}
  included=${line#*\"}
  included=${included%%\"*}
  [[ $included == */* ]] || continue  # a system or same-folder header
  target=${included%/*}
  [[ $target == "$folder" ]] && continue
  if [[ $folder == rlx/launcher ]]; then
    [[ " ${launcher_may_include//$'\n'/ } " == *" $included "* ]] ||
      report "$file" "$number" "$included" "rlx/launcher/ may include only the launch contract"
    continue
  fi
  if [[ -z ${may_include[$folder]+set} ]]; then
    report "$file" "$number" "$included" "$folder/ is not a known layer"
    continue
  fi
  [[ " ${may_include[$folder]//$'\n'/ } " == *" $target "* ]] ||
    report "$file" "$number" "$included" "$folder/ may include only: ${may_include[$folder]}"
done < <(find rlx bindings/python bindings/torch \( -name '*.h' -o -name '*.cc' \) \
  ! -name '*_test.cc' -print0 | sort -z | xargs -0 grep -Hn '^#include "' || true)

if ((violations > 0)); then
  echo "layering: $violations include(s) point up or sideways; see docs/ARCHITECTURE.md" >&2
  exit 1
fi
echo "layering: every include points down"
