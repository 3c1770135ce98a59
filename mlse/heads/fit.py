"""The epoch loop both heads share: mini-batch steps, a dev score after each epoch, early stopping, the best epoch kept.

Stage 1 minimises its dev loss, Stage 2 maximises its dev Pearson; both stop on patience or the caller's ``stop``
(:class:`EarlyStopping`) and end on the best epoch's weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from mlse.stop_signal import StopSignal


def as_tensor(x: np.ndarray) -> torch.Tensor:
    """float32, contiguous, sharing memory with ``x`` where possible."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the weights: the best epoch's state for early stopping."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def check_fitted(head) -> None:
    """RuntimeError unless ``head`` has its network (``net_``), from ``fit`` or a load."""
    if not hasattr(head, "net_"):
        raise RuntimeError(f"{type(head).__name__} is not fitted: call fit() or load() first")


def train_epoch(
    optimiser: torch.optim.Optimizer,
    order: np.ndarray,
    batch_size: int,
    batch_loss: Callable[[np.ndarray], torch.Tensor],
) -> float:
    """One pass over ``order`` in slices of ``batch_size``: ``batch_loss(rows)``, backward, step. Returns the mean
    batch loss (0.0 when ``order`` is empty)."""
    losses = []
    for start in range(0, len(order), batch_size):
        loss = batch_loss(order[start : start + batch_size])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
    return sum(losses) / max(len(losses), 1)


class EarlyStopping:
    """Tracks the best dev score and its weights; says when to stop.

    ``mode``: ``"min"`` (a loss) or ``"max"`` (a correlation); an epoch improves only by more than ``min_delta``.
    ``best``: a score to beat before the first epoch (its weights are then the fallback), else nothing is kept until an
    epoch improves. A NaN never improves. ``stop`` is asked only once there are weights worth keeping.
    """

    def __init__(
        self,
        net: nn.Module,
        *,
        mode: str,
        min_delta: float,
        patience: int,
        stop: StopSignal | None = None,
        best: float | None = None,
    ):
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.net, self.mode, self.min_delta, self.patience = net, mode, min_delta, patience
        self.stop = stop
        self.best = best if best is not None else (math.inf if mode == "min" else -math.inf)
        self.best_state = snapshot(net) if best is not None else None
        self.best_epoch = 0 if best is not None else None
        self.bad_epochs = 0
        self.stopped = False  # ended by the stop signal (not by patience or the epoch limit)

    def improves(self, score: float) -> bool:
        if self.mode == "min":
            return score < self.best - self.min_delta
        return score > self.best + self.min_delta

    def update(self, epoch: int, score: float) -> bool:
        """Record ``epoch``'s dev score; True when training must end now."""
        if self.improves(score):
            self.best, self.bad_epochs, self.best_epoch = score, 0, epoch
            self.best_state = snapshot(self.net)
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                return True
        if self.stop is not None and self.best_state is not None and self.stop.should_stop():
            self.stopped = True
            return True
        return False

    def restore(self) -> None:
        """Put the best epoch's weights back (eval mode)."""
        self.net.load_state_dict(self.best_state)
        self.net.eval()


def fit_epochs(
    max_epochs: int,
    run_epoch: Callable[[int], dict],
    key: str,
    stopping: EarlyStopping,
    history: list[dict],
    progress: Callable[[dict], None] | None = None,
) -> None:
    """Epochs ``1 .. max_epochs``: ``run_epoch(epoch)`` trains one epoch and returns its record (with the dev score
    under ``key``), which joins ``history`` and goes to ``progress``; ``stopping`` decides when to end."""
    for epoch in range(1, max_epochs + 1):
        record = run_epoch(epoch)
        history.append(record)
        if progress:
            progress(record)
        if stopping.update(epoch, record[key]):
            break
