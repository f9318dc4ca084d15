"""DistributedDataParallel on the "rlx" backend: a few SGD steps of a small
model, each rank on its slice of the batch, give the parameters that the
same steps give on gloo (a gloo group of the same ranks, in this run) and
in one process on the whole batch; and with PowerSGD's communication hook
(whose callbacks start and wait for further calls), what it gives on gloo.
Prints "rank R of N: ddp on rlx matches
gloo and one process"."""
import copy

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as power_sgd
from torch.nn.parallel import DistributedDataParallel

import rlx_torch  # noqa: F401 (registers "rlx")

STEPS, PER_RANK = 5, 8

dist.init_process_group("rlx")
r, n = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)  # the same model and batches on every rank
model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
batches = [(torch.randn(PER_RANK * n, 20), torch.randn(PER_RANK * n, 4)) for _ in range(STEPS)]
mine = slice(r * PER_RANK, (r + 1) * PER_RANK)


def train(net, slice_of_batch):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in batches:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x[slice_of_batch]), y[slice_of_batch]).backward()
        optimizer.step()
    return [p.detach().clone() for p in net.parameters()]


# PowerSGD's hook: its callbacks start further all_reduces and wait for them.
def with_power_sgd(group):
    net = DistributedDataParallel(copy.deepcopy(model), process_group=group)
    state = power_sgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                    start_powerSGD_iter=2, min_compression_rate=0.5)
    net.register_comm_hook(state, power_sgd.powerSGD_hook)
    return net


# Rank 0's start is every rank's after DDP's broadcast: shift the others'.
start = copy.deepcopy(model)
if r != 0:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
# Gloo's runs come first. Torch 1.13's gloo runs a Future's Python callbacks
# (PowerSGD's) on its own threads and takes the GIL once more after the
# waiter has woken; if the interpreter is exiting by then, that thread
# aborts the process ("terminate called without an active exception"). The
# rlx runs after them wait with the GIL released, so those tails end first.
gloo = dist.new_group(backend="gloo")
on_gloo = train(DistributedDataParallel(copy.deepcopy(model), process_group=gloo), mine)
power_sgd_on_gloo = train(with_power_sgd(gloo), mine)
on_rlx = train(DistributedDataParallel(copy.deepcopy(model)), mine)
power_sgd_on_rlx = train(with_power_sgd(None), mine)
alone = train(copy.deepcopy(start), slice(None))

for a, b, c in zip(on_rlx, on_gloo, alone):
    assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
    assert torch.allclose(a, c, atol=1e-5), (a - c).abs().max()
for a, b in zip(power_sgd_on_rlx, power_sgd_on_gloo):
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
assert not torch.allclose(on_rlx[0], list(start.parameters())[0]), "training changed nothing"
print(f"rank {r} of {n}: ddp on rlx matches gloo and one process", flush=True)
dist.destroy_process_group()
