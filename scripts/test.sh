#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run the
# whole test suite through ctest: the release build (and a short run of
# bench/compare and bench/scaling), then the ASan+UBSan and TSan builds,
# then the fuzzers.
# Usage: scripts/test.sh [--quick]   (--quick: release build only)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ ${1:-} == --quick ]] && quick=1

scripts/setup-deps.sh
jobs=$(nproc)

# The same-host path unlinks its segments once every rank mapped them, and
# rlxrun removes what a failed start left: after any test run, no segment
# made since the suite started may be left in /dev/shm (tests that kill
# ranks included).
check_dev_shm_is_clean() {
  local left
  left=$(find /dev/shm -maxdepth 1 -name 'rlx-*' -newer "$suite_started" 2>/dev/null || true)
  if [[ -n $left ]]; then
    echo "rlx: the tests left shared memory behind: $left" >&2
    exit 1
  fi
}

# Each phase says how long it took: the suite has a 30-minute budget on 2 cores.
phase_started=$SECONDS
phase_done() {
  echo "=== rlx: $1 took $((SECONDS - phase_started)) s (suite at $SECONDS s) ==="
  phase_started=$SECONDS
}

run_preset() {
  local preset=$1
  echo "=== rlx: $preset build and tests ==="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  phase_done "$preset build"
  ctest --preset "$preset"
  check_dev_shm_is_clean
  phase_done "$preset tests"
}

suite_started=$(mktemp)
trap 'rm -f "$suite_started"' EXIT

# Formatting is part of the suite: every C++ file matches .clang-format.
git ls-files '*.h' '*.cc' | xargs -r clang-format --dry-run -Werror

run_preset release
# The side-by-side comparison in its short mode, so it cannot rot: it fails
# when any system (rlx or a peer) computes a wrong result.
echo "=== rlx: bench/compare --short ==="
bench/compare --short --build build/release --out build/release/bench-short >/dev/null
echo "=== rlx: bench/compare --lineup same-host --short ==="
bench/compare --lineup same-host --short --build build/release \
  --out build/release/bench-short-same-host >/dev/null
echo "=== rlx: bench/scaling --short ==="
bench/scaling --short --build build/release --out build/release/scaling-short \
  --write-cost-model build/release/scaling-short/cost-model >/dev/null
# The fitted file round-trips: a job reads it (a malformed one fails the job).
RLX_COST_MODEL=build/release/scaling-short/cost-model build/release/bin/rlxrun -n 2 \
  build/release/examples/hello_allreduce >/dev/null
phase_done "benchmarks' short runs"
if [[ $quick -eq 0 ]]; then
  run_preset asan
  run_preset tsan
  # libFuzzer on every decoder of network and file input, from the committed
  # seeds, RLX_FUZZ_SECONDS (default 20) per target.
  echo "=== rlx: fuzzing ==="
  cmake -S tests/fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  cmake --build build/fuzz -j "$jobs"
  ctest --test-dir build/fuzz --output-on-failure --no-tests=error -j "$jobs"
  phase_done "fuzzing"
fi
echo "=== rlx: all test runs passed ==="
