"""Failures on the "rlx" backend as torch users get them: a RuntimeError
with rlx's words, on every rank, and no hang.
  faults_check.py mismatch: rank 0 all_reduces 4 elements, the others 5;
    every rank's all_reduce raises, naming the mismatch.
  faults_check.py killed: the last rank is SIGKILLed after a barrier; every
    other rank's all_reduce (async, through DDP's path: the Future) raises,
    naming that rank.
  faults_check.py frozen: init_process_group(timeout=3 s); the last rank
    stops calling (alive, asleep); every other rank's all_reduce raises
    within the 3 s, naming it, instead of waiting rlx's 5 minutes or
    torch's default 30.
  faults_check.py late: the last rank joins 4 s after the others, who wait
    for it in torch's store; with RLX_CONNECT_TIMEOUT_S=2 every rank still
    connects (the connections' deadline starts once the store has every
    rank's endpoint).
Prints "rank R: RuntimeError <what>" for each error caught as expected."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import rlx_torch  # noqa: F401 (registers "rlx")

FROZEN_TIMEOUT = datetime.timedelta(seconds=3)
if sys.argv[1] == "late" and int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
    time.sleep(4)
dist.init_process_group("rlx", **({"timeout": FROZEN_TIMEOUT} if sys.argv[1] == "frozen" else {}))
r, n = dist.get_rank(), dist.get_world_size()


def mismatch():
    try:
        dist.all_reduce(torch.ones(4 if r == 0 else 5))
    except RuntimeError as error:
        assert "mismatch" in str(error), error
        print(f"rank {r}: RuntimeError mismatch: {error}", flush=True)
        return
    raise AssertionError("all_reduce of 4 and 5 elements went through")


def killed():
    last = n - 1
    dist.barrier()
    if r == last:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(1000):
            dist.all_reduce(torch.ones(1 << 16), async_op=True).get_future().wait()
    except RuntimeError as error:
        assert f"rank {last}" in str(error) or f"peer {last}" in str(error), error
        seconds = time.monotonic() - start
        print(f"rank {r}: RuntimeError naming rank {last} after {seconds:.1f} s: {error}",
              flush=True)
        return
    raise AssertionError("all_reduce went on after a rank was killed")


def frozen():
    last = n - 1
    dist.barrier()
    if r == last:
        time.sleep(FROZEN_TIMEOUT.total_seconds() + 5)  # then leaves, never having called
        return
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError as error:
        seconds = time.monotonic() - start
        assert "timeout" in str(error) and f"rank {last}" in str(error), error
        assert seconds < FROZEN_TIMEOUT.total_seconds() + 2, seconds
        print(f"rank {r}: RuntimeError timeout naming rank {last} after {seconds:.1f} s: {error}",
              flush=True)
        return
    raise AssertionError("all_reduce returned without the last rank")


def late():
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == n, t
    print(f"rank {r}: connected although rank {n - 1} came 4 s late", flush=True)


{"mismatch": mismatch, "killed": killed, "frozen": frozen, "late": late}[sys.argv[1]]()
