#!/usr/bin/env bash
# The Rust crate's tests against a build's librlx_c.so: `cargo test` (a group
# of one), then the same test binary, and the README's example, on every rank
# of `rlxrun -n 3`.
# Exits 77 (ctest: skipped) when cargo is not installed.
# Usage: bindings/rust/run_tests.sh BUILD_DIR RLXRUN
set -euo pipefail
build=$(realpath "$1") rlxrun=$2
crate=$(dirname "$(realpath "$0")")
cargo=$(command -v cargo || true)
[[ -z $cargo && -x $HOME/.cargo/bin/cargo ]] && cargo=$HOME/.cargo/bin/cargo
if [[ -z $cargo ]]; then
  echo "rust: skipped, cargo is not installed (rustup.rs, or Debian's cargo)"
  exit 77
fi
export RLX_LIB_DIR=$build/lib CARGO_TARGET_DIR=$build/rust-target
cd "$crate"
"$cargo" test --offline --quiet 2>&1
test_binary=$("$cargo" test --offline --quiet --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*every_call[^"]*"' | cut -d'"' -f4)
[[ -x $test_binary ]] || { echo "rust: no every_call test binary found"; exit 1; }
status=0
output=$("$rlxrun" -n 3 --timeout 60 "$test_binary" --test-threads=1 --nocapture 2>&1) || status=$?
printf '%s\n' "$output"
ok=$(grep -cE '^\[[0-2]\] (test every_call_on_every_rank \.\.\. )?rank [0-2] of 3 \(tcp\) ok$' <<<"$output" || true)
passed=$(grep -cE '^\[[0-2]\] test result: ok\. 1 passed; 0 failed' <<<"$output" || true)
[[ $status -eq 0 && $ok -eq 3 && $passed -eq 3 ]] ||
  { echo "rust: $passed of 3 ranks passed under rlxrun (status $status)"; exit 1; }
"$cargo" build --offline --quiet --examples
status=0
output=$("$rlxrun" -n 3 --timeout 60 "$CARGO_TARGET_DIR/debug/examples/all_sum" 2>&1) || status=$?
printf '%s\n' "$output"
ok=$(grep -cE '^\[[0-2]\] rank [0-2] of 3: grad = \[3\.0, 6\.0, 9\.0, 3\.0\], hello from rank [0-2]$' <<<"$output" || true)
[[ $status -eq 0 && $ok -eq 3 ]] ||
  { echo "rust: the example printed the sum on $ok of 3 ranks (status $status)"; exit 1; }
