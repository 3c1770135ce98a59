"""Distillation losses (mlse.losses.distill) on hand-made tensors whose answer is known."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mlse.losses.distill import (
    DEFAULT_TEMPERATURE,
    HardContrastiveLoss,
    MSEDistillLoss,
    SoftContrastiveLoss,
    ema_tau,
    ema_update,
    hard_contrastive_loss,
    mse_distill_loss,
    soft_contrastive_loss,
    soft_labels,
    tcm_loss,
)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _row_entropy(y: torch.Tensor) -> torch.Tensor:
    """Mean over rows of -sum_j y_ij log y_ij."""
    return -(y * y.clamp_min(1e-30).log()).sum(-1).mean()


# ------------------------------------------------------------------------------------------------------------ MSE
def test_mse_zero_when_student_equals_teacher():
    t = _randn(5, 7)
    assert mse_distill_loss(t.clone(), t.clone(), t).item() == 0.0
    assert mse_distill_loss(t.clone(), t.clone(), t, include_src=False).item() == 0.0


def test_mse_include_src_toggles_first_term():
    teacher = torch.ones(2, 3)
    src = torch.zeros(2, 3)  # MSE(src, teacher) = 1
    tgt = torch.full((2, 3), 3.0)  # MSE(tgt, teacher) = 4
    assert mse_distill_loss(src, tgt, teacher).item() == pytest.approx(5.0)
    assert mse_distill_loss(src, tgt, teacher, include_src=False).item() == pytest.approx(4.0)
    # the non-English-only variant does not depend on the student's src embedding at all
    assert mse_distill_loss(_randn(2, 3), tgt, teacher, include_src=False).item() == pytest.approx(4.0)


def test_mse_dimension_mismatch_raises():
    with pytest.raises(ValueError, match="dimension"):
        mse_distill_loss(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(4, 5))
    with pytest.raises(ValueError, match="batch"):
        mse_distill_loss(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(2, 3))


# ------------------------------------------------------------------------------------------------ hard contrastive
def test_hard_contrastive_near_zero_for_aligned_one_hots():
    e = torch.eye(6, 8)  # 6 distinct one-hot rows
    loss = hard_contrastive_loss(e, e.clone(), temperature=0.01)  # diagonal logits 100, others 0
    assert 0 <= loss.item() < 1e-12 + 6 * math.exp(-100)


def test_hard_contrastive_log_b_for_identical_rows():
    B = 5
    rows = torch.tensor([[0.3, -1.0, 2.0]]).repeat(B, 1)  # every similarity equal
    for bidirectional in (True, False):
        loss = hard_contrastive_loss(rows, rows.clone(), temperature=0.05, bidirectional=bidirectional)
        assert loss.item() == pytest.approx(math.log(B), abs=1e-5)


def test_hard_contrastive_matches_cross_entropy_by_hand():
    src, tgt = _randn(4, 6, seed=1), _randn(4, 6, seed=2)
    logits = F.normalize(src, dim=-1) @ F.normalize(tgt, dim=-1).T / 0.1
    labels = torch.arange(4)
    one_way = F.cross_entropy(logits, labels)
    both = (one_way + F.cross_entropy(logits.T, labels)) / 2
    assert hard_contrastive_loss(src, tgt, temperature=0.1, bidirectional=False).item() == pytest.approx(one_way.item())
    assert hard_contrastive_loss(src, tgt, temperature=0.1).item() == pytest.approx(both.item())


# ------------------------------------------------------------------------------------------------ soft labels/loss
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_soft_equals_hard_for_identity_targets(bidirectional, temperature):
    src, tgt = _randn(8, 16, seed=3), _randn(8, 16, seed=4)
    hard = hard_contrastive_loss(src, tgt, temperature=temperature, bidirectional=bidirectional)
    soft = soft_contrastive_loss(src, tgt, torch.eye(8), temperature=temperature, bidirectional=bidirectional)
    assert soft.item() == pytest.approx(hard.item(), abs=1e-6)


@pytest.mark.parametrize("mode", ["priority", "average"])
def test_soft_labels_rows_sum_to_one(mode):
    y = soft_labels(_randn(6, 10, seed=5), _randn(6, 10, seed=6), mode=mode, temperature=0.1)
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
    t = _randn(6, 5, seed=7)
    prio = soft_labels(t, mode="priority", temperature=0.1)
    assert torch.allclose(soft_labels(t, t.clone(), mode="average", temperature=0.1), prio, atol=1e-6)
    # priority ignores teacher_tgt
    assert torch.allclose(soft_labels(t, _randn(6, 5, seed=8), mode="priority", temperature=0.1), prio)


def test_soft_labels_errors():
    t = _randn(4, 3)
    with pytest.raises(ValueError, match="unknown soft-label mode"):
        soft_labels(t, mode="mean")
    with pytest.raises(ValueError, match="teacher_tgt"):
        soft_labels(t, mode="average")
    with pytest.raises(ValueError, match="same shape"):
        soft_labels(t, _randn(4, 5), mode="average")
    with pytest.raises(ValueError, match="temperature"):
        soft_labels(t, temperature=0.0)


def test_soft_loss_equals_label_entropy_when_student_reproduces_the_labels():
    """Cross-entropy is minimised (= H(y)) when the student's cross-lingual softmax equals y."""
    teacher = _randn(6, 9, seed=9)
    y = soft_labels(teacher, temperature=0.2)
    loss = soft_contrastive_loss(teacher.clone(), teacher.clone(), y, temperature=0.2)
    assert loss.item() == pytest.approx(_row_entropy(y).item(), abs=1e-5)
    assert soft_contrastive_loss(_randn(6, 9, seed=10), _randn(6, 9, seed=11), y, temperature=0.2) > loss


