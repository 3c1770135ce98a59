"""Soft-label contrastive distillation and TCM (mlse.losses.soft_contrastive) on hand-made tensors whose answer is
known."""

from __future__ import annotations

import math

import pytest
import torch

from mlse.losses.contrastive import hard_contrastive_loss
from mlse.losses.defaults import DEFAULT_TEMPERATURE
from mlse.losses.soft_contrastive import SoftContrastiveLoss, soft_contrastive_loss, soft_labels, tcm_loss
from tests.loss_helpers import FakeStudent, batch, randn, row_entropy, train


# ------------------------------------------------------------------------------------------------ soft labels/loss
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_soft_equals_hard_for_identity_targets(bidirectional, temperature):
    src, tgt = randn(8, 16, seed=3), randn(8, 16, seed=4)
    hard = hard_contrastive_loss(src, tgt, temperature=temperature, bidirectional=bidirectional)
    soft = soft_contrastive_loss(src, tgt, torch.eye(8), temperature=temperature, bidirectional=bidirectional)
    assert soft.item() == pytest.approx(hard.item(), abs=1e-6)


@pytest.mark.parametrize("mode", ["priority", "average"])
def test_soft_labels_rows_sum_to_one(mode):
    y = soft_labels(randn(6, 10, seed=5), randn(6, 10, seed=6), mode=mode, temperature=0.1)
    assert y.shape == (6, 6)
    assert (y >= 0).all()
    assert torch.allclose(y.sum(-1), torch.ones(6), atol=1e-6)
    assert not y.requires_grad


def test_soft_labels_identity_at_low_temperature_for_distinct_embeddings():
    teacher = torch.eye(5, 7)
    for mode in ("priority", "average"):
        y = soft_labels(teacher, teacher.clone(), mode=mode, temperature=0.01)
        assert torch.allclose(y, torch.eye(5), atol=1e-6)


def test_soft_labels_uniform_for_identical_embeddings():
    teacher = torch.tensor([[1.0, 2.0, -0.5]]).repeat(4, 1)
    y = soft_labels(teacher, temperature=0.05)
    assert torch.allclose(y, torch.full((4, 4), 0.25), atol=1e-6)


def test_average_label_is_softmax_of_mean_similarity():
    teacher_src = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # cos(src_0, src_1) = 0
    teacher_tgt = torch.tensor([[1.0, 0.0], [2.0, 0.0]])  # cos(tgt_0, tgt_1) = 1
    # mean similarity / T with T = 0.5: [[2, 1], [1, 2]] -> rows softmax([2, 1])
    e = math.e
    expected = torch.tensor([[e / (e + 1), 1 / (e + 1)], [1 / (e + 1), e / (e + 1)]])
    y = soft_labels(teacher_src, teacher_tgt, mode="average", temperature=0.5)
    assert torch.allclose(y, expected, atol=1e-6)
    # ... not the mean of the two softmaxes, and not the priority label
    mean_of_softmaxes = (soft_labels(teacher_src, temperature=0.5) + soft_labels(teacher_tgt, temperature=0.5)) / 2
    assert not torch.allclose(y, mean_of_softmaxes, atol=1e-3)
    assert not torch.allclose(y, soft_labels(teacher_src, teacher_tgt, mode="priority", temperature=0.5), atol=1e-3)


def test_average_equals_priority_when_teacher_tgt_equals_teacher_src():
    t = randn(6, 5, seed=7)
    prio = soft_labels(t, mode="priority", temperature=0.1)
    assert torch.allclose(soft_labels(t, t.clone(), mode="average", temperature=0.1), prio, atol=1e-6)
    # priority ignores teacher_tgt
    assert torch.allclose(soft_labels(t, randn(6, 5, seed=8), mode="priority", temperature=0.1), prio)


def test_soft_labels_errors():
    t = randn(4, 3)
    with pytest.raises(ValueError, match="unknown soft-label mode"):
        soft_labels(t, mode="mean")
    with pytest.raises(ValueError, match="teacher_tgt"):
        soft_labels(t, mode="average")
    with pytest.raises(ValueError, match="same shape"):
        soft_labels(t, randn(4, 5), mode="average")
    with pytest.raises(ValueError, match="temperature"):
        soft_labels(t, temperature=0.0)


def test_soft_loss_equals_label_entropy_when_student_reproduces_the_labels():
    """Cross-entropy is minimised (= H(y)) when the student's cross-lingual softmax equals y."""
    teacher = randn(6, 9, seed=9)
    y = soft_labels(teacher, temperature=0.2)
    loss = soft_contrastive_loss(teacher.clone(), teacher.clone(), y, temperature=0.2)
    assert loss.item() == pytest.approx(row_entropy(y).item(), abs=1e-5)
    assert soft_contrastive_loss(randn(6, 9, seed=10), randn(6, 9, seed=11), y, temperature=0.2) > loss


def test_soft_loss_teacher_dimension_need_not_match_student():
    y = soft_labels(randn(4, 12, seed=12), temperature=0.1)  # 12-d teacher
    loss = soft_contrastive_loss(randn(4, 3, seed=13), randn(4, 3, seed=14), y, temperature=0.1)  # 3-d student
    assert torch.isfinite(loss)


