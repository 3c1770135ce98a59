"""Distillation losses that make an English sentence encoder multilingual, as pure functions of embeddings.

Three families, each a pure function on ``[B, d]`` embedding tensors plus a small :class:`torch.nn.Module` wrapper
whose ``forward`` only embeds with the student (``student(features)["sentence_embedding"]``, the sentence-transformers
call convention) and hands the embeddings on. Batch row ``i`` is a translation pair (src_i, tgt_i); "src" is the
pivot / anchor language (English), "tgt" the other one. Teacher embeddings are computed by the caller (frozen teacher,
precomputed cache, or an EMA teacher under ``torch.no_grad()``) and passed in.

**MSE distillation** -- Reimers & Gurevych 2020 (paper 002, Sec. 2; slides 004)::

    L = MSE(s(src), t(src)) + MSE(s(tgt), t(src))            (mse_distill_loss; include_src=False drops the 1st term)

The paper writes ``1/|B| sum_j [(M(s_j) - M^(s_j))^2 + (M(s_j) - M^(t_j))^2]``; each term here is torch's element-mean
``F.mse_loss`` (also what sentence-transformers' ``MSELoss`` computes), i.e. the paper's value divided by ``d``.

**EMA teacher** -- Ham & Kim 2021 (paper 001, Sec. 5.2-5.3, Table 4). The student minimises
``MSE(f_theta(x_lg), f_xi(x_en))`` (their Eq. 1: the target side only, i.e. ``include_src=False``), the teacher
``f_xi`` starts as a copy of the student and after every step moves by ``xi <- tau xi + (1 - tau) theta`` (Eq. 2,
:func:`ema_update`) with the BYOL schedule ``tau_k = 1 - (1 - tau_base) (cos(pi k / K) + 1) / 2``
(:func:`ema_tau`); tau_base = 0.99999 in the paper (Table 4: 0.9999 and 0.999999 are worse; a frozen teacher,
``tau_base = 1``, is about as bad as 0.999999).

**Soft-label contrastive distillation** -- Park et al. 2024 (paper 003, Sec. 3 and 4.1; the formulas are garbled in
the text extraction, so they were checked against the authors' released code, IMASCL ``modules/AMETrainer.py``)::

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

Choices where the paper text leaves something open (or was lost in extraction):

* The *average* label averages the two teacher **similarity matrices before the softmax** (Sec. 4.1: "the similarity
  averaged out over mono-lingual embeddings of both source and target languages"; the released code does
  ``(S_src + S_tgt) / 2`` and then the softmax), not the two softmaxes. It needs a multilingual teacher.
* The tgt -> src direction uses the **same** soft labels ``y_ij``, not ``y.T``: the teacher similarity (src x src, or
  the average) is symmetric, so the row softmax of its transpose -- what the released code computes for that
  direction -- is ``y`` itself, while ``y.T`` would not even be a distribution per row. For a non-symmetric teacher
  similarity pass ``targets_t`` explicitly.
* Directions (and, in TCM, the two languages) are **averaged**, CLIP style (the brief; Eq. 2 "follows Radford et al.").
  The released code sums both directions and adds the four mono-lingual terms unweighted, which equals
  ``2 * (L_cross + 2 * L_mono)`` in the normalisation used here, i.e. ``alpha = 2``. The paper's Eq. 7 weighs the
  terms as ``lambda * L_cross + L_mono``; under Adam(W) that gives the same updates as ``alpha = 1 / lambda`` (the
  printed value of lambda is lost in the text extraction).
* TCM uses the same labels ``y`` (priority or average) for both the src x src and the tgt x tgt student matrices, as the
  released code does; the student's own self-similarity (the diagonal) stays in, as in the code.
* Temperature: one ``T`` for the soft labels and for the student logits (``sim`` carries the temperature in Eqs. 2 and
  4). Sec. 4.1 reports a value tuned on en-ko that the text extraction lost; the released training script uses the
  code's default ``--tau 0.1``, which is the default here (:data:`DEFAULT_TEMPERATURE`), for the hard-label baseline
  too (the paper's hard contrastive baseline is the same code with identity labels).
* Loss = cross-entropy ``-sum y log p`` (as in the paper and code), so its minimum is the entropy of ``y``, not 0;
  the gradient equals that of ``KL(y || p)``.
* Soft labels need no equal dimensions: they come from the teacher's own similarity matrix, so a 768-d teacher can
  supervise a 384-d student. The MSE losses do need equal dimensions (a :class:`ValueError` says so).
* Labels are constants: :func:`soft_labels` returns a detached tensor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "DEFAULT_TEMPERATURE",
    "LABEL_MODES",
    "HardContrastiveLoss",
    "MSEDistillLoss",
    "SoftContrastiveLoss",
    "ema_tau",
    "ema_update",
    "hard_contrastive_loss",
    "mse_distill_loss",
    "soft_contrastive_loss",
    "soft_labels",
    "tcm_loss",
]

DEFAULT_TEMPERATURE = 0.1  # Park et al.'s released code (train.py --tau default, not overridden in train.sh)
LABEL_MODES = ("priority", "average")


# ----------------------------------------------------------------------------------------------------------- checks
def _check_2d(name: str, x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} must be a [B, d] tensor, got shape {tuple(x.shape)}")


def _check_pair(student_src: Tensor, student_tgt: Tensor) -> None:
    _check_2d("student_src", student_src)
    _check_2d("student_tgt", student_tgt)
    if student_src.shape != student_tgt.shape:
        raise ValueError(
            f"student_src and student_tgt must have the same shape [B, d], got {tuple(student_src.shape)} "
            f"and {tuple(student_tgt.shape)}"
        )


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def _check_mode(mode: str) -> None:
    if mode not in LABEL_MODES:
        raise ValueError(f"unknown soft-label mode {mode!r}; expected one of {', '.join(LABEL_MODES)}")


def _check_targets(name: str, targets: Tensor, batch: int) -> None:
    if targets.shape != (batch, batch):
        raise ValueError(f"{name} must be [B, B] = [{batch}, {batch}], got {tuple(targets.shape)}")
    rows = targets.detach().float().sum(dim=-1)  # [B]
    if (targets.detach() < 0).any() or not torch.allclose(rows, torch.ones_like(rows), atol=1e-3):
        raise ValueError(f"{name} must be row-stochastic (non-negative rows summing to 1), e.g. from soft_labels()")


# ------------------------------------------------------------------------------------------------------- helpers
def _cos_logits(a: Tensor, b: Tensor, temperature: float) -> Tensor:
    """cos(a_i, b_j) / T: [B, B] from a [B, d], b [B, d]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature  # [B, B]


