"""Shared by the loss tests (tests/losses/test_losses_*.py): seeded tensors, a row entropy, a fake student and a
tiny loop."""

from __future__ import annotations

import torch
from torch import nn


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def row_entropy(y: torch.Tensor) -> torch.Tensor:
    """Mean over rows of -sum_j y_ij log y_ij."""
    return -(y * y.clamp_min(1e-30).log()).sum(-1).mean()


class FakeStudent(nn.Module):
    """A sentence-transformers-like model: features {"x": [B, d_in]} -> {"sentence_embedding": [B, d]}."""

    def __init__(self, d_in: int = 6, d: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.linear = nn.Linear(d_in, d)

    def forward(self, features):
        return {"sentence_embedding": self.linear(features["x"])}


def batch(B: int = 8, d_in: int = 6):
    src = {"x": randn(B, d_in, seed=30)}
    tgt = {"x": src["x"] + 0.5 * randn(B, d_in, seed=31)}  # a noisy "translation"
    return src, tgt


def train(loss_fn: nn.Module, args: tuple, steps: int = 60, lr: float = 0.05) -> tuple[float, float]:
    opt = torch.optim.Adam(loss_fn.parameters(), lr=lr)
    first = loss_fn(*args).item()
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(*args)
        loss.backward()
        opt.step()
    return first, loss_fn(*args).item()
