"""Every call of torch.distributed's "rlx" backend on CPU tensors, checked
against values computed here from each rank's known inputs (rank r holds
r + 1, or r * 10 + i): all_reduce by every op over every dtype, coalesced,
non-contiguous, reduce, broadcast, all_gather (list and tensor),
reduce_scatter (list and tensor), gather, scatter, all_to_all (equal, split,
list), barrier, send/recv/isend/irecv with tags (a receive posted before a
collective holds nothing up; Works dropped before they completed; a
timed wait), a Future's callback waiting for a later call, async_op=True
with its Future, a new_group of
the even ranks, refusals with rlx's words, and the group destroyed with
calls still running. With --rlx-torch-init, the group starts through
rlx_torch.init_process_group() (under mpirun). Prints "rank R of N: torch
backend ok"."""
import datetime
import sys
import time

import torch
import torch.distributed as dist

import rlx_torch  # registers "rlx"

if "--rlx-torch-init" in sys.argv:  # mpirun, srun: rlx says who is who
    rlx_torch.init_process_group()
else:
    dist.init_process_group("rlx")
r, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "rlx", dist.get_backend()
ranks = range(n)


def equal(got, want, what):
    want = torch.as_tensor(want, dtype=got.dtype)
    assert torch.equal(got, want.reshape(got.shape)), f"{what}: {got.tolist()} != {want.tolist()}"


def close(got, want, what, tol):
    want = torch.as_tensor(want, dtype=torch.float64)
    assert torch.allclose(got.double(), want.reshape(got.shape), rtol=tol, atol=tol), \
        f"{what}: {got.tolist()} != {want.tolist()}"


# all_reduce: every op over every dtype; rank k contributes (k + 1) + i.
values = [[k + 1 + i for i in range(5)] for k in ranks]
expected = {
    dist.ReduceOp.SUM: [sum(v[i] for v in values) for i in range(5)],
    dist.ReduceOp.PRODUCT: [eval("*".join(str(v[i]) for v in values)) for i in range(5)],
    dist.ReduceOp.MIN: [min(v[i] for v in values) for i in range(5)],
    dist.ReduceOp.MAX: [max(v[i] for v in values) for i in range(5)],
}
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
              torch.int64, torch.uint8):
    for op, want in expected.items():
        t = torch.tensor(values[r], dtype=dtype)
        dist.all_reduce(t, op=op)
        if dtype in (torch.float16, torch.bfloat16):  # rounded at every step of a ring
            close(t, want, f"all_reduce {dtype} {op}", 2e-2)
        else:  # integers wrap as torch's own do
            equal(t, torch.tensor(want, dtype=torch.int64).to(dtype), f"all_reduce {dtype} {op}")
for dtype in (torch.float32, torch.float64, torch.bfloat16):
    t = torch.tensor(values[r], dtype=dtype)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    close(t, [s / n for s in expected[dist.ReduceOp.SUM]], f"all_reduce {dtype} AVG", 1e-2)
t = torch.tensor([-100 + r, 7], dtype=torch.int8)
dist.all_reduce(t)  # wraps in two's complement, as torch's own int8 sums
equal(t, torch.tensor([sum(-100 + k for k in ranks), 7 * n]).to(torch.int8), "all_reduce int8")
flags = torch.tensor([r == 0, True, False])
dist.all_reduce(flags, op=dist.ReduceOp.BOR)
equal(flags, [True, True, False], "all_reduce bool BOR")
flags = torch.tensor([r == 0, True, False])
dist.all_reduce(flags, op=dist.ReduceOp.BAND)
equal(flags, [n == 1, True, False], "all_reduce bool BAND")

# A non-contiguous tensor: the transposed view's elements, reduced in place.
base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (r + 1)
view = base.t()
assert not view.is_contiguous()
dist.all_reduce(view)
equal(base, torch.arange(12.0).reshape(3, 4) * sum(k + 1 for k in ranks), "non-contiguous")

# all_reduce_coalesced: tensors of several shapes, one reduction.
a, b = torch.full((3,), float(r)), torch.full((2, 2), float(2 * r))
dist.all_reduce_coalesced([a, b])
equal(a, [sum(ranks)] * 3, "coalesced a")
equal(b, [2 * sum(ranks)] * 4, "coalesced b")

