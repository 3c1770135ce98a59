"""Data-parallel fine-tuning over several processes (GPUs, or CPU processes for testing) with torch.distributed.

:func:`init_from_env` reads the group from the environment ``torchrun`` / ``accelerate launch`` set (``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ...), so the same command runs single-process or under either launcher.

Gradients are averaged explicitly after ``backward`` (:func:`average_gradients`), not through
``DistributedDataParallel``: the losses run the student twice per step, which DDP's once-per-backward bookkeeping does
not allow. Every rank draws its own batches (seeded by rank): the effective batch is ``world_size x batch_size``.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NoReturn

log = logging.getLogger(__name__)


def _dist():
    """``torch.distributed``, imported when first needed: torch costs seconds to import; only computing needs it."""
    import torch.distributed as dist

    return dist


@dataclass
class DistContext:
    """Where this process sits in the group (``world == 1``: no group, every helper is a no-op)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    owns_group: bool = False  # True when this module initialised the process group (and must destroy it)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1


def init_from_env(device: str) -> DistContext:
    """Join the process group described by the environment, if any (``nccl`` on CUDA, ``gloo`` otherwise)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext()
    dist = _dist()
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    log.info("distributed fine-tuning: rank %d of %d (local rank %d)", rank, world, local_rank)
    return DistContext(rank=rank, world=world, local_rank=local_rank, owns_group=owns)


def rank_device(ctx: DistContext, device: str) -> str:
    """One GPU per process: ``cuda`` -> ``cuda:<local rank>``; other devices unchanged."""
    return f"cuda:{ctx.local_rank}" if ctx.active and device == "cuda" else device


def barrier(ctx: DistContext) -> None:
    if ctx.active:
        _dist().barrier()


@contextmanager
def main_first(ctx: DistContext):
    """Run the block on rank 0 first and on the other ranks after it (e.g. rank 0 writes a cache or a folder that
    the others then read). One process: just the block."""
    if not ctx.is_main:
        barrier(ctx)
    yield
    if ctx.is_main:
        barrier(ctx)


def broadcast_parameters(module, ctx: DistContext) -> None:
    """Copy rank 0's parameters and buffers to every rank (start from identical weights)."""
    if not ctx.active:
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        _dist().broadcast(tensor.data, src=0)


def average_gradients(module, ctx: DistContext) -> None:
    """All-reduce and average every gradient, so that each rank takes the same optimiser step."""
    if not ctx.active:
        return
    dist = _dist()
    for param in module.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= ctx.world


def agree(ctx: DistContext, value: int, device: str) -> int:
    """Rank 0's ``value`` on every rank (e.g. whether to stop: only rank 0 owns the budget clock)."""
    if not ctx.active:
        return value
    import torch  # lazy: as in _dist

    tensor = torch.tensor([value], dtype=torch.int64, device=device)
    _dist().broadcast(tensor, src=0)
    return int(tensor.item())


def gather(ctx: DistContext, value) -> list:
    """Every rank's ``value`` (any picklable object), in rank order, on every rank; ``[value]`` in one process."""
    if not ctx.active:
        return [value]
    values: list = [None] * ctx.world
    _dist().all_gather_object(values, value)
    return values


def shutdown(ctx: DistContext) -> None:
    if ctx.owns_group:
        _dist().destroy_process_group()


def exit_worker(code: int = 0) -> NoReturn:
    """End a process of a finished group now, without the interpreter's teardown.

    Call it only once the run is written and every rank has left together (:func:`barrier`, :func:`shutdown`). Gloo's
    C++ threads can still hold work objects then, and freeing them at interpreter teardown sometimes aborts
    (pytorch/pytorch#179291). Logs, stdout and stderr are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