def _soft_ce(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean over rows of -sum_j targets_ij log softmax_j(logits_i): scalar."""
    return -(targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


# --------------------------------------------------------------------------------------------- MSE (Reimers & G.)
def mse_distill_loss(
    student_src: Tensor, student_tgt: Tensor, teacher_src: Tensor, *, include_src: bool = True
) -> Tensor:
    """Reimers & Gurevych 2020 multilingual knowledge distillation (paper 002, Sec. 2).

    ``MSE(student_src, teacher_src) + MSE(student_tgt, teacher_src)``, each an element-mean ``F.mse_loss``.
    ``include_src=False`` keeps only the second term (the "non-English side only" variant; also Ham & Kim's Eq. 1).
    All three tensors are ``[B, d]`` with the same ``d``; raises :class:`ValueError` otherwise.
    """
    _check_pair(student_src, student_tgt)
    _check_2d("teacher_src", teacher_src)
    if teacher_src.shape[1] != student_tgt.shape[1]:
        raise ValueError(
            f"MSE distillation needs equal teacher and student dimensions: teacher {teacher_src.shape[1]}, "
            f"student {student_tgt.shape[1]} (add a Dense projection to the student, or use soft-label distillation)"
        )
    if teacher_src.shape[0] != student_tgt.shape[0]:
        raise ValueError(f"batch sizes differ: teacher {teacher_src.shape[0]}, student {student_tgt.shape[0]}")
    teacher_src = teacher_src.to(student_tgt.dtype)
    loss = F.mse_loss(student_tgt, teacher_src)  # translation -> teacher(src)
    if include_src:
        loss = loss + F.mse_loss(student_src, teacher_src)  # src -> teacher(src)
    return loss


# ------------------------------------------------------------------------------------- contrastive (Park et al.)
def hard_contrastive_loss(
    student_src: Tensor,
    student_tgt: Tensor,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    bidirectional: bool = True,
) -> Tensor:
    """In-batch-negatives InfoNCE over cosine similarities (paper 003, Eqs. 2-3; LaBSE / mE5 style, no margin).

    Cross-entropy of ``cos(src_i, tgt_j) / T`` with target ``j = i``; with ``bidirectional`` also of the transpose
    (tgt -> src), and the two directions are averaged. ``student_src``, ``student_tgt``: ``[B, d]``.
    """
    _check_pair(student_src, student_tgt)
    _check_temperature(temperature)
    logits = _cos_logits(student_src, student_tgt, temperature)  # [B, B]
    labels = torch.arange(logits.shape[0], device=logits.device)  # [B]
    loss = F.cross_entropy(logits, labels)
    if bidirectional:
        loss = (loss + F.cross_entropy(logits.T, labels)) / 2
    return loss


def soft_labels(
    teacher_src: Tensor,
    teacher_tgt: Tensor | None = None,
    *,
    mode: str = "priority",
    temperature: float = DEFAULT_TEMPERATURE,
) -> Tensor:
    """Park et al.'s soft labels ``y`` [B, B] (paper 003, Eqs. 4-5), row-stochastic and detached.

    * ``"priority"``: ``softmax_j cos(t(x_i), t(x_j)) / T`` -- the teacher's similarities in the anchor language
      (``teacher_src`` must be the anchor: the higher-priority language of the pair, English for en-xx).
    * ``"average"``: ``softmax_j (cos(t(x_i), t(x_j)) + cos(t(y_i), t(y_j))) / (2 T)`` -- the two mono-lingual
      similarity matrices are averaged *before* the softmax (as the released code does); needs ``teacher_tgt``,
      i.e. a multilingual teacher.

    ``teacher_src`` / ``teacher_tgt``: ``[B, d_t]``; ``d_t`` need not equal the student's dimension.
    """
    _check_mode(mode)
    _check_temperature(temperature)
    _check_2d("teacher_src", teacher_src)
    teacher_src = teacher_src.detach()
    sim = _cos_logits(teacher_src, teacher_src, temperature)  # [B, B], symmetric
    if mode == "average":
        if teacher_tgt is None:
            raise ValueError("the 'average' soft label needs teacher_tgt (teacher embeddings of the target side)")
        _check_2d("teacher_tgt", teacher_tgt)
        if teacher_tgt.shape != teacher_src.shape:
            raise ValueError(
                f"teacher_src and teacher_tgt must have the same shape, got {tuple(teacher_src.shape)} "
                f"and {tuple(teacher_tgt.shape)}"
            )
        teacher_tgt = teacher_tgt.detach().to(teacher_src.dtype)
        sim = (sim + _cos_logits(teacher_tgt, teacher_tgt, temperature)) / 2  # [B, B], symmetric
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

    With ``bidirectional`` the tgt -> src direction (row softmax of the transposed logits) is added with labels
    ``targets_t`` and the two are averaged. ``targets_t`` defaults to ``targets``: soft labels from a symmetric
    teacher similarity (all of :func:`soft_labels`' modes, and the identity) are their own reverse-direction labels,
    since ``softmax_row(S.T) == softmax_row(S)``. With ``targets = eye(B)`` this is exactly
    :func:`hard_contrastive_loss`.

    ``student_src``, ``student_tgt``: ``[B, d]``; ``targets``: ``[B, B]`` row-stochastic (:class:`ValueError` if not).
    """
    _check_pair(student_src, student_tgt)
    _check_temperature(temperature)
    batch = student_src.shape[0]
    _check_targets("targets", targets, batch)
    logits = _cos_logits(student_src, student_tgt, temperature)  # [B, B]
    targets = targets.to(logits.dtype)
    loss = _soft_ce(logits, targets)
    if bidirectional:
        if targets_t is None:
            targets_t = targets
        else:
            _check_targets("targets_t", targets_t, batch)
            targets_t = targets_t.to(logits.dtype)
        loss = (loss + _soft_ce(logits.T, targets_t)) / 2
    return loss


def tcm_loss(
    student_src: Tensor,
    student_tgt: Tensor,
    teacher_src: Tensor,
    teacher_tgt: Tensor | None = None,
    *,
    mode: str = "priority",
    temperature: float = DEFAULT_TEMPERATURE,
) -> Tensor:
    """Mono-lingual term of TCM (paper 003, Eq. 6): the soft-label loss on the student's mono-lingual matrices.

    ``(CE(softmax_row cos(s_src, s_src) / T, y) + CE(softmax_row cos(s_tgt, s_tgt) / T, y)) / 2`` with
    ``y = soft_labels(teacher_src, teacher_tgt, mode=mode, temperature=temperature)`` for both languages. The student
    matrices are symmetric, so the "other direction" is the same term and is not repeated. The total TCM objective is
    ``soft_contrastive_loss(...) + alpha * tcm_loss(...)`` (see the module docstring for alpha vs. the paper's lambda).
    """
    _check_pair(student_src, student_tgt)
    _check_temperature(temperature)
    targets = soft_labels(teacher_src, teacher_tgt, mode=mode, temperature=temperature)  # [B, B]
    _check_targets("soft labels", targets, student_src.shape[0])
    targets = targets.to(student_src.dtype)
    src = _soft_ce(_cos_logits(student_src, student_src, temperature), targets)  # src x src
    tgt = _soft_ce(_cos_logits(student_tgt, student_tgt, temperature), targets)  # tgt x tgt
    return (src + tgt) / 2


# --------------------------------------------------------------------------------------------- EMA (Ham & Kim)
@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, tau: float) -> None:
    """Ham & Kim's Eq. 2, in place: ``xi <- tau xi + (1 - tau) theta`` for every parameter; buffers are copied.

    Computed as ``xi + (1 - tau)(theta - xi)`` (``lerp``) so that a teacher equal to the student stays bit-for-bit
    equal even for tau = 0.99999 in float32 (``tau * xi`` alone would shrink xi by tau's rounding error every step).
    ``tau == 1`` is a frozen teacher: nothing is touched, buffers included. Teacher and student must have the same
    parameter names and shapes (a copy of the student); :class:`ValueError` otherwise.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    t_params = dict(teacher.named_parameters())
    s_params = dict(student.named_parameters())
    t_bufs = dict(teacher.named_buffers())
    s_bufs = dict(student.named_buffers())
    if t_params.keys() != s_params.keys() or t_bufs.keys() != s_bufs.keys():
        missing = sorted((t_params.keys() ^ s_params.keys()) | (t_bufs.keys() ^ s_bufs.keys()))
        raise ValueError(f"teacher and student differ in architecture (parameters/buffers: {missing[:5]})")
    for name, xi in t_params.items():
        if xi.shape != s_params[name].shape:
            raise ValueError(f"parameter {name!r}: teacher {tuple(xi.shape)} vs student {tuple(s_params[name].shape)}")
    if tau == 1.0:
        return
    for name, xi in t_params.items():
        theta = s_params[name].detach().to(device=xi.device, dtype=xi.dtype)
        if xi.is_floating_point():
            xi.lerp_(theta, 1.0 - tau)  # xi + (1 - tau) (theta - xi)
        else:
            xi.copy_(theta)
    for name, buf in t_bufs.items():
        buf.copy_(s_bufs[name].detach())


def ema_tau(step: int, total_steps: int, tau_base: float) -> float:
    """BYOL / Ham & Kim (Sec. 5.3) decay: ``1 - (1 - tau_base) (cos(pi k / K) + 1) / 2``.

    ``tau_base`` at ``k = 0``, rising to 1 at ``k = K``; ``k`` is clamped to ``[0, K]``. ``tau_base = 1`` gives 1 at
    every step (a frozen teacher). Use ``ema_update(teacher, student, ema_tau(k, K, tau_base))`` after optimizer step
    ``k``. Ham & Kim: tau_base = 0.99999, K = 105K steps.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not 0.0 <= tau_base <= 1.0:
        raise ValueError(f"tau_base must be in [0, 1], got {tau_base}")
    k = min(max(step, 0), total_steps)
    return 1.0 - (1.0 - tau_base) * (math.cos(math.pi * k / total_steps) + 1.0) / 2.0


# ------------------------------------------------------------------------------------------------ nn.Module wrappers
def _embed(model: nn.Module, features: dict[str, Tensor]) -> Tensor:
    return model(features)["sentence_embedding"]  # [B, d]


class MSEDistillLoss(nn.Module):
    """:func:`mse_distill_loss` for a sentence-transformers student.

    ``forward(src_features, tgt_features, teacher_src, teacher_tgt=None)``; ``teacher_src``: ``[B, d]``, precomputed
    (for Ham & Kim: the EMA teacher's embeddings of the src side, with ``include_src=False``). ``teacher_tgt`` is
    ignored. With ``include_src=False`` the src side is not embedded at all.
    """

    def __init__(self, student: nn.Module, include_src: bool = True):
        super().__init__()
        self.student = student
        self.include_src = include_src

    def forward(
        self,
        src_features: dict[str, Tensor],
        tgt_features: dict[str, Tensor],
        teacher_src: Tensor,
        teacher_tgt: Tensor | None = None,
    ) -> Tensor:
        tgt = _embed(self.student, tgt_features)  # [B, d]
        src = _embed(self.student, src_features) if self.include_src else tgt  # [B, d] (unused when not included)
        return mse_distill_loss(src, tgt, teacher_src, include_src=self.include_src)


class HardContrastiveLoss(nn.Module):
    """:func:`hard_contrastive_loss` for a sentence-transformers student; teacher arguments are accepted and ignored."""

    def __init__(self, student: nn.Module, temperature: float = DEFAULT_TEMPERATURE, bidirectional: bool = True):
        super().__init__()
        _check_temperature(temperature)
        self.student = student
        self.temperature = temperature
        self.bidirectional = bidirectional

    def forward(
        self,
        src_features: dict[str, Tensor],
        tgt_features: dict[str, Tensor],
        teacher_src: Tensor | None = None,
        teacher_tgt: Tensor | None = None,
    ) -> Tensor:
        src = _embed(self.student, src_features)  # [B, d]
        tgt = _embed(self.student, tgt_features)  # [B, d]
        return hard_contrastive_loss(src, tgt, temperature=self.temperature, bidirectional=self.bidirectional)


class SoftContrastiveLoss(nn.Module):
    """Park et al.'s soft-label contrastive distillation, optionally with TCM: ``soft + tcm_alpha * tcm``.

    ``label``: ``"priority"`` (teacher_src only; any teacher) or ``"average"`` (needs ``teacher_tgt``, a multilingual
    teacher). The teacher's dimension need not match the student's. ``tcm_alpha = 0`` is cross-lingual only;
    the released code's weighting corresponds to ``tcm_alpha = 2`` (module docstring).
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
        _check_temperature(temperature)
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
        if self.label == "average" and teacher_tgt is None:
            raise ValueError("label='average' needs teacher_tgt (a multilingual teacher's embeddings of the tgt side)")
        src = _embed(self.student, src_features)  # [B, d_s]
        tgt = _embed(self.student, tgt_features)  # [B, d_s]
        targets = soft_labels(teacher_src, teacher_tgt, mode=self.label, temperature=self.temperature)  # [B, B]
        loss = soft_contrastive_loss(src, tgt, targets, temperature=self.temperature, bidirectional=self.bidirectional)
        if self.tcm_alpha:
            loss = loss + self.tcm_alpha * tcm_loss(
                src, tgt, teacher_src, teacher_tgt, mode=self.label, temperature=self.temperature
            )
        return loss