# reduce to the last rank; the others keep theirs.
root = n - 1
t = torch.tensor([float(r + 1)] * 3)
dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
equal(t, [float(n if r == root else r + 1)] * 3, "reduce")

# broadcast of any dtype (moved as bytes): int16 and complex too.
for dtype in (torch.float32, torch.int16, torch.complex64, torch.bool):
    t = (torch.arange(6) * (root + 1)).to(dtype) if r == root else torch.zeros(6, dtype=dtype)
    dist.broadcast(t, src=root)
    equal(t, (torch.arange(6) * (root + 1)).to(dtype), f"broadcast {dtype}")

# all_gather into a list and into one tensor.
mine = torch.tensor([r * 10 + i for i in range(3)], dtype=torch.int64)
out = [torch.zeros(3, dtype=torch.int64) for _ in ranks]
dist.all_gather(out, mine)
for k in ranks:
    equal(out[k], [k * 10 + i for i in range(3)], f"all_gather block {k}")
flat = torch.zeros(3 * n, dtype=torch.int64)
dist.all_gather_into_tensor(flat, mine)
equal(flat, [k * 10 + i for k in ranks for i in range(3)], "all_gather_into_tensor")

# reduce_scatter: block j of every rank's input, summed, lands on rank j.
blocks = [torch.full((2,), float(r * 100 + j)) for j in ranks]
got = torch.zeros(2)
dist.reduce_scatter(got, blocks)
equal(got, [float(sum(k * 100 + r for k in ranks))] * 2, "reduce_scatter")
got = torch.zeros(2)
dist.reduce_scatter_tensor(got, torch.cat(blocks))
equal(got, [float(sum(k * 100 + r for k in ranks))] * 2, "reduce_scatter_tensor")

# gather to rank 0, scatter from the last rank.
gathered = [torch.zeros(2) for _ in ranks] if r == 0 else None
dist.gather(torch.full((2,), float(r)), gathered, dst=0)
if r == 0:
    for k in ranks:
        equal(gathered[k], [float(k)] * 2, f"gather block {k}")
piece = torch.zeros(3, dtype=torch.int32)
pieces = [torch.full((3,), k * 7, dtype=torch.int32) for k in ranks] if r == root else None
dist.scatter(piece, pieces, src=root)
equal(piece, [r * 7] * 3, "scatter")

# all_to_all: equal blocks, uneven split sizes (rank j sends j + 1 rows to
# rank k), and lists.
send = torch.tensor([r * 100 + k for k in ranks], dtype=torch.float32)
recv = torch.zeros(n)
dist.all_to_all_single(recv, send)
equal(recv, [k * 100 + r for k in ranks], "all_to_all_single")
send = torch.cat([torch.full((r + 1, 2), float(r * 10 + k)) for k in ranks])
recv = torch.zeros(sum(k + 1 for k in ranks), 2)
dist.all_to_all_single(recv, send, output_split_sizes=[k + 1 for k in ranks],
                       input_split_sizes=[r + 1] * n)
equal(recv, torch.cat([torch.full((k + 1, 2), float(k * 10 + r)) for k in ranks]),
      "all_to_all_single with splits")
outs = [torch.zeros(k + 1, dtype=torch.int64) for k in ranks]
dist.all_to_all(outs, [torch.full((r + 1,), r * 10 + k, dtype=torch.int64) for k in ranks])
for k in ranks:
    equal(outs[k], [k * 10 + r] * (k + 1), f"all_to_all list block {k}")

dist.barrier()

# Point-to-point around the ring, with tags; a receive posted before a
# collective that its sender makes first (one queue for both would wait).
right, left = (r + 1) % n, (r - 1) % n
if n > 1:
    early = torch.zeros(4)
    pending = dist.irecv(early, src=left, tag=9)
    t = torch.ones(1)
    dist.all_reduce(t)
    sent = dist.isend(torch.arange(4.0) + r, dst=right, tag=9)
    other = torch.zeros(2, dtype=torch.int64)
    dist.send(torch.tensor([r, 3], dtype=torch.int64), dst=right, tag=3)
    dist.recv(other, src=left, tag=3)
    equal(other, [left, 3], "recv tag 3")
    pending.wait()
    sent.wait()
    equal(early, torch.arange(4.0) + left, "irecv tag 9")

