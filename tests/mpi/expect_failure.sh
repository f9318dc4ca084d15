#!/bin/sh
# Runs a job that must fail: passes when the command exits non-zero and its
# output says the collective timed out.
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_failure: the job exited 0, but it should have been aborted" >&2
  exit 1
fi
if ! printf '%s\n' "$output" | grep -q 'all_reduce (1 x i32 (4 B), sum): timeout: MPI_Allreduce has not returned'; then
  echo "expect_failure: the output does not report the all_reduce timeout" >&2
  exit 1
fi
echo "expect_failure: aborted with status $status as expected"
