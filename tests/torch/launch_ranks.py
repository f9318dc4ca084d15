"""Starts N ranks of a program as torchrun does (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT on a free port) and
prints their output as "[R] line". Exits 0 when every rank exited 0, except
rank --killed, which must have died by SIGKILL. (Debian's torchrun itself
fails on Python 3.11 before starting anything.)
Usage: launch_ranks.py N [--killed R] [--timeout S] -- PROGRAM [ARGS...]"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading

parser = argparse.ArgumentParser()
parser.add_argument("ranks", type=int)
parser.add_argument("--killed", type=int, default=-1)
parser.add_argument("--timeout", type=float, default=120)
split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
args = parser.parse_args(sys.argv[1:split])
program = sys.argv[split + 1:]
if not program:
    parser.error("give the program after --")

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]


def start(rank):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(args.ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return subprocess.Popen(program, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def relay(rank, stream):
    for line in stream:
        sys.stdout.write(f"[{rank}] {line}")
        sys.stdout.flush()


ranks = [start(r) for r in range(args.ranks)]
relays = [threading.Thread(target=relay, args=(r, p.stdout)) for r, p in enumerate(ranks)]
for thread in relays:
    thread.start()
failed = False
for r, process in enumerate(ranks):
    try:
        status = process.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        for p in ranks:
            p.kill()
        print(f"launch_ranks: rank {r} still running after {args.timeout} s; killed them all")
        sys.exit(1)
    expected = -signal.SIGKILL if r == args.killed else 0
    if status != expected:
        print(f"launch_ranks: rank {r} exited {status}, expected {expected}")
        failed = True
for thread in relays:
    thread.join()
sys.exit(1 if failed else 0)
