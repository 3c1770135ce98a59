"""Soft-label contrastive distillation and TCM -- Park et al. 2024 (paper 003, Sec. 3 and 4.1; the formulas are garbled
in the text extraction, so they were checked against the authors' released code, IMASCL ``modules/AMETrainer.py``)::

    sim(u, v)   = cos(u, v) / T                                   one temperature T for teacher and student
    p_ij        = softmax_j sim(g(x_i), g(y_j))                   student src -> tgt   (row softmax)
    q_ij        = softmax_j sim(g(y_i), g(x_j))                   student tgt -> src   (row softmax of the transpose)
    L_cross     = -1/2 [ 1/B sum_ij y_ij log p_ij + 1/B sum_ij y_ij log q_ij ]          (Eq. 2, bidirectional)
    hard label  y_ij = [i == j]                                                         (Eq. 3 -> InfoNCE)
    priority    y_ij = softmax_j sim(f(x_i), f(x_j))              teacher, anchor language only      (Eq. 4)
    average     y_ij = softmax_j (sim(f(x_i), f(x_j)) + sim(f(y_i), f(y_j))) / 2                     (Eq. 5)
    L_mono      = -1/2 [ 1/B sum_ij y_ij log softmax_j sim(g(x_i), g(x_j))
                       + 1/B sum_ij y_ij log softmax_j sim(g(y_i), g(y_j)) ]          (TCM, Eq. 6)
    L           = L_cross + alpha * L_mono                                            (Eq. 7, see below)

``f`` is the frozen teacher, ``g`` the student; the hard-label case is :mod:`mlse.losses.contrastive`.

Choices where the paper text leaves something open (checked against the released code):
* *average* averages the two teacher similarity matrices **before** the softmax (needs a multilingual teacher).
* tgt -> src uses the **same** labels ``y``, not ``y.T``: the teacher similarity is symmetric, so the row softmax of
  its transpose is ``y``. For a non-symmetric teacher similarity pass ``targets_t``.
* Directions (and TCM's two languages) are **averaged**, CLIP style. The released code sums them, which equals
  ``alpha = 2`` here; the paper's ``lambda * L_cross + L_mono`` matches ``alpha = 1 / lambda`` under Adam(W).
* One temperature ``T`` for labels and student logits (:data:`~mlse.losses.defaults.DEFAULT_TEMPERATURE`).
* Loss is the cross-entropy ``-sum y log p``: its minimum is the entropy of ``y``; its gradient equals ``KL(y || p)``'s.
  The teacher's dimension need not equal the student's. Labels are detached.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mlse.losses.common import check_2d, check_pair, check_temperature, cos_logits, embed, soft_cross_entropy
from mlse.losses.defaults import DEFAULT_TEMPERATURE, LABEL_MODES

__all__ = ["LABEL_MODES", "SoftContrastiveLoss", "soft_contrastive_loss", "soft_labels", "tcm_loss"]


def _check_mode(mode: str) -> None:
    if mode not in LABEL_MODES:
        raise ValueError(f"unknown soft-label mode {mode!r}; expected one of {', '.join(LABEL_MODES)}")


def _check_targets(name: str, targets: Tensor, batch: int) -> None:
    if targets.shape != (batch, batch):
        raise ValueError(f"{name} must be [B, B] = [{batch}, {batch}], got {tuple(targets.shape)}")
    rows = targets.detach().float().sum(dim=-1)  # [B]
    if (targets.detach() < 0).any() or not torch.allclose(rows, torch.ones_like(rows), atol=1e-3):
        raise ValueError(f"{name} must be row-stochastic (non-negative rows summing to 1), e.g. from soft_labels()")


def soft_labels(
    teacher_src: Tensor,
    teacher_tgt: Tensor | None = None,
    *,
    mode: str = "priority",
    temperature: float = DEFAULT_TEMPERATURE,
) -> Tensor:
    """Park et al.'s soft labels ``y`` [B, B] (paper 003, Eqs. 4-5), row-stochastic and detached.

    * ``"priority"``: ``softmax_j cos(t(x_i), t(x_j)) / T``; ``teacher_src`` must be the anchor language (English).
    * ``"average"``: ``softmax_j (cos(t(x_i), t(x_j)) + cos(t(y_i), t(y_j))) / (2 T)``; needs ``teacher_tgt``.

    ``teacher_src`` / ``teacher_tgt``: ``[B, d_t]``; ``d_t`` need not equal the student's dimension.
    """
    _check_mode(mode)
    check_temperature(temperature)
    check_2d("teacher_src", teacher_src)
    teacher_src = teacher_src.detach()
    sim = cos_logits(teacher_src, teacher_src, temperature)  # [B, B], symmetric
    if mode == "average":
        if teacher_tgt is None:
            raise ValueError("the 'average' soft label needs teacher_tgt (teacher embeddings of the target side)")
        check_pair(teacher_src, teacher_tgt, ("teacher_src", "teacher_tgt"))
        teacher_tgt = teacher_tgt.detach().to(teacher_src.dtype)
        sim = (sim + cos_logits(teacher_tgt, teacher_tgt, temperature)) / 2  # [B, B], symmetric
    return F.softmax(sim, dim=-1)  # [B, B], rows sum to 1


def soft_contrastive_loss(
    student_src: Tensor,
    student_tgt: Tensor,
    targets: Tensor,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    bidirectional: bool = True,
    targets_t: Tensor | None = None,
) -> Tensor:
    """Contrastive loss with soft labels (paper 003, Eq. 2): ``-1/B sum_ij y_ij log softmax_j cos(s_i, t_j) / T``.

    With ``bidirectional`` the tgt -> src direction is averaged in, with labels ``targets_t`` (default ``targets``).
    With ``targets = eye(B)`` this is :func:`mlse.losses.contrastive.hard_contrastive_loss`. ``student_src``,
    ``student_tgt``: ``[B, d]``; ``targets``: ``[B, B]`` row-stochastic (:class:`ValueError` if not).
    """
    check_pair(student_src, student_tgt)
    check_temperature(temperature)
    batch = student_src.shape[0]
    _check_targets("targets", targets, batch)
    logits = cos_logits(student_src, student_tgt, temperature)  # [B, B]
    targets = targets.to(logits.dtype)
    loss = soft_cross_entropy(logits, targets)
    if bidirectional:
        if targets_t is not None:
            _check_targets("targets_t", targets_t, batch)
        targets_t = targets if targets_t is None else targets_t.to(logits.dtype)
        loss = (loss + soft_cross_entropy(logits.T, targets_t)) / 2
    return loss


def tcm_loss(
    student_src: Tensor, student_tgt: Tensor, targets: Tensor, *, temperature: float = DEFAULT_TEMPERATURE
) -> Tensor:
    """Mono-lingual term of TCM (paper 003, Eq. 6): ``L_mono`` of the module docstring, with ``y`` = ``targets``.

    The student matrices are symmetric, so the other direction is the same term. Total TCM objective:
    ``soft_contrastive_loss(s, t, y) + alpha * tcm_loss(s, t, y)``.
    """
    check_pair(student_src, student_tgt)
    check_temperature(temperature)
    _check_targets("targets", targets, student_src.shape[0])
    targets = targets.to(student_src.dtype)
    src = soft_cross_entropy(cos_logits(student_src, student_src, temperature), targets)  # src x src
    tgt = soft_cross_entropy(cos_logits(student_tgt, student_tgt, temperature), targets)  # tgt x tgt
    return (src + tgt) / 2


class SoftContrastiveLoss(nn.Module):
    """Park et al.'s soft-label contrastive distillation, optionally with TCM: ``soft + tcm_alpha * tcm``.

    ``label``: a mode of :func:`soft_labels`. ``tcm_alpha = 0`` is cross-lingual only; the released code's weighting
    corresponds to ``tcm_alpha = 2`` (module docstring).
    """

    def __init__(
        self,
        student: nn.Module,
        label: str = "priority",
        temperature: float = DEFAULT_TEMPERATURE,
        tcm_alpha: float = 0.0,
        bidirectional: bool = True,
    ):
        super().__init__()
        _check_mode(label)
        check_temperature(temperature)
        if tcm_alpha < 0:
            raise ValueError(f"tcm_alpha must be >= 0, got {tcm_alpha}")
        self.student = student
        self.label = label
        self.temperature = temperature
        self.tcm_alpha = tcm_alpha
        self.bidirectional = bidirectional

    def forward(
        self,
        src_features: dict[str, Tensor],
        tgt_features: dict[str, Tensor],
        teacher_src: Tensor,
        teacher_tgt: Tensor | None = None,
    ) -> Tensor:
        # the labels first: a batch they refuse (label='average' without teacher_tgt) costs no forward pass
        targets = soft_labels(teacher_src, teacher_tgt, mode=self.label, temperature=self.temperature)  # [B, B]
        src = embed(self.student, src_features)  # [B, d_s]
        tgt = embed(self.student, tgt_features)  # [B, d_s]
        loss = soft_contrastive_loss(src, tgt, targets, temperature=self.temperature, bidirectional=self.bidirectional)
        if self.tcm_alpha:
            loss = loss + self.tcm_alpha * tcm_loss(src, tgt, targets, temperature=self.temperature)
        return loss