def test_soft_loss_teacher_dimension_need_not_match_student():
    y = soft_labels(_randn(4, 12, seed=12), temperature=0.1)  # 12-d teacher
    loss = soft_contrastive_loss(_randn(4, 3, seed=13), _randn(4, 3, seed=14), y, temperature=0.1)  # 3-d student
    assert torch.isfinite(loss)


def test_soft_loss_reverse_targets_default_and_explicit():
    src, tgt = _randn(5, 4, seed=15), _randn(5, 4, seed=16)
    y = soft_labels(_randn(5, 6, seed=17), temperature=0.1)
    default = soft_contrastive_loss(src, tgt, y, temperature=0.1)
    explicit = soft_contrastive_loss(src, tgt, y, temperature=0.1, targets_t=y)
    assert default.item() == pytest.approx(explicit.item())
    # the tgt -> src direction is the src -> tgt loss with the roles swapped
    fwd = soft_contrastive_loss(src, tgt, y, temperature=0.1, bidirectional=False)
    rev = soft_contrastive_loss(tgt, src, y, temperature=0.1, bidirectional=False)
    assert default.item() == pytest.approx(((fwd + rev) / 2).item(), abs=1e-6)


def test_soft_loss_rejects_non_stochastic_targets():
    src, tgt = _randn(3, 4), _randn(3, 4, seed=1)
    with pytest.raises(ValueError, match="row-stochastic"):
        soft_contrastive_loss(src, tgt, 2 * torch.eye(3))
    with pytest.raises(ValueError, match=r"\[B, B\]"):
        soft_contrastive_loss(src, tgt, torch.eye(4))


# ------------------------------------------------------------------------------------------------------------ TCM
def test_tcm_near_zero_when_mono_similarities_match_low_temperature_targets():
    student = torch.eye(5, 6)  # distinct rows: student mono softmax -> identity at low T
    teacher = 3.0 * torch.eye(5, 9)  # distinct rows, other dimension: labels -> identity
    loss = tcm_loss(student, student.clone(), teacher, temperature=0.01)
    assert 0 <= loss.item() < 1e-6
    loss = tcm_loss(student, student.clone(), teacher, teacher.clone(), mode="average", temperature=0.01)
    assert 0 <= loss.item() < 1e-6


def test_tcm_known_answer_averages_the_two_languages():
    """src reproduces the teacher (CE = H(y)); tgt has identical rows (uniform softmax, CE = log B)."""
    B = 6
    teacher = _randn(B, 8, seed=18)
    y = soft_labels(teacher, temperature=0.2)
    collapsed = torch.ones(B, 8)
    loss = tcm_loss(teacher.clone(), collapsed, teacher, temperature=0.2)
    assert loss.item() == pytest.approx(((_row_entropy(y) + math.log(B)) / 2).item(), abs=1e-5)


