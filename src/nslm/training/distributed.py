"""DistributedDataParallel helpers for ``torchrun --nproc_per_node=N -m nslm train …``.

torchrun sets RANK, WORLD_SIZE and MASTER_ADDR/PORT; without them training runs in one
process and every helper here is a no-op. CPU training uses the gloo backend.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn


def init_distributed() -> tuple[int, int]:
    """(rank, world size); joins the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    return dist.get_rank(), dist.get_world_size()


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def wrap_model(model: nn.Module) -> nn.Module:
    if not is_distributed():
        return model
    # Adaptive-softmax tail clusters and some within-class rows see no target in a batch;
    # DDP must be told that some parameters may get no gradient in a step.
    return nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)


def broadcast_floats(values: list[float], src: int = 0) -> list[float]:
    """Rank ``src``'s values on every rank (validation scores drive everyone's schedule)."""
    if not is_distributed():
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.broadcast(t, src=src)
    return t.tolist()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    if is_distributed():
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def shutdown() -> None:
    if is_distributed():
        dist.destroy_process_group()
