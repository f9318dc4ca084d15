#!/usr/bin/env bash
# Runs one libFuzzer target: first every committed regression input once (a
# crash found earlier must stay fixed), then RLX_FUZZ_SECONDS (default 20) of
# fuzzing from the seed corpus. New inputs go to a work folder, never into the
# committed corpus; a crash leaves its input there and fails the test.
# Usage: run_fuzzer.sh FUZZER SEED_DIR REGRESSION_DIR WORK_DIR
set -euo pipefail
fuzzer=$1 seeds=$2 regressions=$3 work=$4
seconds=${RLX_FUZZ_SECONDS:-20}
mkdir -p "$work/corpus" "$work/artifacts"
common=(-max_len=8192 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/")
if compgen -G "$regressions/*" >/dev/null; then
  "$fuzzer" "${common[@]}" "$regressions"/*
fi
status=0
"$fuzzer" "${common[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work/corpus" "$seeds" \
  >"$work/log" 2>&1 || status=$?
grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' "$work/log" || true
if compgen -G "$work/artifacts/*" >/dev/null; then
  echo "run_fuzzer: $(basename "$fuzzer") found inputs that fail: $(ls "$work/artifacts")" >&2
  echo "fix the bug, then add the input to $regressions/" >&2
  exit 1
fi
exit "$status"
