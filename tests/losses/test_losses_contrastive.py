"""Hard-label contrastive loss (mlse.losses.contrastive) on hand-made tensors whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mlse.losses.contrastive import HardContrastiveLoss, hard_contrastive_loss
from tests.loss_helpers import FakeStudent, batch, randn, train


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
    src, tgt = randn(4, 6, seed=1), randn(4, 6, seed=2)
    logits = F.normalize(src, dim=-1) @ F.normalize(tgt, dim=-1).T / 0.1
    labels = torch.arange(4)
    one_way = F.cross_entropy(logits, labels)
    both = (one_way + F.cross_entropy(logits.T, labels)) / 2
    assert hard_contrastive_loss(src, tgt, temperature=0.1, bidirectional=False).item() == pytest.approx(one_way.item())
    assert hard_contrastive_loss(src, tgt, temperature=0.1).item() == pytest.approx(both.item())


def test_wrapper_calls_the_pure_function():
    student = FakeStudent()
    src, tgt = batch()
    s, t = student(src)["sentence_embedding"], student(tgt)["sentence_embedding"]
    assert HardContrastiveLoss(student, 0.05)(src, tgt).item() == pytest.approx(
        hard_contrastive_loss(s, t, temperature=0.05).item()
    )


def test_hard_contrastive_training_lowers_the_loss():
    src, tgt = batch()
    first, last = train(HardContrastiveLoss(FakeStudent(seed=3), temperature=0.1), (src, tgt))
    assert last < first - 0.1
