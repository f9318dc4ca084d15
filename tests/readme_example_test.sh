#!/usr/bin/env bash
# Every C++ block of README.md is an example that is built and run: block 1 is
# examples/readme_example.cc and block 2 examples/lazy_arrays.cc, verbatim
# (after each file's first comment line).
set -euo pipefail
root=$1
files=(examples/readme_example.cc examples/lazy_arrays.cc)
for i in "${!files[@]}"; do
  diff <(awk -v want=$((i + 1)) '/^```cpp$/{n++; on=(n==want); next} /^```$/{on=0} on' "$root/README.md") \
       <(tail -n +2 "$root/${files[$i]}") || { echo "README block $((i + 1)) differs from ${files[$i]}"; exit 1; }
done
