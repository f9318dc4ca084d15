#!/usr/bin/env bash
# Installs the build tree to a scratch prefix, then configures, builds and runs
# a small outside project that finds rlx with find_package(rlx), and builds
# its C program again with pkg-config alone.
set -euo pipefail
build_dir=$1 consumer_src=$2 work=$3
rm -rf "$work"
log=$work.log
# Quiet on success; the whole log on failure.
run() { "$@" >>"$log" 2>&1 || { cat "$log"; exit 1; }; }
: >"$log"
run cmake --install "$build_dir" --prefix "$work/prefix"
run cmake -S "$consumer_src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix"
run cmake --build "$work/build"
test -x "$work/prefix/bin/rlxrun" || { echo "rlxrun was not installed"; exit 1; }
test_headers=$(find "$work/prefix/include" -name '*_test.h')
[[ -z $test_headers ]] || { echo "test headers were installed: $test_headers"; exit 1; }
include_root=$(ls "$work/prefix/include")
[[ $include_root == rlx ]] || { echo "the include root holds more than rlx/: $include_root"; exit 1; }
"$work/build/consumer"
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
