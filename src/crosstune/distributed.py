"""Data-parallel training with PyTorch DistributedDataParallel, switched on by torchrun's environment.

The same command runs as one process (no ``WORLD_SIZE``), several processes on one machine or several
nodes (``torchrun --nproc-per-node N ...``): gloo on CPUs, NCCL on GPUs when every local rank has a GPU of
its own; more ranks than GPUs share them round-robin over gloo (NCCL refuses two ranks on one GPU; gloo
reduces CUDA tensors through the host). There is no second code path; the training loop asks
:func:`context` who it is.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Context:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def context(device: str = "cpu", timeout_s: float = 120.0) -> Context:
    """Join the process group torchrun describes (once); a plain run is a group of one."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Context()
    if not dist.is_initialized():
        backend = backend_for(device, int(os.environ.get("LOCAL_WORLD_SIZE", "1")), _gpus(device))
        # A rank that dies makes the others fail at their next collective within the timeout
        # instead of hanging for the default 30 minutes.
        dist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=timeout_s))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local % _gpus(device))
    return Context(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local)


def backend_for(device: str, local_world_size: int, gpus: int) -> str:
    if device.startswith("cuda") and local_world_size <= gpus:
        return "nccl"
    return "gloo"


def _gpus(device: str) -> int:
    return max(1, torch.cuda.device_count()) if device.startswith("cuda") else 1


def device_for(ctx: Context, device: str) -> torch.device:
    if device.startswith("cuda") and ctx.distributed:
        return torch.device("cuda", ctx.local_rank % _gpus(device))
    return torch.device(device)


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()


def all_reduce_mean(ctx: Context, value: float, device: torch.device | str = "cpu") -> float:
    """The mean of ``value`` over ranks. The tensor lives on the training ``device``: NCCL reduces CUDA
    tensors only; gloo takes either."""
    if not ctx.distributed:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return float(tensor.item()) / ctx.world_size


def shutdown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()
