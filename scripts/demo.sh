#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the demo
# on local ranks over the default transport: a tensor-parallel MLP (one
# all-reduce inside the graph), data-parallel SGD, and both at once on two
# groups split from the job (pairs x data), each checked against the
# single-process computation.
# Usage: scripts/demo.sh [RANKS]   (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-4}

scripts/setup-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo "rlx demo: $ranks local ranks, default transport (tcp; ranks of one host share memory)"
build/release/bin/rlxrun -n "$ranks" --timeout 300 build/release/examples/tensor_parallel_mlp
build/release/bin/rlxrun -n "$ranks" --timeout 300 build/release/examples/data_parallel_train
build/release/bin/rlxrun -n "$ranks" --timeout 300 build/release/examples/parallel_grid
