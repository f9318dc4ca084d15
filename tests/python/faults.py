"""Failures as Python exceptions of their kind, on a real job.
  faults.py peer_lost: the last rank exits at once (os._exit) after a
    barrier; every other rank's all_sum raises rlx.PeerLostError naming it.
  faults.py timeout: rank 0 waits for a message rank 1 never sends; with
    RLX_TIMEOUT_S=2 its recv raises rlx.TimeoutError (a builtin TimeoutError).
  faults.py exit_pending: rank 0 leaves (an uncaught exception) with an
    irecv pending: it exits at once, not after the deadline, and rank 1's
    recv raises rlx.PeerLostError.
Prints "rank R: <ErrorClass> ..." for each error caught as expected."""
import os
import sys
import time

import numpy as np

import rlx


def peer_lost(g):
    last = g.size - 1
    data = np.ones(1 << 18, dtype=np.float32)
    g.barrier()
    if g.rank == last:
        os._exit(0)
    try:
        for _ in range(1000):
            g.all_sum(data)
    except rlx.PeerLostError as error:
        assert isinstance(error, ConnectionError) and isinstance(error, rlx.Error), type(error)
        assert error.kind == "peer_lost", error.kind
        assert error.peer == last, f"the error blames rank {error.peer}: {error}"
        print(f"rank {g.rank}: PeerLostError from rank {error.peer}", flush=True)
        return
    raise AssertionError("all_sum went on after a rank exited")


def timeout(g):
    if g.rank == 1:
        time.sleep(4)
        return
    if g.rank != 0:
        return
    start = time.monotonic()
    try:
        g.recv_bytes(1, tag=77)
    except rlx.TimeoutError as error:
        assert isinstance(error, TimeoutError), type(error)
        assert error.kind == "timeout" and "recv" in str(error), str(error)
        print(f"rank 0: TimeoutError after {time.monotonic() - start:.1f} s", flush=True)
        return
    raise AssertionError("recv_bytes returned a message nobody sent")


def exit_pending(g):
    if g.rank == 0:
        g.irecv(bytearray(4), 1, tag=5)
        pending = g.irecv(bytearray(4), 1, tag=6)  # noqa: F841 (alive at exit)
        raise SystemExit(0)
    start = time.monotonic()
    try:
        g.recv_bytes(0, tag=7)
    except rlx.PeerLostError as error:
        assert error.peer == 0, error
        print(f"rank 1: PeerLostError after {time.monotonic() - start:.1f} s", flush=True)
        return
    raise AssertionError("recv_bytes returned a message nobody sent")


if __name__ == "__main__":
    {"peer_lost": peer_lost, "timeout": timeout, "exit_pending": exit_pending}[sys.argv[1]](rlx.init(strict=True))
