"""torch CPU tensors through the Python module, in place: float32 and int64
all_sum, a bfloat16 tensor as its int16 bits with dtype="bf16", all_gather
into a tensor, and a requires_grad tensor through .detach(). Prints
"rank R of N: torch ok"."""
import torch

import rlx

g = rlx.init(strict=True)
r, n = g.rank, g.size
t = torch.full((1000,), float(r + 1))
pointer = t.data_ptr()
g.all_sum(t)
assert t.data_ptr() == pointer and bool((t == n * (n + 1) / 2).all()), t[:4]

i = torch.arange(6, dtype=torch.int64) * (r + 1)
g.all_reduce(i, op="max")
assert i.tolist() == [k * n for k in range(6)], i

b = torch.ones(8, dtype=torch.bfloat16)
g.all_sum(b.view(torch.int16), dtype="bf16")
assert bool((b == n).all()), b

out = torch.zeros(2 * n, dtype=torch.float32)
g.all_gather(torch.tensor([r, r], dtype=torch.float32), out)
assert out.tolist() == [float(k) for k in range(n) for _ in range(2)], out

w = torch.ones(4, requires_grad=True)
g.all_sum(w.detach())
assert bool((w.detach() == n).all()), w
# A failed wait releases the tensor's view (a temporary numpy array) with
# the GIL held (it aborted the interpreter once).
g.send(b"too long for it", r, tag=5)
short = g.irecv(torch.zeros(2, dtype=torch.uint8), r, tag=5)
try:
    short.wait()
    raise AssertionError("a 15-byte message fit a 2-byte tensor")
except rlx.InvalidArgumentError:
    pass
assert g.recv_bytes(r, tag=5) == b"too long for it"
print(f"rank {r} of {n}: torch ok", flush=True)
