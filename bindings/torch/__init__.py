"""torch.distributed's "rlx" backend. Importing rlx_torch registers it:

    import torch.distributed as dist
    import rlx_torch

    dist.init_process_group("rlx")   # under rlxrun, torchrun, or any env://
    rlx_torch.init_process_group()   # the same, also under mpirun and srun

docs/TORCH.md has the calls, the launchers and the errors."""
import atexit
import os

import torch.distributed as dist

from rlx_torch._backend import (ProcessGroupRlx, create_process_group, torch_environment,
                                wait_for_every_group)

__all__ = ["ProcessGroupRlx", "create_process_group", "init_process_group", "torch_environment"]

_TORCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

# Before Python's exit takes the GIL away: calls still running, and their
# Futures' callbacks, finish first (their threads drop tensors Python owns).
atexit.register(wait_for_every_group)


def init_process_group(backend="rlx", **kwargs):
    """dist.init_process_group(backend, **kwargs) under any launcher rlx
    joins. rlxrun and torchrun set torch's RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT; when none is set and neither init_method nor store is given
    (mpirun, srun), rlx's own group of the job tells each rank its place and
    rank 0's address, and they are set here first, as
    deepspeed.init_distributed does with MPI. The world group of "rlx" is
    then that group."""
    given = kwargs.get("init_method") is not None or kwargs.get("store") is not None
    if not given and not any(name in os.environ for name in _TORCH_VARIABLES):
        os.environ.update(torch_environment())
    dist.init_process_group(backend, **kwargs)
