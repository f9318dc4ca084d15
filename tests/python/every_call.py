"""Every call of the Python module on every rank of a job (1 to 4 ranks):
collectives on numpy arrays of several dtypes, in place, a split,
point-to-point, non-blocking calls, and errors caught as their kinds.
Prints "rank R of N (BACKEND) ok" once every check passed."""
import array
import os
import sys
import threading
import time

import numpy as np

import rlx


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_raises(kind, call, what):
    try:
        call()
    except kind as error:
        expect(isinstance(error, rlx.Error), f"{what}: {type(error)} is not an rlx.Error")
        return error
    raise AssertionError(f"{what}: no {kind.__name__} raised")


def collectives(g):
    r, n = g.rank, g.size
    for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8):
        data = np.full(5, r + 1, dtype=dtype)
        pointer = data.__array_interface__["data"][0]
        g.all_sum(data)
        expect(data.__array_interface__["data"][0] == pointer, "all_sum moved the array")
        expect((data == n * (n + 1) // 2).all(), f"all_sum {dtype}: {data}")
    data = np.array([r, -r, r * 2], dtype=np.int32)
    g.all_reduce(data, op="max")
    expect(list(data) == [n - 1, 0, 2 * (n - 1)], f"all_reduce max: {data}")
    data = np.array([r + 1.0], dtype=np.float64)
    g.all_reduce(data, op=rlx.ReduceOp.PROD)
    expect(data[0] == np.prod(np.arange(1, n + 1)), f"all_reduce prod: {data}")
    flags = np.array([r == 0, True])
    g.all_reduce(flags, op="min")
    expect(list(flags) == [n == 1, True], f"all_reduce min of bool: {flags}")

    # bfloat16 has no numpy type: its bits in a uint16 array, named by dtype=.
    one_bf16 = np.full(4, 0x3F80, dtype=np.uint16)  # 1.0
    g.all_sum(one_bf16, dtype="bf16")
    expect(np.frombuffer((one_bf16.astype(np.uint32) << 16).tobytes(), np.float32)[0] == n,
           f"bf16 all_sum: {one_bf16}")

    mine = np.arange(3, dtype=np.float32) + 10 * r
    everyone = np.zeros(3 * n, dtype=np.float32)
    g.all_gather(mine, everyone)
    expect((everyone == np.concatenate([np.arange(3) + 10 * i for i in range(n)])).all(),
           f"all_gather: {everyone}")

    blocks = np.ones(2 * n, dtype=np.int64) * (r + 1)
    out = np.zeros(2, dtype=np.int64)
    g.reduce_scatter(blocks, out)
    expect((out == n * (n + 1) // 2).all(), f"reduce_scatter: {out}")

    root = n - 1
    data = np.full(6, 7 if r == root else 0, dtype=np.uint8)
    g.broadcast(data, root)
    expect((data == 7).all(), f"broadcast: {data}")
    buffer = bytearray(b"x" * 4 if r == 0 else b"\0" * 4)
    g.broadcast(buffer, 0)
    expect(buffer == bytearray(b"xxxx"), f"broadcast of a bytearray: {buffer}")

    sends = np.array([100 * r + j for j in range(n)], dtype=np.int32)
    got = np.zeros(n, dtype=np.int32)
    g.all_to_all(sends, got)
    expect(list(got) == [100 * i + r for i in range(n)], f"all_to_all: {got}")

    data = np.full(3, r + 1, dtype=np.float32)
    g.reduce(data, 0)
    if r == 0:
        expect((data == n * (n + 1) / 2).all(), f"reduce: {data}")

    gathered = np.zeros(n, dtype=np.float64) if r == root else None
    g.gather(np.array([r * 1.5]), gathered, root)
    if r == root:
        expect(list(gathered) == [i * 1.5 for i in range(n)], f"gather: {gathered}")

    part = np.zeros(2, dtype=np.int64)
    g.scatter(np.arange(2 * n, dtype=np.int64) if r == 0 else None, part, 0)
    expect(list(part) == [2 * r, 2 * r + 1], f"scatter: {part}")

    counts = [i + 1 for i in range(n)]
    everyone = np.zeros(sum(counts), dtype=np.int32)
    g.all_gather_v(np.full(r + 1, r, dtype=np.int32), everyone, counts)
    expect(list(everyone) == [i for i in range(n) for _ in range(i + 1)],
           f"all_gather_v: {everyone}")

    # Rank i sends j+1 elements to rank j.
    send_counts = [j + 1 for j in range(n)]
    recv_counts = [r + 1] * n
    sends = np.concatenate([np.full(j + 1, 10 * r + j, dtype=np.float32) for j in range(n)])
    got = np.zeros(sum(recv_counts), dtype=np.float32)
    g.all_to_all_v(sends, send_counts, got, recv_counts)
    want = np.concatenate([np.full(r + 1, 10 * i + r, dtype=np.float32) for i in range(n)])
    expect((got == want).all(), f"all_to_all_v: {got}")
    g.barrier()


def split(g):
    r, n = g.rank, g.size
    half = g.split(r % 2, key=-r)
    expect(half.size == (n + 1 - r % 2) // 2, f"split size {half.size}")
    members = np.zeros(half.size, dtype=np.int32)
    half.all_gather(np.array([r], dtype=np.int32), members)
    expect(list(members) == sorted(range(r % 2, n, 2), reverse=True), f"split members {members}")
    expect(g.split(rlx.NO_COLOR if r == 0 else 1) is None or r != 0, "NO_COLOR gives None")


def point_to_point(g):
    r, n = g.rank, g.size
    to, source = (r + 1) % n, (r - 1) % n
    g.send(np.array([r, r], dtype=np.int64), to, tag=3)
    got = np.zeros(2, dtype=np.int64)
    expect(g.recv(got, source, tag=3) == 16, "recv's length")
    expect(list(got) == [source, source], f"recv: {got}")
    g.send(b"hello from %d" % r, to, tag=4)
    expect(g.recv_bytes(source, tag=4) == b"hello from %d" % source, "recv_bytes")
    g.send(array.array("d", [0.5] * 3), to, tag=5)
    expect(g.recv_bytes(source, tag=5) == array.array("d", [0.5] * 3).tobytes(), "array.array")


def nonblocking(g):
    r, n = g.rank, g.size
    to, source = (r + 1) % n, (r - 1) % n
    into = bytearray(8)
    receive = g.irecv(into, source, tag=9)
    send = g.isend(np.array([r], dtype=np.int64), to, tag=9)
    data = np.ones(1 << 16, dtype=np.float32)
    reduce = g.iall_sum(data)
    expect(receive.wait() == 8, "irecv's length")
    send.wait()
    reduce.wait()
    expect(np.frombuffer(into, np.int64)[0] == source, f"irecv: {bytes(into)}")
    expect((data == n).all(), "iall_sum")
    mine = np.full(2, r, dtype=np.int32)
    everyone = np.zeros(2 * n, dtype=np.int32)
    request = g.iall_gather(mine, everyone)
    while not request.test():
        pass
    expect(list(everyone) == [i for i in range(n) for _ in range(2)], f"iall_gather: {everyone}")
    requests = [g.ibarrier(), g.ibroadcast(np.zeros(3), 0),
                g.ireduce(np.ones(3, dtype=np.float32), 0, op="max"),
                g.iall_reduce(np.ones(2), op="min")]
    for request in requests:
        request.wait()
        expect(request.test(), "a completed request tests True")


def requests(g):
    """What a Request holds, and how it behaves when shared or dropped."""
    r, n = g.rank, g.size
    to, source = (r + 1) % n, (r - 1) % n
    # A failed wait raises every time it is asked, and crashes nothing (it
    # releases its buffers with the GIL held).
    g.send(b"twelve bytes", to, tag=20)
    short = g.irecv(bytearray(4), source, tag=20)
    for _ in range(2):
        expect_raises(rlx.InvalidArgumentError, short.wait, "an irecv into too small a buffer")
    expect(len(g.recv_bytes(source, tag=20)) == 12, "the message stays queued")

    # Two threads wait for one request: both see it complete.
    into = bytearray(8)
    shared = g.irecv(into, source, tag=21)
    lengths = []
    waiters = [threading.Thread(target=lambda: lengths.append(shared.wait())) for _ in range(2)]
    for t in waiters:
        t.start()
    g.send(b"8 bytes!", to, tag=21)
    for t in waiters:
        t.join()
    expect(lengths == [8, 8] and into == bytearray(b"8 bytes!"), f"two waiters: {lengths}")

    # A request keeps its group: a split used only for one call.
    data = np.ones(4, dtype=np.float32)
    g.split(0).iall_sum(data).wait()
    expect((data == n).all(), f"iall_sum on a dropped split: {data}")

    # A request dropped unfinished does not wait: its receive stays posted,
    # and its buffer alive, until the message comes.
    orphan_buffer = bytearray(3)
    start = time.monotonic()
    g.irecv(orphan_buffer, source, tag=22)  # dropped at once
    expect(time.monotonic() - start < 1, "dropping a pending request waited")
    g.send(b"abc", to, tag=22)
    g.barrier()
    g.all_sum(np.zeros(1))  # later calls take the orphan's message off its peer
    g.send(b"next", to, tag=22)
    expect(g.recv_bytes(source, tag=22) == b"next", "the dropped irecv took the first message")


def errors(g):
    r, n = g.rank, g.size
    error = expect_raises(rlx.InvalidArgumentError, lambda: g.broadcast(np.zeros(2), n + 5),
                          "a root outside the group")
    expect(isinstance(error, ValueError) and error.kind == "invalid_argument", repr(error))
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(np.zeros(4)[::2]),
                  "a strided array")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(b"read only"), "read-only bytes")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(np.zeros(2, dtype=np.int8)),
                  "int8, which rlx has no dtype for")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum([1.0, 2.0]), "a list")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_reduce(np.zeros(1), op="avg"),
                  "an unknown op")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_gather(np.zeros(2), np.zeros(2 * n + 1)),
                  "an output of the wrong size")
    expect_raises(rlx.InvalidArgumentError, lambda: g.send(b"x", n), "a rank outside the group")
    for tag in (-1, 2**32):
        expect_raises(rlx.InvalidArgumentError, lambda: g.send(b"x", 0, tag=tag), f"tag {tag}")
    expect_raises(rlx.InvalidArgumentError, lambda: g.broadcast(np.zeros(1), 2**40), "root 2**40")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(np.zeros(2), dtype=np.float32),
                  "dtype= that contradicts the array's own")
    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(np.zeros(2), dtype=5), "dtype=5")

    class Copying:  # .numpy() returns a copy: results would be lost
        def data_ptr(self):
            return 1

        def numpy(self):
            return np.zeros(2)

    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(Copying()), "a .numpy() copy")

    class DlpackOnly:  # numpy's view of it is read-only: an input only
        def __init__(self):
            self.array = np.arange(2.0)

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    expect_raises(rlx.InvalidArgumentError, lambda: g.all_sum(DlpackOnly()), "a DLPack output")
    g.send(DlpackOnly(), r, tag=23)
    expect(g.recv_bytes(r, tag=23) == np.arange(2.0).tobytes(), "a DLPack input")
    if n > 1:
        # A message longer than the buffer: rank 0 receives what rank 1 sent.
        if r == 1:
            g.send(b"twelve bytes", 0, tag=11)
        if r == 0:
            expect_raises(rlx.InvalidArgumentError, lambda: g.recv(bytearray(4), 1, tag=11),
                          "a message longer than the buffer")
        g.barrier()
        # Different sizes on different ranks: a mismatch on every rank.
        error = expect_raises(rlx.MismatchError, lambda: g.all_sum(np.zeros(4 + r)),
                              "all_sum of different sizes")
        expect(error.kind == "mismatch", repr(error))


def main():
    g = rlx.init(strict=len(sys.argv) > 1 and sys.argv[1] == "--strict")
    expect(g.rank in range(g.size), repr(g))
    collectives(g)
    split(g)
    point_to_point(g)
    nonblocking(g)
    requests(g)
    errors(g)  # last: a mismatch may leave the group unusable
    # One write: mpirun forwards what each write gives it, newline or not.
    os.write(1, f"rank {g.rank} of {g.size} ({g.backend}) ok\n".encode())


if __name__ == "__main__":
    main()
