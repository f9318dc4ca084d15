#!/usr/bin/env bash
# Installs the build tree to a scratch prefix, then configures, builds and runs
# a small outside project that finds rlx with find_package(rlx), and builds
# its C program again with pkg-config alone. Then builds the project again on
# what a machine without the MPI, verbs and PMIx development files sees (a
# mount namespace hides them): rlx::rlx links their stubs, and requiring one
# of them fails.
# Usage: check_install.sh BUILD_DIR CONSUMER_SRC WORK "COMPONENTS BUILT"
set -euo pipefail
build_dir=$1 consumer_src=$2 work=$3 built=${4:-}
rm -rf "$work"
log=$work.log
# Quiet on success; the whole log on failure.
run() { "$@" >>"$log" 2>&1 || { cat "$log"; exit 1; }; }
: >"$log"
run cmake --install "$build_dir" --prefix "$work/prefix"
run cmake -S "$consumer_src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  "-DRLX_COMPONENTS=${built// /;}"
run cmake --build "$work/build"
test -x "$work/prefix/bin/rlxrun" || { echo "rlxrun was not installed"; exit 1; }
test_headers=$(find "$work/prefix/include" -name '*_test.h')
[[ -z $test_headers ]] || { echo "test headers were installed: $test_headers"; exit 1; }
include_root=$(ls "$work/prefix/include")
[[ $include_root == rlx ]] || { echo "the include root holds more than rlx/: $include_root"; exit 1; }
# Every optional part this rlx was built with is found here, so each links for real.
expected="consumer: linked"
for part in mpi verbs pmix; do
  if [[ " $built " == *" $part "* ]]; then expected+=" $part 1"; else expected+=" $part 0"; fi
done
output=$("$work/build/consumer")
echo "$output"
grep -qx "$expected" <<<"$output" || { echo "expected '$expected'"; exit 1; }
"$work/build/consumer_c"
# A C program built with pkg-config alone, on librlx_c.so.
PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name rlx.pc)")
export PKG_CONFIG_PATH
# shellcheck disable=SC2046  # the flags are words
run cc -std=c11 -Wall -Werror "$consumer_src/consumer_c.c" -o "$work/consumer_c_pkg" \
  $(pkg-config --cflags --libs rlx)
"$work/consumer_c_pkg"
# The Python module, where Debian's python3 finds it under the prefix.
module=$(find "$work/prefix" -name 'rlx.cpython-*.so')
if [[ -n $module ]]; then
  [[ $module == "$work/prefix/lib/python3."*"/dist-packages/"* ]] ||
    { echo "the Python module installed outside lib/python3.X/dist-packages: $module"; exit 1; }
  PYTHONPATH=$(dirname "$module") /usr/bin/python3 -c '
import numpy, rlx
g = rlx.init()
x = numpy.arange(4, dtype=numpy.float32)
g.all_sum(x)
assert g.size == 1 and list(x) == [0, 1, 2, 3], x
print("python consumer:", rlx.__version__, g)'
elif grep -q "^RLX_PYTHON_INSTALL_DIR" "$build_dir/CMakeCache.txt"; then
  echo "the Python module was built but not installed"
  exit 1
fi

# A machine without the optional parts' development files.
without_optional_dev_files() {
  local as_root=()
  ((EUID == 0)) || as_root=(--user --map-root-user)
  unshare "${as_root[@]}" --mount --propagation private bash -c '
    set -e
    empty=$(mktemp -d)
    for dir in /usr/lib/x86_64-linux-gnu/openmpi/include /usr/include/infiniband /usr/include/rdma \
               /usr/lib/x86_64-linux-gnu/pmix2/include; do
      [[ ! -d $dir ]] || mount --bind "$empty" "$dir"
    done
    for wrapper in mpicc mpicxx; do
      path=$(command -v "$wrapper") || continue
      mount --bind /dev/null "$(readlink -f "$path")"
    done
    for module in libibverbs librdmacm pmix mpi mpi-c mpi-cxx mpi-fort ompi ompi-c ompi-cxx ompi-fort orte; do
      dir=$(pkg-config --variable=pcfiledir "$module" 2>/dev/null) || continue
      mount --bind /dev/null "$dir/$module.pc"
    done
    exec "$@"' bash "$@"
}
run without_optional_dev_files cmake -S "$consumer_src" -B "$work/core-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix"
run without_optional_dev_files cmake --build "$work/core-build"
output=$("$work/core-build/consumer")
echo "$output"
grep -qx "consumer: linked mpi 0 verbs 0 pmix 0" <<<"$output" ||
  { echo "expected the stubs without the development files"; exit 1; }
for part in $built; do
  if without_optional_dev_files cmake -S "$consumer_src" -B "$work/required-$part" -G Ninja \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DRLX_COMPONENTS="$part" >"$work/required-$part.log" 2>&1; then
    echo "find_package(rlx COMPONENTS $part) succeeded without its development files"
    exit 1
  fi
  grep -q "rlx component $part: " "$work/required-$part.log" || { cat "$work/required-$part.log"; exit 1; }
done
echo "core install: builds without the MPI, verbs and PMIx development files"

# The Rust crate against the installed librlx_c.so, where cargo is.
cargo=$(command -v cargo || true)
[[ -z $cargo && -x $HOME/.cargo/bin/cargo ]] && cargo=$HOME/.cargo/bin/cargo
if [[ -n $cargo ]]; then
  crate=$(cd "$consumer_src/../../../bindings/rust" && pwd)
  (cd "$crate" && RLX_LIB_DIR=$work/prefix/lib CARGO_TARGET_DIR=$work/rust-target \
    run "$cargo" build --offline --quiet --examples)
  example=$work/rust-target/debug/examples/all_sum
  readelf -d "$example" | grep -q "RUNPATH.*$work/prefix/lib" ||
    { echo "the Rust example does not find librlx_c.so in the install"; exit 1; }
  output=$("$example")
  echo "rust consumer: $output"
  grep -q "^rank 0 of 1: grad = " <<<"$output" || { echo "the Rust example failed"; exit 1; }
else
  echo "rust consumer: skipped, cargo is not installed"
fi

# Naming some components links only those, even where the others' files are.
if [[ " $built " == *" pmix "* ]]; then
  run cmake -S "$consumer_src" -B "$work/pmix-only" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DRLX_COMPONENTS=pmix
  run cmake --build "$work/pmix-only"
  output=$("$work/pmix-only/consumer")
  grep -qx "consumer: linked mpi 0 verbs 0 pmix 1" <<<"$output" ||
    { echo "$output"; echo "expected only pmix linked"; exit 1; }
fi
