"""DistributedDataParallel helpers for ``torchrun --nproc_per_node=N -m nslm train …``.

torchrun sets RANK, WORLD_SIZE and MASTER_ADDR/PORT; without them training runs in one
process and every helper here is a no-op. CPU training uses the gloo backend.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import nn


def init_distributed() -> tuple[int, int]:
    """(rank, world size); joins the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    die_with_launcher()
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    return dist.get_rank(), dist.get_world_size()


def die_with_launcher() -> None:
    """Be killed when the torchrun that started this rank dies, however it dies.

    torchrun starts each rank in a session of its own, so a SIGKILL of ``nslm train`` (which
    *is* torchrun when it launched the ranks) would leave them training on, and a
    ``--resume`` would then race them in the same run directory. Linux's parent-death
    signal closes that gap; elsewhere, or outside torchrun, this does nothing.
    """
    if not sys.platform.startswith("linux") or "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, TypeError):
        return
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getppid()
    pr_set_pdeathsig = 1
    if prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
        return
    if os.getppid() != parent:  # the launcher died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def local_world_size() -> int:
    """Processes of this run on this machine (torchrun's LOCAL_WORLD_SIZE)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


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


@contextmanager
def borrowed_threads() -> Iterator[None]:
    """For rank 0 evaluating alone: the other ranks of this machine wait blocked in gloo,
    not spinning, so it may use their threads meanwhile."""
    threads = torch.get_num_threads()
    torch.set_num_threads(threads * local_world_size())
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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
