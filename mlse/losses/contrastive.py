"""Hard-label contrastive loss: in-batch-negatives InfoNCE, the contrastive baseline (no teacher).

Park et al. 2024 (paper 003, Eqs. 2-3; LaBSE / mE5 style, no margin) with hard labels ``y_ij = [i == j]``::

    p_ij = softmax_j cos(s(x_i), s(y_j)) / T                       src -> tgt (row softmax)
    q_ij = softmax_j cos(s(y_i), s(x_j)) / T                       tgt -> src (row softmax of the transpose)
    L    = -1/2 [ 1/B sum_i log p_ii + 1/B sum_i log q_ii ]        (directions averaged, CLIP style)

The other translations in the batch are the negatives. The temperature defaults to Park et al.'s released value,
:data:`~mlse.losses.defaults.DEFAULT_TEMPERATURE`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mlse.losses.common import check_pair, check_temperature, cos_logits, embed
from mlse.losses.defaults import DEFAULT_TEMPERATURE

__all__ = ["HardContrastiveLoss", "hard_contrastive_loss"]


def hard_contrastive_loss(
    student_src: Tensor, student_tgt: Tensor, *, temperature: float = DEFAULT_TEMPERATURE, bidirectional: bool = True
) -> Tensor:
    """In-batch-negatives InfoNCE over cosine similarities: the module docstring's ``L`` for ``student_src``,
    ``student_tgt`` (``[B, d]``); without ``bidirectional`` only the src -> tgt direction."""
    check_pair(student_src, student_tgt)
    check_temperature(temperature)
    logits = cos_logits(student_src, student_tgt, temperature)  # [B, B]
    labels = torch.arange(logits.shape[0], device=logits.device)  # [B]
    loss = F.cross_entropy(logits, labels)
    if bidirectional:
        loss = (loss + F.cross_entropy(logits.T, labels)) / 2
    return loss


class HardContrastiveLoss(nn.Module):
    """:func:`hard_contrastive_loss` for a sentence-transformers student; teacher arguments are accepted and ignored."""

    def __init__(self, student: nn.Module, temperature: float = DEFAULT_TEMPERATURE, bidirectional: bool = True):
        super().__init__()
        check_temperature(temperature)
        self.student, self.temperature, self.bidirectional = student, temperature, bidirectional

    def forward(
        self,
        src_features: dict[str, Tensor],
        tgt_features: dict[str, Tensor],
        teacher_src: Tensor | None = None,
        teacher_tgt: Tensor | None = None,
    ) -> Tensor:
        src = embed(self.student, src_features)  # [B, d]
        tgt = embed(self.student, tgt_features)  # [B, d]
        return hard_contrastive_loss(src, tgt, temperature=self.temperature, bidirectional=self.bidirectional)