def test_tcm_ignores_the_cross_lingual_matrix():
    """TCM sees only src x src and tgt x tgt: rotating the tgt space (which breaks cross-lingual alignment) or
    rescaling embeddings (cosine) changes nothing, while the cross-lingual loss does change."""
    src, tgt, teacher = _randn(5, 4, seed=19), _randn(5, 4, seed=20), _randn(5, 7, seed=21)
    q, _ = torch.linalg.qr(_randn(4, 4, seed=22))  # orthogonal [4, 4]
    base = tcm_loss(src, tgt, teacher, temperature=0.1)
    assert tcm_loss(src, tgt @ q, teacher, temperature=0.1).item() == pytest.approx(base.item(), abs=1e-5)
    assert tcm_loss(3 * src, 0.5 * tgt, 2 * teacher, temperature=0.1).item() == pytest.approx(base.item(), abs=1e-5)
    y = soft_labels(teacher, temperature=0.1)
    cross = soft_contrastive_loss(src, tgt, y, temperature=0.1)
    assert soft_contrastive_loss(src, tgt @ q, y, temperature=0.1).item() != pytest.approx(cross.item(), abs=1e-3)


# ------------------------------------------------------------------------------------------------------------ EMA
class _WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.register_buffer("count", torch.zeros(1))


def test_ema_update_arithmetic_and_buffers():
    teacher, student = _WithBuffer(), _WithBuffer()
    with torch.no_grad():
        teacher.lin.weight.fill_(1.0)
        teacher.lin.bias.fill_(0.0)
        student.lin.weight.copy_(torch.tensor([[3.0, -1.0]]))
        student.lin.bias.fill_(2.0)
        student.count.fill_(7.0)
    ema_update(teacher, student, tau=0.75)  # xi <- 0.75 xi + 0.25 theta
    assert teacher.lin.weight.tolist() == [[1.5, 0.5]]
    assert teacher.lin.bias.tolist() == [0.5]
    assert teacher.count.tolist() == [7.0]
    # the student is untouched, and the teacher carries no autograd history
    assert student.lin.weight.tolist() == [[3.0, -1.0]]
    assert teacher.lin.weight.grad_fn is None
    ema_update(teacher, student, tau=0.0)  # tau = 0: the teacher becomes the student
    assert teacher.lin.weight.tolist() == [[3.0, -1.0]] and teacher.lin.bias.tolist() == [2.0]


def test_ema_tau_one_is_a_frozen_teacher():
    teacher, student = _WithBuffer(), _WithBuffer()
    before = copy.deepcopy(teacher.state_dict())
    with torch.no_grad():
        student.count.fill_(3.0)
    for k in range(5):
        ema_update(teacher, student, ema_tau(k, 5, tau_base=1.0))
    for name, value in teacher.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_ema_update_keeps_an_equal_teacher_exactly_equal():
    student = nn.Linear(4, 3)
    teacher = copy.deepcopy(student)
    for _ in range(1000):
        ema_update(teacher, student, tau=0.99999)
    assert torch.equal(teacher.weight, student.weight) and torch.equal(teacher.bias, student.bias)


def test_ema_update_errors():
    with pytest.raises(ValueError, match="architecture"):
        ema_update(nn.Linear(2, 1), nn.Sequential(nn.Linear(2, 1)), 0.5)
    with pytest.raises(ValueError, match="parameter"):
        ema_update(nn.Linear(2, 1), nn.Linear(3, 1), 0.5)
    with pytest.raises(ValueError, match="tau"):
        ema_update(nn.Linear(2, 1), nn.Linear(2, 1), 1.5)


