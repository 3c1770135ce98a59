"""What the fine-tuning losses share: the batch convention, input checks, cosine logits, soft cross-entropy.

Every loss here is a pure function on ``[B, d]`` embedding tensors plus a small :class:`torch.nn.Module` whose
``forward`` only embeds with the student (``student(features)["sentence_embedding"]``, the sentence-transformers call
convention) and hands the embeddings on. Batch row ``i`` is a translation pair (src_i, tgt_i); "src" is the pivot /
anchor language (English), "tgt" the other one. Teacher embeddings are computed by the caller (frozen teacher,
precomputed cache, or an EMA teacher under ``torch.no_grad()``) and passed in.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def check_2d(name: str, x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} must be a [B, d] tensor, got shape {tuple(x.shape)}")


def check_pair(student_src: Tensor, student_tgt: Tensor) -> None:
    check_2d("student_src", student_src)
    check_2d("student_tgt", student_tgt)
    if student_src.shape != student_tgt.shape:
        raise ValueError(
            f"student_src and student_tgt must have the same shape [B, d], got {tuple(student_src.shape)} "
            f"and {tuple(student_tgt.shape)}"
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
