"""torch.distributed on rlx beside gloo, in one run and one process: the
world group is "rlx", a second group of the same ranks is gloo, and the two
are timed alternately (rlx, gloo, rlx, gloo, ...) so a slow moment of the
machine hits both. Prints a markdown table per operation: time per call
(median over repetitions of the slowest rank's mean), and gloo / rlx
(above 1: rlx faster); then a DDP training step of a ~10 M parameter model.
Run under rlxrun (bench/torch/compare.sh does):
  rlxrun -n 2 python3 bench/torch/torch_compare.py [--quick]"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import rlx_torch  # noqa: F401 (registers "rlx")

parser = argparse.ArgumentParser()
parser.add_argument("--reps", type=int, default=5)
parser.add_argument("--budget", type=float, default=0.15, help="seconds per timed loop")
parser.add_argument("--max-bytes", type=int, default=64 << 20)
parser.add_argument("--ops", default="all_reduce,all_gather,broadcast")
parser.add_argument("--ddp-steps", type=int, default=5, help="0: no DDP step")
args = parser.parse_args()

dist.init_process_group("rlx")
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
groups = {"rlx": None, "gloo": gloo}  # None: the world, on rlx


slowest_buffer = torch.zeros(1, dtype=torch.float64)


def slowest(seconds):
    """The slowest rank's figure (over gloo, outside any timed loop)."""
    slowest_buffer.fill_(seconds)
    dist.all_reduce(slowest_buffer, op=dist.ReduceOp.MAX, group=gloo)
    return slowest_buffer.item()


def call(op, group, buffers):
    if op == "all_reduce":
        dist.all_reduce(buffers[0], group=group)
    elif op == "all_gather":
        # gloo has no all_gather_into_tensor in torch 1.13: the list form for both.
        dist.all_gather(buffers[2], buffers[0], group=group)
    elif op == "broadcast":
        dist.broadcast(buffers[0], src=0, group=group)


def loop(op, group, buffers, iterations):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iterations):
        call(op, group, buffers)
    return slowest((time.perf_counter() - start) / iterations)


def iterations_for(op, group, buffers):
    """As many iterations as fit the budget, as every rank agrees."""
    probe = max(loop(op, group, buffers, 3), 1e-7)
    return max(3, min(100000, int(args.budget / probe)))


def sizes():
    b = 4
    while b <= args.max_bytes:
        yield b
        b *= 16 if b < 1 << 20 else 4


def measure(op):
    rows = []
    for nbytes in sizes():
        count = nbytes // 4
        out = torch.zeros(count * size)
        buffers = [torch.ones(count), out, list(out.chunk(size))]
        counts = {name: iterations_for(op, g, buffers) for name, g in groups.items()}
        times = {name: [] for name in groups}
        for _ in range(args.reps):
            for name, g in groups.items():
                times[name].append(loop(op, g, buffers, counts[name]))
        # Correct on both: a last check of the values each produced.
        for name, g in groups.items():
            buffers[0].fill_(rank + 1)
            call(op, g, buffers)
            got = (buffers[1][-1] if op == "all_gather" else buffers[0][0]).item()
            want = {"all_reduce": size * (size + 1) / 2, "broadcast": 1.0, "all_gather": size}[op]
            assert got == want, (name, op, got, want)
            buffers[0].fill_(1.0)
        rows.append((nbytes, statistics.median(times["rlx"]), statistics.median(times["gloo"])))
    return rows


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def ddp_step_times():
    torch.manual_seed(0)
    width = 2048  # 2048x2048 + 2048x2048 + 2048x256 weights: about 8.9 M parameters
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 256))
    params = sum(p.numel() for p in model.parameters())
    x, y = torch.randn(16, width), torch.randn(16, 256)
    models = {"rlx": DistributedDataParallel(model),
              "gloo": DistributedDataParallel(torch.nn.Sequential(*[
                  m for m in __import__("copy").deepcopy(model)]), process_group=gloo)}
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=1e-3) for name, m in models.items()}

    def steps(name, count):
        dist.barrier(group=gloo)
        start = time.perf_counter()
        for _ in range(count):
            optimizers[name].zero_grad()
            torch.nn.functional.mse_loss(models[name](x), y).backward()
            optimizers[name].step()
        return slowest((time.perf_counter() - start) / count)

    for name in models:
        steps(name, 2)  # warm up
    times = {name: [] for name in models}
    for _ in range(args.reps):
        for name in models:
            times[name].append(steps(name, args.ddp_steps))
    return params, statistics.median(times["rlx"]), statistics.median(times["gloo"])


tables = []
for op in args.ops.split(","):
    rows = measure(op)
    lines = [f"### {op}, {size} ranks (torch {torch.__version__})", "",
             "| size | rlx (us) | gloo (us) | gloo / rlx |", "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {human(b)} | {r * 1e6:.1f} | {g * 1e6:.1f} | {g / r:.2f} |" for b, r, g in rows]
    tables.append("\n".join(lines))
if args.ddp_steps > 0:
    params, r, g = ddp_step_times()
    tables.append(f"### DDP step, {size} ranks: {params / 1e6:.1f} M parameters, batch 16 per rank"
                  f"\n\n| rlx (ms) | gloo (ms) | gloo / rlx |\n| ---: | ---: | ---: |\n"
                  f"| {r * 1e3:.1f} | {g * 1e3:.1f} | {g / r:.2f} |")
if rank == 0:
    print("\n\n".join(tables), flush=True)
dist.barrier()
# Not through Python's exit: gloo's thread drops its last reference to a
# tensor after a call returns, and one dropped while Python exits aborts the
# process (torch 1.13's ProcessGroupGloo::runLoop: "terminate called without
# an active exception").
os._exit(0)
