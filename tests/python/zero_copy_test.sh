#!/usr/bin/env bash
# The Python module uses buffers in place: a 256 MiB all_sum from Python
# (zero_copy.py, which also checks that the array did not move) takes at
# most 1.5x the C++ call's time (rlx-bench), where one copy in and out
# would add about twice the call. Best of two interleaved rounds each.
# Usage: zero_copy_test.sh RLXRUN RLX_BENCH PYTHON_MODULE_DIR
set -euo pipefail
rlxrun=$1 bench=$2
export PYTHONPATH=$3${PYTHONPATH:+:$PYTHONPATH}
here=$(dirname "$(realpath "$0")")
best() { sort -n | head -1; }
cxx=() python=()
for round in 1 2; do
  out=$("$rlxrun" -n 2 --timeout 120 "$bench" --op all_sum -b 256M -e 256M)
  cxx+=("$(awk '$2 == 268435456 {print int($7)}' <<<"$out")")
  out=$("$rlxrun" -n 2 --timeout 120 /usr/bin/python3 "$here/zero_copy.py")
  python+=("$(sed -n 's/.*python all_sum 268435456 bytes: \([0-9]*\) us/\1/p' <<<"$out")")
done
c=$(printf '%s\n' "${cxx[@]}" | best) p=$(printf '%s\n' "${python[@]}" | best)
echo "256 MiB all_sum, 2 ranks: C++ ${c} us, Python ${p} us (rounds: C++ ${cxx[*]}, Python ${python[*]})"
[[ -n $c && -n $p && $c -gt 0 ]] || { echo "zero_copy: a run printed no time"; exit 1; }
if ((p * 2 > c * 3)); then
  echo "zero_copy: Python took more than 1.5x the C++ call: a copy on the way in or out?"
  exit 1
fi
