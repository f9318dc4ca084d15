# examples/all_sum.py: the README's Python example (rlxrun -n 3 python3 examples/all_sum.py).
import numpy as np

import rlx

world = rlx.init()  # the launcher's group, or a group of one
grad = np.array([1, 2, 3, world.rank], dtype=np.float32)
pending = world.iall_sum(grad)  # in place, across every rank; the GIL is free meanwhile
pending.wait()

# Point-to-point around the ring; a failure raises its kind of rlx.Error.
right, left = (world.rank + 1) % world.size, (world.rank - 1) % world.size
try:
    world.send(b"hello", right, tag=7)
    greeting = world.recv_bytes(left, tag=7)
except rlx.PeerLostError as error:  # also TimeoutError, MismatchError, ...
    raise SystemExit(f"rank {error.peer} is gone: {error}")
print(f"rank {world.rank} of {world.size}: grad = {grad.tolist()}, {greeting.decode()} from rank {left}")
