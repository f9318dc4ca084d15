# examples/ddp_train.py: data-parallel training with torch's DDP on rlx
# (rlxrun -n 4 python3 examples/ddp_train.py). The one change from gloo is
# the backend's name: "rlx" (after `import rlx_torch`, which registers it).
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import rlx_torch  # noqa: F401 (registers the "rlx" backend)

dist.init_process_group("rlx")  # rlxrun's (or torchrun's) RANK, WORLD_SIZE, MASTER_ADDR
rank, size = dist.get_rank(), dist.get_world_size()

# A regression every rank learns together: y = 3x - 1, each rank on its own samples.
torch.manual_seed(rank)
model = DistributedDataParallel(torch.nn.Linear(1, 1))  # rank 0's start, broadcast
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(200):
    x = torch.rand(32, 1) * 2 - 1
    loss = torch.nn.functional.mse_loss(model(x), 3 * x - 1)
    optimizer.zero_grad()
    loss.backward()  # gradients averaged across every rank, over rlx
    optimizer.step()

weight, bias = model.module.weight.item(), model.module.bias.item()
losses = torch.tensor([loss.item()])
dist.all_reduce(losses, op=dist.ReduceOp.MAX)
print(f"rank {rank} of {size}: y = {weight:.2f}x {bias:+.2f}, worst loss {losses.item():.1e}")
dist.destroy_process_group()