def test_ema_tau_schedule():
    K, base = 1000, 0.99
    assert ema_tau(0, K, base) == pytest.approx(base)
    assert ema_tau(K // 2, K, base) == pytest.approx(1 - (1 - base) / 2)
    assert ema_tau(K, K, base) == pytest.approx(1.0)
    assert ema_tau(2 * K, K, base) == pytest.approx(1.0)  # clamped
    taus = [ema_tau(k, K, base) for k in range(0, K + 1, 50)]
    assert all(a <= b for a, b in zip(taus, taus[1:]))
    assert all(ema_tau(k, K, 1.0) == 1.0 for k in (0, 1, K // 2, K))
    with pytest.raises(ValueError):
        ema_tau(0, 0, base)
    with pytest.raises(ValueError):
        ema_tau(0, K, 1.2)


# ----------------------------------------------------------------------------------------------- module wrappers
class _FakeStudent(nn.Module):
    """A sentence-transformers-like model: features {"x": [B, d_in]} -> {"sentence_embedding": [B, d]}."""

    def __init__(self, d_in: int = 6, d: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.linear = nn.Linear(d_in, d)

    def forward(self, features):
        return {"sentence_embedding": self.linear(features["x"])}


def _batch(B: int = 8, d_in: int = 6):
    src = {"x": _randn(B, d_in, seed=30)}
    tgt = {"x": src["x"] + 0.5 * _randn(B, d_in, seed=31)}  # a noisy "translation"
    return src, tgt


def _train(loss_fn: nn.Module, args: tuple, steps: int = 60, lr: float = 0.05) -> tuple[float, float]:
    opt = torch.optim.Adam(loss_fn.parameters(), lr=lr)
    first = loss_fn(*args).item()
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(*args)
        loss.backward()
        opt.step()
    return first, loss_fn(*args).item()


def test_wrappers_call_the_pure_functions():
    student = _FakeStudent()
    src, tgt = _batch()
    s, t = student(src)["sentence_embedding"], student(tgt)["sentence_embedding"]
    teacher_src, teacher_tgt = _randn(8, 4, seed=32), _randn(8, 4, seed=33)
    assert MSEDistillLoss(student)(src, tgt, teacher_src).item() == pytest.approx(
        mse_distill_loss(s, t, teacher_src).item()
    )
    assert MSEDistillLoss(student, include_src=False)(src, tgt, teacher_src).item() == pytest.approx(
        mse_distill_loss(s, t, teacher_src, include_src=False).item()
    )
    assert HardContrastiveLoss(student, 0.05)(src, tgt).item() == pytest.approx(
        hard_contrastive_loss(s, t, temperature=0.05).item()
    )
    y = soft_labels(teacher_src, teacher_tgt, mode="average", temperature=0.05)
    expected = soft_contrastive_loss(s, t, y, temperature=0.05) + 0.5 * tcm_loss(
        s, t, teacher_src, teacher_tgt, mode="average", temperature=0.05
    )
    got = SoftContrastiveLoss(student, "average", 0.05, tcm_alpha=0.5)(src, tgt, teacher_src, teacher_tgt)
    assert got.item() == pytest.approx(expected.item(), abs=1e-6)
    assert SoftContrastiveLoss(student).temperature == DEFAULT_TEMPERATURE


def test_wrapper_errors():
    student = _FakeStudent(d=4)
    src, tgt = _batch()
    with pytest.raises(ValueError, match="dimension"):
        MSEDistillLoss(student)(src, tgt, _randn(8, 5))
    with pytest.raises(ValueError, match="unknown soft-label mode"):
        SoftContrastiveLoss(student, label="hard")
    with pytest.raises(ValueError, match="teacher_tgt"):
        SoftContrastiveLoss(student, label="average")(src, tgt, _randn(8, 4))
    with pytest.raises(ValueError, match="tcm_alpha"):
        SoftContrastiveLoss(student, tcm_alpha=-1.0)
    # soft labels do not need equal dimensions: a 10-d teacher supervises the 4-d student
    assert torch.isfinite(SoftContrastiveLoss(student)(src, tgt, _randn(8, 10)))


def test_mse_distill_training_lowers_the_loss():
    src, tgt = _batch()
    teacher_src = _randn(8, 4, seed=34)
    first, last = _train(MSEDistillLoss(_FakeStudent(seed=1)), (src, tgt, teacher_src))
    assert last < 0.5 * first


@pytest.mark.parametrize("label,tcm_alpha", [("priority", 0.0), ("average", 0.0), ("priority", 2.0)])
def test_soft_contrastive_training_lowers_the_loss(label, tcm_alpha):
    src, tgt = _batch()
    teacher_src = _randn(8, 10, seed=35)  # teacher dim 10 != student dim 4
    teacher_tgt = teacher_src + 0.3 * _randn(8, 10, seed=36)
    loss_fn = SoftContrastiveLoss(_FakeStudent(seed=2), label, temperature=0.1, tcm_alpha=tcm_alpha)
    first, last = _train(loss_fn, (src, tgt, teacher_src, teacher_tgt))
    assert last < first - 0.1


def test_hard_contrastive_training_lowers_the_loss():
    src, tgt = _batch()
    first, last = _train(HardContrastiveLoss(_FakeStudent(seed=3), temperature=0.1), (src, tgt))
    assert last < first - 0.1
