"""What the fine-tuning losses share: the batch convention, input checks, cosine logits, soft cross-entropy.

Batch row ``i`` is a translation pair (src_i, tgt_i); "src" is the anchor language (English). Teacher embeddings are
computed by the caller and passed in.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def check_2d(name: str, x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} must be a [B, d] tensor, got shape {tuple(x.shape)}")


def check_pair(a: Tensor, b: Tensor, names: tuple[str, str] = ("student_src", "student_tgt")) -> None:
    """Two ``[B, d]`` tensors of the same shape, called ``names`` in the message."""
    check_2d(names[0], a)
    check_2d(names[1], b)
    if a.shape != b.shape:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same shape [B, d], got {tuple(a.shape)} and {tuple(b.shape)}"
        )


def check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def cos_logits(a: Tensor, b: Tensor, temperature: float) -> Tensor:
    """cos(a_i, b_j) / T: [B, B] from a [B, d], b [B, d]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature  # [B, B]


def soft_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean over rows of -sum_j targets_ij log softmax_j(logits_i): scalar."""
    return -(targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def embed(model: nn.Module, features: dict[str, Tensor]) -> Tensor:
    """The student's sentence embeddings of tokenised ``features``: [B, d]."""
    return model(features)["sentence_embedding"]  # [B, d]
