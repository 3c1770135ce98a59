"""How each fine-tuning method turns a batch of translation pairs into a loss: the strategy the training loop calls.

The four translation methods share one step (:class:`PairMethod`) and differ in loss and teacher: ``mse`` (frozen
teacher's precomputed embeddings), ``ema`` (an :class:`~mlse.losses.ema.EmaTeacher`), ``soft`` (soft contrastive with
the frozen teacher), ``hard`` (no teacher); ``sts`` is the supervised STS term alone (:mod:`mlse.train.sts_term`),
which ``sts_loss`` adds to any of them.

Adding a method: its loss in ``mlse/losses/``, a branch in :func:`build_loss` (and :func:`build_teacher` for a new
kind of teacher), its name in :data:`mlse.train.config.METHODS` and its options in ``FinetuneConfig``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from mlse.train.config import FinetuneConfig
from mlse.train.device import autocast_dtype
from mlse.train.finetune_data import TrainingData
from mlse.train.student_model import AutocastForward, parameter_checksum, tokenize


class Method(Protocol):
    """What the training loop asks of a method."""

    sentences_per_pair: int  # sentences run through the student per translation pair (1: the src side is not)

    def batch_loss(self, idx: np.ndarray): ...  # the loss of the pairs ``idx`` (a scalar tensor with a graph)

    def after_step(self, step: int, total_steps: int) -> None: ...  # after optimiser step ``step`` of about ``K``

    def record(self) -> dict: ...  # what each log record adds

    def final_metrics(self) -> dict: ...  # what metrics.json adds


class NoTeacher:
    """The contrastive baseline's teacher: none."""

    def targets(self, idx: np.ndarray, src_features: dict) -> tuple:
        return None, None

    def after_step(self, step: int, total_steps: int) -> None:
        pass

    def record(self) -> dict:
        return {}

    def final_metrics(self) -> dict:
        return {}


class PrecomputedTeacher(NoTeacher):
    """A frozen teacher's embeddings, encoded once before training: the rows of the batch, on the device."""

    def __init__(self, t_src: np.ndarray, t_tgt: np.ndarray | None, device: str):
        self.t_src, self.t_tgt, self.device = t_src, t_tgt, device

    def targets(self, idx: np.ndarray, src_features: dict) -> tuple:
        import torch  # lazy: torch takes seconds to import, and the command line imports this module to start a run

        t_src = torch.from_numpy(np.ascontiguousarray(self.t_src[idx])).to(self.device)  # [B, d_t]
        t_tgt = None if self.t_tgt is None else torch.from_numpy(np.ascontiguousarray(self.t_tgt[idx])).to(self.device)
        return t_src, t_tgt


class EmaTargets(NoTeacher):
    """Ham & Kim's teacher (:class:`~mlse.losses.ema.EmaTeacher`): its forward of the src side, its update after every
    step, tau in the log and the teacher's weight checksums in the metrics."""

    def __init__(self, teacher):
        self.teacher = teacher
        self.checksum_start = parameter_checksum(teacher.model)

    def targets(self, idx: np.ndarray, src_features: dict) -> tuple:
        return self.teacher(src_features), None  # [B, d]

    def after_step(self, step: int, total_steps: int) -> None:
        self.teacher.update(step, total_steps)

    def record(self) -> dict:
        return {"tau": self.teacher.tau}

    def final_metrics(self) -> dict:
        return {
            "tau_final": self.teacher.tau,
            "teacher_checksum_start": self.checksum_start,
            "teacher_checksum_end": parameter_checksum(self.teacher.model),
        }


class PairMethod:
    """One of the four methods: tokenise both sides of the batch, the teacher's embeddings, the loss."""

    def __init__(self, loss_fn, student, data: TrainingData, device: str, teacher: NoTeacher):
        self.loss_fn, self.student, self.data, self.device, self.teacher = loss_fn, student, data, device, teacher
        # the MSE losses without the src term never run the student on the src side
        self.sentences_per_pair = 2 if getattr(loss_fn, "include_src", True) else 1
        self.after_step, self.record, self.final_metrics = teacher.after_step, teacher.record, teacher.final_metrics

    def batch_loss(self, idx: np.ndarray):
        src_features = tokenize(self.student, [self.data.src[i] for i in idx], self.device)
        tgt_features = tokenize(self.student, [self.data.tgt[i] for i in idx], self.device)
        teacher_src, teacher_tgt = self.teacher.targets(idx, src_features)
        return self.loss_fn(src_features, tgt_features, teacher_src, teacher_tgt)


def build_loss(cfg: FinetuneConfig, student):
    """The loss module of ``cfg.method`` (all take ``(src_features, tgt_features, teacher_src, teacher_tgt)``).

    ``student``: the model, or any callable ``features -> {"sentence_embedding": [B, d]}`` (e.g. AutocastForward).
    """
    # lazy: the loss modules import torch at their top, and the command line imports this module to start a run
    from mlse.losses.contrastive import HardContrastiveLoss
    from mlse.losses.mse import MSEDistillLoss
    from mlse.losses.soft_contrastive import SoftContrastiveLoss

    if cfg.method in ("mse", "ema"):
        return MSEDistillLoss(student, include_src=cfg.src_term())
    if cfg.method == "soft":
        return SoftContrastiveLoss(student, label=cfg.label, temperature=cfg.temperature, tcm_alpha=cfg.tcm_alpha)
    return HardContrastiveLoss(student, temperature=cfg.temperature)


def build_teacher(cfg: FinetuneConfig, student, targets: tuple, device: str, dtype=None) -> NoTeacher:
    """The teacher of ``cfg.method``: an EMA copy of the student (run under the student's autocast ``dtype``), the
    frozen teacher's precomputed ``targets`` ``(t_src, t_tgt)``, or none."""
    if cfg.method == "ema":
        from mlse.losses.ema import EmaTeacher  # lazy: as in build_loss

        return EmaTargets(EmaTeacher(student, cfg.tau_base, wrap=lambda model: AutocastForward(model, device, dtype)))
    t_src, t_tgt = targets
    return NoTeacher() if t_src is None else PrecomputedTeacher(t_src, t_tgt, device)


def build_method(
    cfg: FinetuneConfig, student, data: TrainingData, targets: tuple, device: str, precision: str, sts_rows=None
) -> Method:
    """The method of ``cfg`` on ``student`` (after every recipe reshaped it), in the resolved ``precision``; with
    ``cfg.sts_loss`` set, plus the STS term on ``sts_rows``."""
    dtype = autocast_dtype(precision)
    forward = AutocastForward(student, device, dtype)
    method = None
    if cfg.method != "sts":
        method = PairMethod(
            build_loss(cfg, forward), student, data, device, build_teacher(cfg, student, targets, device, dtype)
        )
    if cfg.sts_loss == "none":
        return method
    from mlse.train.sts_term import StsTerm, WithStsTerm, build_sts_loss

    term = StsTerm(build_sts_loss(cfg, forward), student, sts_rows, cfg.sts_batch_size, device, cfg.seed)
    return WithStsTerm(method, term, cfg.sts_weight, cfg.batch_size)
