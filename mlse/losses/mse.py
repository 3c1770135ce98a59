"""MSE distillation -- Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge
Distillation" (paper 002, Sec. 2; slides 004)::

    L = MSE(s(src), t(src)) + MSE(s(tgt), t(src))            (mse_distill_loss; include_src=False drops the 1st term)

A frozen teacher ``t`` embeds the English side; the student ``s`` learns to put both the English sentence and its
translation where the teacher puts the English one. The paper writes
``1/|B| sum_j [(M(s_j) - M^(s_j))^2 + (M(s_j) - M^(t_j))^2]``; each term here is torch's element-mean ``F.mse_loss``
(also what sentence-transformers' ``MSELoss`` computes), i.e. the paper's value divided by ``d``.

The MSE losses need equal teacher and student dimensions (a :class:`ValueError` says so); soft labels
(:mod:`mlse.losses.soft_contrastive`) do not. ``include_src=False`` is also Ham & Kim's Eq. 1 (:mod:`mlse.losses.ema`).
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

    ``include_src=False`` keeps only the second term. All three tensors are ``[B, d]`` with the same ``d``; raises
    :class:`ValueError` otherwise.
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

    ``forward(src_features, tgt_features, teacher_src, teacher_tgt=None)``; ``teacher_src``: ``[B, d]``, precomputed
    (for Ham & Kim: the EMA teacher's embeddings of the src side, with ``include_src=False``). ``teacher_tgt`` is
    ignored. With ``include_src=False`` the src side is not embedded at all.
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
