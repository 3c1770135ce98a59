"""CoSENT -- Su Jianlin 2022, "CoSENT: a more efficient sentence vector scheme than Sentence-BERT" (the scored-pairs
loss sentence-transformers ships as ``CoSENTLoss``)::

    L = log(1 + sum_{(i, j): y_i > y_j} exp(lambda * (s_j - s_i)))                       (cosent_loss)

over every two pairs ``i, j`` of a batch, ``s`` the cosine of a pair, ``y`` its gold score, ``lambda`` a scale (20).
Only the *order* of the gold scores matters, so a model keeps its own cosine scale (what Spearman rewards). Computed
stably as ``logsumexp([0, lambda (s_j - s_i) for every ordered pair])``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mlse.losses.common import check_pair, embed

__all__ = ["CoSENTLoss", "cosent_loss", "ranking_loss"]

DEFAULT_SCALE = 20.0  # lambda: Su 2022, and sentence-transformers' CoSENTLoss default


def ranking_loss(similarity: Tensor, scores: Tensor, scale: float = DEFAULT_SCALE) -> Tensor:
    """``log(1 + sum_{y_i > y_j} exp(scale * (s_j - s_i)))`` for ``similarity`` ``s`` [B] and gold ``scores`` ``y`` [B].

    The ranking core of CoSENT, shared with AnglE (:mod:`mlse.losses.angle`), which ranks another similarity. Pairs
    with equal gold scores are not compared. Raises ValueError on mismatched shapes or a scale that is not > 0.
    """
    if similarity.dim() != 1 or similarity.shape != scores.shape:
        raise ValueError(
            f"similarity and scores must be [B] tensors of one length, got {tuple(similarity.shape)} and "
            f"{tuple(scores.shape)}"
        )
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    scores = scores.to(similarity.dtype)
    diff = scale * (similarity[None, :] - similarity[:, None])  # [B, B]: entry (i, j) = scale * (s_j - s_i)
    ordered = scores[:, None] > scores[None, :]  # [B, B]: y_i > y_j
    terms = diff[ordered]  # [P] one per ordered pair
    return torch.logsumexp(F.pad(terms, (1, 0)), dim=0)  # a 0 first: log(1 + sum exp(terms))


def cosent_loss(emb1: Tensor, emb2: Tensor, scores: Tensor, scale: float = DEFAULT_SCALE) -> Tensor:
    """CoSENT on the cosines of the pairs ``(emb1[i], emb2[i])`` ([B, d] each) against gold ``scores`` [B]."""
    check_pair(emb1, emb2, ("emb1", "emb2"))
    return ranking_loss(F.cosine_similarity(emb1, emb2, dim=-1), scores, scale)


class CoSENTLoss(nn.Module):
    """:func:`cosent_loss` for a sentence-transformers model: ``forward(features1, features2, scores)``."""

    def __init__(self, model: nn.Module, scale: float = DEFAULT_SCALE):
        super().__init__()
        self.model, self.scale = model, scale

    def forward(self, features1: dict[str, Tensor], features2: dict[str, Tensor], scores: Tensor) -> Tensor:
        return cosent_loss(embed(self.model, features1), embed(self.model, features2), scores, self.scale)
