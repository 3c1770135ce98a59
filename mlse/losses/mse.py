"""MSE distillation -- Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge
Distillation" (paper 002, Sec. 2; slides 004)::

    L = MSE(s(src), t(src)) + MSE(s(tgt), t(src))            (mse_distill_loss; include_src=False drops the 1st term)

A frozen teacher ``t`` embeds the English side; the student ``s`` learns to put the English sentence and its
translation there. Each term is torch's element-mean ``F.mse_loss`` (as sentence-transformers' ``MSELoss``): the
paper's value divided by ``d``. Teacher and student dimensions must be equal (:class:`ValueError`).
``include_src=False`` is Ham & Kim's Eq. 1 (:mod:`mlse.losses.ema`).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from mlse.losses.common import check_2d, check_pair, embed

__all__ = ["MSEDistillLoss", "mse_distill_loss"]


def mse_distill_loss(
    student_src: Tensor, student_tgt: Tensor, teacher_src: Tensor, *, include_src: bool = True
) -> Tensor:
    """Reimers & Gurevych 2020 multilingual knowledge distillation (paper 002, Sec. 2): the module docstring's ``L``.

    ``include_src=False`` keeps only the second term. All three tensors: ``[B, d]``, one ``d`` (else ValueError).
    """
    check_pair(student_src, student_tgt)
    check_2d("teacher_src", teacher_src)
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


class MSEDistillLoss(nn.Module):
    """:func:`mse_distill_loss` for a sentence-transformers student.

    ``forward(src_features, tgt_features, teacher_src, teacher_tgt=None)``; ``teacher_src``: ``[B, d]``;
    ``teacher_tgt`` is ignored. With ``include_src=False`` the src side is not embedded at all.
    """

    def __init__(self, student: nn.Module, include_src: bool = True):
        super().__init__()
        self.student, self.include_src = student, include_src

    def forward(
        self,
        src_features: dict[str, Tensor],
        tgt_features: dict[str, Tensor],
        teacher_src: Tensor,
        teacher_tgt: Tensor | None = None,
    ) -> Tensor:
        tgt = embed(self.student, tgt_features)  # [B, d]
        src = embed(self.student, src_features) if self.include_src else tgt  # [B, d] (unused when not included)
        return mse_distill_loss(src, tgt, teacher_src, include_src=self.include_src)