# A send's and a receive's Work dropped at once: rlx keeps their buffers (a
# non-contiguous tensor's contiguous copy) until they complete.
if n > 1:
    square = torch.arange(256 * 256, dtype=torch.float32).reshape(256, 256) + r
    dist.isend(square.t(), dst=right, tag=11)  # 256 KiB: sent in the background
    dropped = torch.zeros(256, 256)
    dist.irecv(dropped.t(), src=left, tag=12)  # never waited for; the message below lands in it
    dist.isend(torch.full((256, 256), float(r)), dst=right, tag=12).wait()
    churn = [torch.full((256, 256), -1.0) for _ in range(8)]  # reuses freed memory, if any
    got = torch.zeros(256, 256)
    dist.recv(got, src=left, tag=11)
    equal(got, (torch.arange(256 * 256.0).reshape(256, 256) + left).t(), "dropped isend")
    # wait(timeout) gives up on time; the receive stays posted and completes later.
    late = torch.zeros(1)
    pending = dist.irecv(late, src=left, tag=13)
    started = time.monotonic()
    try:
        pending.wait(datetime.timedelta(seconds=0.3))
        raise AssertionError("a receive nobody sent to completed")
    except RuntimeError as error:
        assert "timeout" in str(error) and time.monotonic() - started < 2, error
    dist.barrier()
    dist.send(torch.tensor([float(r)]), dst=right, tag=13)
    pending.wait()
    equal(late, [float(left)], "irecv after a timed-out wait")

# A callback chained on a Future starts another call of the group and waits
# for it (PowerSGD's DDP hook does), while a long call is still queued.
big = torch.ones(1 << 22)
dist.all_reduce(big, async_op=True)
first = dist.all_reduce(torch.ones(4), async_op=True).get_future()
chained = first.then(lambda f: dist.all_reduce(torch.ones(2), async_op=True).get_future().wait()[0])
equal(chained.wait(), [float(n)] * 2, "a callback waiting for a later call")

# async_op=True: the Work completes by itself, and its Future gives the tensor.
t = torch.full((1000,), 1.0)
work = dist.all_reduce(t, async_op=True)
result = work.get_future().wait()
equal(result[0], [float(n)] * 1000, "the Future's tensor")
work.wait()
assert work.is_completed()

# A group of the even ranks, through the same store, on its own.
evens = list(range(0, n, 2))
group = dist.new_group(evens, backend="rlx")
if r in evens:
    t = torch.tensor([float(r)])
    dist.all_reduce(t, group=group)
    equal(t, [float(sum(evens))], "new_group all_reduce")
    dist.broadcast(t, src=evens[-1], group=group)

# Refusals, raised on the calling rank before anything moves.
for bad, words in (
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BXOR), "BXOR"),
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int8), op=dist.ReduceOp.MIN), "int8"),
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.AVG), "AVG"),
    (lambda: dist.all_reduce(torch.ones(2).to_sparse()), "sparse"),
    (lambda: dist.broadcast(torch.ones(2), src=n), "src"),
    (lambda: dist.all_to_all_single(torch.zeros(n, 2), torch.zeros(n, 2),
                                    input_split_sizes=[3 << 61] + [0] * (n - 1)),
     "split size"),
):
    try:
        bad()
        raise AssertionError(f"no error for {words}")
    except (RuntimeError, ValueError) as error:
        assert words in str(error) or "rank" in str(error), f"{words}: {error}"

dist.barrier()
print(f"rank {r} of {n}: torch backend ok", flush=True)
# Calls whose Work and tensor Python drops at once, still running when the
# group goes: the group's thread drops the tensors' last references, which
# takes the GIL (it waited forever for the thread destroying the group).
for _ in range(20):
    dist.all_reduce(torch.ones(1 << 14), async_op=True)
# A group whose last reference a callback holds: it goes on a completion
# thread, after its calls ran (it joined its own thread, and aborted, once).
doomed = dist.new_group(backend="rlx")
for _ in range(3):
    dist.all_reduce(torch.ones(1 << 16), group=doomed, async_op=True)
last = dist.all_reduce(torch.ones(4), group=doomed, async_op=True).get_future()
last = last.then(lambda f, keep=doomed: f.value()[0].sum().item())
dist.destroy_process_group(doomed)
del doomed
assert last.wait() == 4 * n, last.wait()
dist.destroy_process_group()
