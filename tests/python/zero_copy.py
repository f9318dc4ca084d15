"""A 256 MiB all_sum from Python, in place: the result lands in the array's
own memory (its data pointer does not move) and the call takes about as long
as the C++ call (zero_copy_test.sh compares it with rlx-bench's). Prints
"python all_sum 268435456 bytes: T us" on rank 0, T the slowest rank's mean
of 5 calls after a warm-up (rlx-bench's time column)."""
import time

import numpy as np

import rlx

g = rlx.init()
data = np.ones(64 << 20, dtype=np.float32)
pointer = data.__array_interface__["data"][0]
g.all_sum(data)  # warm-up: connections, scratch
g.barrier()
calls = 5
start = time.perf_counter()
for _ in range(calls):
    g.all_sum(data)
mean_us = np.array([(time.perf_counter() - start) / calls * 1e6])
g.all_reduce(mean_us, op="max")
assert data.__array_interface__["data"][0] == pointer, "all_sum moved the array"
want = float(g.size ** (calls + 1))
assert data[0] == want and data[-1] == want and (data == want).all(), f"sum {data[:4]}"
if g.rank == 0:
    print(f"python all_sum {data.nbytes} bytes: {mean_us[0]:.0f} us", flush=True)
