"""MSE distillation (mlse.losses.mse) on hand-made tensors whose answer is known."""

from __future__ import annotations

import pytest
import torch

from mlse.losses.mse import MSEDistillLoss, mse_distill_loss
from tests.loss_helpers import FakeStudent, batch, randn, train


def test_mse_zero_when_student_equals_teacher():
    t = randn(5, 7)
    assert mse_distill_loss(t.clone(), t.clone(), t).item() == 0.0
    assert mse_distill_loss(t.clone(), t.clone(), t, include_src=False).item() == 0.0


def test_mse_include_src_toggles_first_term():
    teacher = torch.ones(2, 3)
    src = torch.zeros(2, 3)  # MSE(src, teacher) = 1
    tgt = torch.full((2, 3), 3.0)  # MSE(tgt, teacher) = 4
    assert mse_distill_loss(src, tgt, teacher).item() == pytest.approx(5.0)
    assert mse_distill_loss(src, tgt, teacher, include_src=False).item() == pytest.approx(4.0)
    # the non-English-only variant does not depend on the student's src embedding at all
    assert mse_distill_loss(randn(2, 3), tgt, teacher, include_src=False).item() == pytest.approx(4.0)


def test_mse_dimension_mismatch_raises():
    with pytest.raises(ValueError, match="dimension"):
        mse_distill_loss(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(4, 5))
    with pytest.raises(ValueError, match="batch"):
        mse_distill_loss(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(2, 3))


def test_wrapper_calls_the_pure_function():
    student = FakeStudent()
    src, tgt = batch()
    s, t = student(src)["sentence_embedding"], student(tgt)["sentence_embedding"]
    teacher_src = randn(8, 4, seed=32)
    assert MSEDistillLoss(student)(src, tgt, teacher_src).item() == pytest.approx(
        mse_distill_loss(s, t, teacher_src).item()
    )
    assert MSEDistillLoss(student, include_src=False)(src, tgt, teacher_src).item() == pytest.approx(
        mse_distill_loss(s, t, teacher_src, include_src=False).item()
    )


def test_wrapper_refuses_a_teacher_of_another_dimension():
    student = FakeStudent(d=4)
    src, tgt = batch()
    with pytest.raises(ValueError, match="dimension"):
        MSEDistillLoss(student)(src, tgt, randn(8, 5))


def test_mse_distill_training_lowers_the_loss():
    src, tgt = batch()
    teacher_src = randn(8, 4, seed=34)
    first, last = train(MSEDistillLoss(FakeStudent(seed=1)), (src, tgt, teacher_src))
    assert last < 0.5 * first
