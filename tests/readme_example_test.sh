#!/usr/bin/env bash
# Every C++, C, Rust and Python block of README.md is an example that is built and
# run, verbatim (after each file's first comment line): C++ block 1 is
# examples/readme_example.cc and block 2 examples/lazy_arrays.cc; C block 1
# is examples/c_allreduce.c; Rust block 1 bindings/rust/examples/all_sum.rs;
# Python block 1 examples/all_sum.py.
set -euo pipefail
root=$1
check() {  # LANGUAGE BLOCK FILE
  diff <(awk -v lang="$1" -v want="$2" '$0 == "```" lang {n++; on=(n==want); next} /^```$/{on=0} on' \
           "$root/README.md") \
       <(tail -n +2 "$root/$3") || { echo "README $1 block $2 differs from $3"; exit 1; }
}
check cpp 1 examples/readme_example.cc
check cpp 2 examples/lazy_arrays.cc
check c 1 examples/c_allreduce.c
check rust 1 bindings/rust/examples/all_sum.rs
check python 1 examples/all_sum.py
