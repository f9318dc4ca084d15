"""A Python program under rlxrun meets at MASTER_ADDR:MASTER_PORT as
torch.distributed's env:// store does: rank 0 listens there, every other
rank connects and says its RANK; rank 0 checks that all of WORLD_SIZE came.
Prints "rank R of N met at MASTER_ADDR:MASTER_PORT"."""
import os
import socket
import time

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
assert 0 <= int(os.environ["LOCAL_RANK"]) < int(os.environ["LOCAL_WORLD_SIZE"])
if rank == 0:
    server = socket.create_server((address, port))
    server.settimeout(30)
    seen = set()
    while len(seen) < size - 1:
        connection, _ = server.accept()
        with connection:
            seen.add(int(connection.recv(16).decode()))
    assert seen == set(range(1, size)), seen
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((address, port), timeout=5) as connection:
                connection.sendall(str(rank).encode())
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
print(f"rank {rank} of {size} met at {address}:{port}")
