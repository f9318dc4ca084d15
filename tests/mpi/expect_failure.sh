#!/bin/sh
# Runs a job that must fail: passes when the command exits non-zero and its
# output matches PATTERN (a grep -E regular expression) at least COUNT times.
# Usage: expect_failure.sh PATTERN COUNT COMMAND...
pattern=$1
count=$2
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_failure: the job exited 0, but it should have failed" >&2
  exit 1
fi
found=$(printf '%s\n' "$output" | grep -E -c -e "$pattern")
if [ "$found" -lt "$count" ]; then
  echo "expect_failure: '$pattern' appears $found times in the output, expected $count" >&2
  exit 1
fi
echo "expect_failure: failed with status $status as expected"
