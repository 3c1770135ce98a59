"""AnglE -- Li & Li 2023 (ACL 2024), "AnglE: Angle-optimized Text Embeddings": CoSENT's ranking
(:mod:`mlse.losses.cosent`) applied to an *angle* between two embeddings read as complex vectors, beside the
cosine ranking::

    z = a + i b,  w = c + i d          (each embedding split in halves: first half real, second imaginary)
    <z, w> = sum_k z_k conj(w_k)       (the complex inner product)
    dtheta(z, w) = | arg <z, w> |      (the phase: 0 when w is z scaled by a positive number)
    L = w_cos * ranking(cos) + w_angle * ranking(-dtheta / pi)                                      (angle_loss)

Why: the cosine's gradient vanishes near 1, where high STS gold scores sit; the phase keeps a gradient there. This is
*our reading* of the paper's angle difference (Eq. 5-7), not sentence-transformers' ``AnglELoss`` (which ranks
``|Re + Im|``). The paper's in-batch-negative term is left out: the translation pairs give the contrastive signal.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from mlse.losses.common import check_pair, embed
from mlse.losses.cosent import DEFAULT_SCALE, cosent_loss, ranking_loss

__all__ = ["AnglELoss", "angle_difference", "angle_loss"]


def angle_difference(emb1: Tensor, emb2: Tensor) -> Tensor:
    """``|arg <z, w>|`` in ``[0, pi]`` for the rows of ``emb1``, ``emb2`` ([B, d], ``d`` even) read as complex
    vectors (first half real, second half imaginary): [B]."""
    check_pair(emb1, emb2, ("emb1", "emb2"))
    if emb1.shape[1] % 2:
        raise ValueError(f"emb1 and emb2 must be [B, d] with d even, got {tuple(emb1.shape)}")
    a, b = emb1.chunk(2, dim=-1)  # z = a + ib
    c, d = emb2.chunk(2, dim=-1)  # w = c + id
    real = (a * c + b * d).sum(-1)  # Re sum z conj(w)
    imag = (b * c - a * d).sum(-1)  # Im sum z conj(w)
    return torch.atan2(imag, real).abs()


def angle_loss(
    emb1: Tensor,
    emb2: Tensor,
    scores: Tensor,
    *,
    scale: float = DEFAULT_SCALE,
    cos_weight: float = 1.0,
    angle_weight: float = 1.0,
) -> Tensor:
    """``cos_weight * CoSENT(cos) + angle_weight * ranking(-dtheta / pi)`` (module docstring) for pairs ``(emb1[i],
    emb2[i])`` with gold ``scores`` [B]."""
    loss = emb1.new_zeros(())
    if cos_weight:
        loss = loss + cos_weight * cosent_loss(emb1, emb2, scores, scale)
    if angle_weight:
        loss = loss + angle_weight * ranking_loss(-angle_difference(emb1, emb2) / math.pi, scores, scale)
    return loss


class AnglELoss(nn.Module):
    """:func:`angle_loss` for a sentence-transformers model: ``forward(features1, features2, scores)``."""

    def __init__(
        self, model: nn.Module, scale: float = DEFAULT_SCALE, cos_weight: float = 1.0, angle_weight: float = 1.0
    ):
        super().__init__()
        self.model, self.scale, self.cos_weight, self.angle_weight = model, scale, cos_weight, angle_weight

    def forward(self, features1: dict[str, Tensor], features2: dict[str, Tensor], scores: Tensor) -> Tensor:
        return angle_loss(
            embed(self.model, features1),
            embed(self.model, features2),
            scores,
            scale=self.scale,
            cos_weight=self.cos_weight,
            angle_weight=self.angle_weight,
        )