def test_soft_loss_reverse_targets_default_and_explicit():
    src, tgt = randn(5, 4, seed=15), randn(5, 4, seed=16)
    y = soft_labels(randn(5, 6, seed=17), temperature=0.1)
    default = soft_contrastive_loss(src, tgt, y, temperature=0.1)
    explicit = soft_contrastive_loss(src, tgt, y, temperature=0.1, targets_t=y)
    assert default.item() == pytest.approx(explicit.item())
    # the tgt -> src direction is the src -> tgt loss with the roles swapped
    fwd = soft_contrastive_loss(src, tgt, y, temperature=0.1, bidirectional=False)
    rev = soft_contrastive_loss(tgt, src, y, temperature=0.1, bidirectional=False)
    assert default.item() == pytest.approx(((fwd + rev) / 2).item(), abs=1e-6)


def test_soft_loss_rejects_non_stochastic_targets():
    src, tgt = randn(3, 4), randn(3, 4, seed=1)
    with pytest.raises(ValueError, match="row-stochastic"):
        soft_contrastive_loss(src, tgt, 2 * torch.eye(3))
    with pytest.raises(ValueError, match=r"\[B, B\]"):
        soft_contrastive_loss(src, tgt, torch.eye(4))


# ------------------------------------------------------------------------------------------------------------ TCM
def test_tcm_near_zero_when_mono_similarities_match_low_temperature_targets():
    student = torch.eye(5, 6)  # distinct rows: student mono softmax -> identity at low T
    teacher = 3.0 * torch.eye(5, 9)  # distinct rows, other dimension: labels -> identity
    loss = tcm_loss(student, student.clone(), soft_labels(teacher, temperature=0.01), temperature=0.01)
    assert 0 <= loss.item() < 1e-6
    y = soft_labels(teacher, teacher.clone(), mode="average", temperature=0.01)
    loss = tcm_loss(student, student.clone(), y, temperature=0.01)
    assert 0 <= loss.item() < 1e-6


def test_tcm_known_answer_averages_the_two_languages():
    """src reproduces the teacher (CE = H(y)); tgt has identical rows (uniform softmax, CE = log B)."""
    B = 6
    teacher = randn(B, 8, seed=18)
    y = soft_labels(teacher, temperature=0.2)
    collapsed = torch.ones(B, 8)
    loss = tcm_loss(teacher.clone(), collapsed, y, temperature=0.2)
    assert loss.item() == pytest.approx(((row_entropy(y) + math.log(B)) / 2).item(), abs=1e-5)


def test_tcm_ignores_the_cross_lingual_matrix():
    """TCM sees only src x src and tgt x tgt: rotating the tgt space (which breaks cross-lingual alignment) or
    rescaling embeddings (cosine) changes nothing, while the cross-lingual loss does change."""
    src, tgt, teacher = randn(5, 4, seed=19), randn(5, 4, seed=20), randn(5, 7, seed=21)
    q, _ = torch.linalg.qr(randn(4, 4, seed=22))  # orthogonal [4, 4]
    y = soft_labels(teacher, temperature=0.1)
    base = tcm_loss(src, tgt, y, temperature=0.1)
    assert tcm_loss(src, tgt @ q, y, temperature=0.1).item() == pytest.approx(base.item(), abs=1e-5)
    y_scaled = soft_labels(2 * teacher, temperature=0.1)
    assert tcm_loss(3 * src, 0.5 * tgt, y_scaled, temperature=0.1).item() == pytest.approx(base.item(), abs=1e-5)
    cross = soft_contrastive_loss(src, tgt, y, temperature=0.1)
    assert soft_contrastive_loss(src, tgt @ q, y, temperature=0.1).item() != pytest.approx(cross.item(), abs=1e-3)


# ----------------------------------------------------------------------------------------------- module wrapper
def test_wrapper_calls_the_pure_functions():
    student = FakeStudent()
    src, tgt = batch()
    s, t = student(src)["sentence_embedding"], student(tgt)["sentence_embedding"]
    teacher_src, teacher_tgt = randn(8, 4, seed=32), randn(8, 4, seed=33)
    y = soft_labels(teacher_src, teacher_tgt, mode="average", temperature=0.05)
    expected = soft_contrastive_loss(s, t, y, temperature=0.05) + 0.5 * tcm_loss(s, t, y, temperature=0.05)
    got = SoftContrastiveLoss(student, "average", 0.05, tcm_alpha=0.5)(src, tgt, teacher_src, teacher_tgt)
    assert got.item() == pytest.approx(expected.item(), abs=1e-6)
    assert SoftContrastiveLoss(student).temperature == DEFAULT_TEMPERATURE


def test_wrapper_errors():
    student = FakeStudent(d=4)
    src, tgt = batch()
    with pytest.raises(ValueError, match="unknown soft-label mode"):
        SoftContrastiveLoss(student, label="hard")
    with pytest.raises(ValueError, match="teacher_tgt"):
        SoftContrastiveLoss(student, label="average")(src, tgt, randn(8, 4))
    with pytest.raises(ValueError, match="tcm_alpha"):
        SoftContrastiveLoss(student, tcm_alpha=-1.0)
    # soft labels do not need equal dimensions: a 10-d teacher supervises the 4-d student
    assert torch.isfinite(SoftContrastiveLoss(student)(src, tgt, randn(8, 10)))


@pytest.mark.parametrize("label,tcm_alpha", [("priority", 0.0), ("average", 0.0), ("priority", 2.0)])
def test_soft_contrastive_training_lowers_the_loss(label, tcm_alpha):
    src, tgt = batch()
    teacher_src = randn(8, 10, seed=35)  # teacher dim 10 != student dim 4
    teacher_tgt = teacher_src + 0.3 * randn(8, 10, seed=36)
    loss_fn = SoftContrastiveLoss(FakeStudent(seed=2), label, temperature=0.1, tcm_alpha=tcm_alpha)
    first, last = train(loss_fn, (src, tgt, teacher_src, teacher_tgt))
    assert last < first - 0.1
