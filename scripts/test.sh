#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run the
# whole test suite through ctest: the release build (and a short run of
# bench/compare and bench/scaling), then the ASan+UBSan and TSan builds,
# then the fuzzers; all after the release build runs beside the tests.
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

# Everything after the release build runs in one background job, one step
# after another, beside the foreground's tests: the ASan and TSan builds,
# then the fuzzers' build and their run. The tests leave about half the CPU
# idle (waiting on deadlines, peers, the VM), and this job takes only that:
# a build beside CPU-bound tests otherwise slows them up to 2x, and the idle
# scheduling class alone does not stop it, because the kernel's autogroups
# give each session an equal share whatever its class. A cgroup marked
# cpu.idle does (busy loops beside a build in one ran at full speed), so the
# job runs in one when this user may make it (cgroup v1 or v2 with the cpu
# controller, as root); else in the idle class. Each step leaves a mark, and
# the foreground waits only for the step it needs next.
background_pid=
idle_cgroup=
marks=build/suite-marks
make_idle_cgroup() {
  local root group
  for root in /sys/fs/cgroup/cpu /sys/fs/cgroup; do
    group=$root/rlx-suite-build-$$
    mkdir "$group" 2>/dev/null || continue
    if echo 1 2>/dev/null >"$group/cpu.idle"; then
      idle_cgroup=$group
      return
    fi
    rmdir "$group"
  done
}
# After stop_background_job: its processes may take a moment to go.
remove_idle_cgroup() {
  [[ -n $idle_cgroup ]] || return 0
  for _ in {1..50}; do
    rmdir "$idle_cgroup" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "rlx: could not remove $idle_cgroup" >&2
}
preset_build() {
  echo "cmake --preset $1 >/dev/null && cmake --build --preset $1 -j $jobs"
}
# The job's steps: "name: command" lines, each logged to build/<name>.log.
start_background_job() {
  local script="cd '$PWD'" step name
  rm -rf "$marks"
  mkdir -p "$marks"
  for step in "$@"; do
    name=${step%%:*}
    script+="; { ${step#*:}; } >build/$name.log 2>&1 || exit 1; touch $marks/$name"
  done
  local enter=
  [[ -n $idle_cgroup ]] && enter="echo \$\$ >$idle_cgroup/cgroup.procs && "
  # Its own process group, so that a failed suite stops the whole job.
  chrt --idle 0 setsid bash -c "$enter$script" >/dev/null 2>&1 &
  background_pid=$!
}
# Waits until the background job has done step $1, or fails with its log.
wait_for_step() {
  echo "=== rlx: waiting for $1 ==="
  until [[ -e $marks/$1 ]]; do
    if ! kill -0 "$background_pid" 2>/dev/null; then
      [[ -e $marks/$1 ]] && break
      cat "build/$1.log" >&2
      echo "rlx: $1 failed (build/$1.log)" >&2
      exit 1
    fi
    sleep 1
  done
  phase_done "$1 (the part after the tests it overlapped)"
}
stop_background_job() {
  if [[ -n $background_pid ]]; then kill -- "-$background_pid" 2>/dev/null || true; fi
}

run_tests() {
  echo "=== rlx: $1 tests ==="
  ctest --preset "$1"
  check_dev_shm_is_clean
  phase_done "$1 tests"
}

suite_started=$(mktemp)
trap 'stop_background_job; remove_idle_cgroup; rm -f "$suite_started"' EXIT
make_idle_cgroup

# Formatting is part of the suite: every C++ file matches .clang-format.
git ls-files '*.h' '*.cc' | xargs -r clang-format --dry-run -Werror

echo "=== rlx: release build ==="
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
phase_done "release build"
# libFuzzer on every decoder of network and file input, from the committed
# seeds, RLX_FUZZ_SECONDS (default 20) per target, beside the TSan tests.
if [[ $quick -eq 0 ]]; then
  start_background_job "asan-build: $(preset_build asan)" "tsan-build: $(preset_build tsan)" \
    "fuzz-build: cmake -S tests/fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 \
      >/dev/null && cmake --build build/fuzz -j $jobs" \
    "fuzzing: ctest --test-dir build/fuzz \
      --output-on-failure --no-tests=error -j $jobs"
fi
run_tests release
# The side-by-side comparison in its short mode, so it cannot rot: it fails
# when any system (rlx or a peer) computes a wrong result. The same-host one
# gives every call new input and checks each result (--vary-data).
echo "=== rlx: bench/compare --short ==="
bench/compare --short --build build/release --out build/release/bench-short >/dev/null
echo "=== rlx: bench/compare --lineup same-host --short --vary-data ==="
bench/compare --lineup same-host --short --vary-data --build build/release \
  --out build/release/bench-short-same-host >/dev/null
echo "=== rlx: bench/scaling --short ==="
bench/scaling --short --build build/release --out build/release/scaling-short \
  --write-cost-model build/release/scaling-short/cost-model >/dev/null
# The fitted file round-trips: a job reads it (a malformed one fails the job).
RLX_COST_MODEL=build/release/scaling-short/cost-model build/release/bin/rlxrun -n 2 \
  build/release/examples/hello_allreduce >/dev/null
phase_done "benchmarks' short runs"
if [[ $quick -eq 0 ]]; then
  wait_for_step asan-build
  run_tests asan
  wait_for_step tsan-build
  run_tests tsan
  wait_for_step fuzzing
  grep -E "tests passed|Test +#" build/fuzzing.log
fi
echo "=== rlx: all test runs passed ==="
