#!/usr/bin/env bash
# The README's example program is examples/readme_example.cc, verbatim.
set -euo pipefail
root=$1
diff <(awk '/^```cpp$/{on=1; next} /^```$/{on=0} on' "$root/README.md") \
     <(tail -n +2 "$root/examples/readme_example.cc")
