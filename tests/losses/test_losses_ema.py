"""The EMA teacher (mlse.losses.ema): the update, the schedule and the teacher object, on hand-made numbers."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from mlse.losses.ema import EmaTeacher, ema_tau, teacher_update_share


class _WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.register_buffer("count", torch.zeros(1))


def test_ema_teacher_update_arithmetic_and_buffers():
    student = _WithBuffer()
    with torch.no_grad():
        student.lin.weight.fill_(1.0)
        student.lin.bias.fill_(0.0)
    teacher = EmaTeacher(student, tau_base=0.75)  # starts as this copy; step 0 has tau = tau_base
    with torch.no_grad():
        student.lin.weight.copy_(torch.tensor([[3.0, -1.0]]))
        student.lin.bias.fill_(2.0)
        student.count.fill_(7.0)
    assert teacher.update(0, 10) == 0.75  # xi <- 0.75 xi + 0.25 theta
    assert teacher.model.lin.weight.tolist() == [[1.5, 0.5]]
    assert teacher.model.lin.bias.tolist() == [0.5]
    assert teacher.model.count.tolist() == [7.0]  # buffers are copied
    # the student is untouched, and the teacher carries no autograd history
    assert student.lin.weight.tolist() == [[3.0, -1.0]]
    assert teacher.model.lin.weight.grad_fn is None
    assert teacher.update(10, 10) == 1.0  # the schedule's end: tau = 1 leaves the teacher where it is
    assert teacher.model.lin.weight.tolist() == [[1.5, 0.5]]


def test_ema_tau_one_is_a_frozen_teacher():
    student = _WithBuffer()
    teacher = EmaTeacher(student, tau_base=1.0)
    before = copy.deepcopy(teacher.model.state_dict())
    with torch.no_grad():
        student.count.fill_(3.0)
        student.lin.weight.fill_(5.0)
    for k in range(5):
        assert teacher.update(k, 5) == 1.0
    for name, value in teacher.model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_ema_teacher_keeps_an_equal_teacher_exactly_equal():
    student = nn.Linear(4, 3)
    teacher = EmaTeacher(student, tau_base=0.99999)
    for k in range(1000):
        teacher.update(k, 105_000)
    assert torch.equal(teacher.model.weight, student.weight) and torch.equal(teacher.model.bias, student.bias)


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


class _Embedder(nn.Module):
    """features {"x": [B, 2]} -> {"sentence_embedding": [B, 1]} through one linear map."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1, bias=False)

    def forward(self, features):
        return {"sentence_embedding": self.lin(features["x"])}


def test_ema_teacher_copies_the_student_and_follows_it_by_the_schedule():
    student = _Embedder()
    with torch.no_grad():
        student.lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
    teacher = EmaTeacher(student, tau_base=0.5)
    x = {"x": torch.tensor([[1.0, 1.0]])}
    assert teacher(x).tolist() == [[3.0]] and not teacher(x).requires_grad and teacher.tau == 1.0
    assert not teacher.model.training and not any(p.requires_grad for p in teacher.model.parameters())
    with torch.no_grad():
        student.lin.weight.copy_(torch.tensor([[3.0, 4.0]]))  # the student moved by (2, 2)
    assert teacher(x).tolist() == [[3.0]]  # a copy: the teacher did not move with it
    # step 0 of K = 2: tau = 1 - 0.5 * (cos 0 + 1) / 2 = 0.5 -> xi = 0.5 (1, 2) + 0.5 (3, 4) = (2, 3)
    assert teacher.update(0, 2) == 0.5 and teacher.tau == 0.5
    assert teacher.model.lin.weight.tolist() == [[2.0, 3.0]] and teacher(x).tolist() == [[5.0]]
    # step 1 of 2: tau = 1 - 0.5 * (cos(pi / 2) + 1) / 2 = 0.75 -> xi = 0.75 (2, 3) + 0.25 (3, 4) = (2.25, 3.25)
    assert teacher.update(1, 2) == pytest.approx(0.75)
    assert teacher.model.lin.weight.tolist() == [[2.25, 3.25]]
    assert student.lin.weight.tolist() == [[3.0, 4.0]]  # the student is never touched


def test_ema_teacher_runs_through_the_given_wrapper_and_refuses_a_bad_tau():
    student = _Embedder()
    calls = []

    def wrap(model):
        def forward(features):
            calls.append(features)
            return model(features)

        return forward

    teacher = EmaTeacher(student, tau_base=0.9, wrap=wrap)
    teacher({"x": torch.ones(3, 2)})
    assert len(calls) == 1
    with pytest.raises(ValueError, match="tau_base"):
        EmaTeacher(student, tau_base=1.5)


def test_teacher_update_share_by_hand():
    assert teacher_update_share(1.0, 10) == 0.0  # frozen: never moves
    # K = 2, tau_base = 0.5: tau_1 = 1 - 0.5 * (cos(pi/2) + 1) / 2 = 0.75, tau_2 = 1 -> keeps 0.75 of its start
    assert teacher_update_share(0.5, 2) == pytest.approx(0.25)
    assert teacher_update_share(0.5, 2, steps=1) == pytest.approx(0.25)
    # the paper's setting vs a few hundred steps: the same tau_base means a moving vs an all but frozen teacher
    assert 0.40 < teacher_update_share(0.99999, 105_000) < 0.42
    assert teacher_update_share(0.99999, 400) < 0.003
