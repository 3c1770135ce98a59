"""Small torch helpers shared by the heads."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def as_tensor(x: np.ndarray) -> torch.Tensor:
    """float32, contiguous, sharing memory with ``x`` where possible."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the weights: the best epoch's state for early stopping."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}
