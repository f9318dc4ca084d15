#!/usr/bin/env bash
# Runs a command and passes only when it exits 0 and at least COUNT lines of
# its output (stdout and stderr) match REGEX (grep -E; matches are counted): every rank of a job
# reporting success, not just one of them.
# Usage: expect_lines.sh COUNT REGEX -- COMMAND [ARGS...]
set -uo pipefail
count=$1 regex=$2
shift 2
[[ ${1:-} == -- ]] && shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [[ $status -ne 0 ]]; then
  echo "expect_lines: the command exited $status" >&2
  exit 1
fi
# Matches, not lines: mpirun may print two ranks' lines as one.
matched=$( (grep -oE -- "$regex" <<<"$output" || true) | wc -l)
if [[ $matched -lt $count ]]; then
  echo "expect_lines: $matched lines match '$regex', expected $count" >&2
  exit 1
fi
