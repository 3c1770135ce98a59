"""Stage 1 loss of Tiyajamorn et al. (EMNLP 2021), as their public code computes it.

All terms are functions of already computed tensors; :class:`mlse.heads.stage1.Stage1Net` produces them. With x, y a
translation pair in languages a, b and x', y' random sentences of languages a, b (same batch positions):

* meaning:        1 - cos(m(x), m(y))                                   (translations mean the same)
* negative:       max(0, cos(m(x), m(x')) - margin), likewise for y      (same language, other meaning)
* reconstruction: MSE(l(x) + m(x), e(x)), likewise for y                 (nothing is lost in the split)
* language ID:    CE(W l(x), a), likewise for y                          (l carries the language)
* language:       1 - cos(l(x), l(x')), likewise for y                   (same language, same l)

These are torch's CosineEmbeddingLoss (targets +1 / -1, margin 0), MSELoss and CrossEntropyLoss, averaged over the
batch and summed with weight 1 each (the paper sums them unweighted; weights are exposed for ablations).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Stage1Weights:
    meaning: float = 1.0
    negative: float = 1.0
    reconstruction: float = 1.0
    language_id: float = 1.0
    language: float = 1.0
    margin: float = 0.0  # CosineEmbeddingLoss margin for the negative term


def _pull(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (1.0 - F.cosine_similarity(a, b, dim=-1)).mean()


def _push(a: torch.Tensor, b: torch.Tensor, margin: float) -> torch.Tensor:
    return (F.cosine_similarity(a, b, dim=-1) - margin).clamp(min=0).mean()


def stage1_loss_terms(
    e: tuple[torch.Tensor, torch.Tensor],  # inputs e(x), e(y): [B, d] each
    m: tuple[torch.Tensor, torch.Tensor],  # meaning m(x), m(y): [B, d]
    lang_emb: tuple[torch.Tensor, torch.Tensor],  # language l(x), l(y): [B, d]
    m_rand: tuple[torch.Tensor, torch.Tensor],  # meaning of random same-language sentences x', y': [B, d]
    l_rand: tuple[torch.Tensor, torch.Tensor],  # language of x', y': [B, d]
    logits: tuple[torch.Tensor, torch.Tensor],  # language-ID logits of l(x), l(y): [B, n_langs]
    langs: tuple[torch.Tensor, torch.Tensor],  # language ids of x, y: [B] int64
    weights: Stage1Weights = Stage1Weights(),
) -> dict[str, torch.Tensor]:
    """Each weighted term and their sum under ``"total"`` (scalars)."""
    terms = {
        "meaning": _pull(m[0], m[1]),
        "negative": _push(m[0], m_rand[0], weights.margin) + _push(m[1], m_rand[1], weights.margin),
        "reconstruction": F.mse_loss(lang_emb[0] + m[0], e[0]) + F.mse_loss(lang_emb[1] + m[1], e[1]),
        "language_id": F.cross_entropy(logits[0], langs[0]) + F.cross_entropy(logits[1], langs[1]),
        "language": _pull(lang_emb[0], l_rand[0]) + _pull(lang_emb[1], l_rand[1]),
    }
    terms = {k: v * getattr(weights, k) for k, v in terms.items()}
    terms["total"] = sum(terms.values())
    return terms
