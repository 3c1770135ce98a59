"""EMA teacher -- Ham & Kim 2021 (paper 001, Sec. 5.2-5.3, Table 4)::

    L      = MSE(f_theta(x_lg), f_xi(x_en))                     Eq. 1: the target side only (include_src=False)
    xi    <- tau xi + (1 - tau) theta                           Eq. 2, after every optimiser step (EmaTeacher.update)
    tau_k  = 1 - (1 - tau_base) (cos(pi k / K) + 1) / 2         the BYOL schedule (ema_tau)

The student ``f_theta`` minimises the MSE of :mod:`mlse.losses.mse`; the teacher ``f_xi`` (:class:`EmaTeacher`)
starts as a copy of the student, runs under ``no_grad`` in eval mode and follows it by an exponential moving average
(torch's ``AveragedModel`` with ``get_ema_multi_avg_fn``). The paper's tau_base is 0.99999; ``tau_base = 1`` is a
frozen teacher.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

__all__ = ["EmaTeacher", "ema_tau"]


def _average(averaged: list[Tensor], current: list[Tensor], tau: float) -> None:
    """torch's EMA step (``get_ema_multi_avg_fn``: ``lerp`` to ``current`` by 1 - tau) on the floating tensors; any
    other (an integer parameter) is copied.

    As a ``lerp`` a teacher equal to the student stays bit-for-bit equal in float32 (``tau * xi`` alone would shrink xi
    by tau's rounding error every step)."""
    floating = [(a, c) for a, c in zip(averaged, current) if a.is_floating_point()]
    if floating:
        get_ema_multi_avg_fn(tau)([a for a, _ in floating], [c for _, c in floating], None)
    for a, c in zip(averaged, current):
        if not a.is_floating_point():
            a.copy_(c)


def ema_tau(step: int, total_steps: int, tau_base: float) -> float:
    """BYOL / Ham & Kim (Sec. 5.3) decay ``tau_k`` (module docstring): ``tau_base`` at ``k = 0``, rising to 1 at ``k =
    K`` (``k`` clamped to ``[0, K]``); ``tau_base = 1`` gives 1 at every step (a frozen teacher)."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not 0.0 <= tau_base <= 1.0:
        raise ValueError(f"tau_base must be in [0, 1], got {tau_base}")
    k = min(max(step, 0), total_steps)
    return 1.0 - (1.0 - tau_base) * (math.cos(math.pi * k / total_steps) + 1.0) / 2.0


def teacher_update_share(tau_base: float, total_steps: int, steps: int | None = None) -> float:
    """How far the teacher has moved towards the student's weights after ``steps`` updates (default: all of them):
    ``1 - prod_k tau_k``, the weight the teacher no longer puts on its start (were the student to stand still).

    A scale for comparing ``tau_base`` across run lengths: over a short run a paper-sized tau_base barely moves it."""
    last = total_steps if steps is None else steps
    return 1.0 - math.prod(ema_tau(k, total_steps, tau_base) for k in range(1, last + 1))


class EmaTeacher:
    """The teacher ``f_xi``: a frozen copy of ``student`` (eval mode, no gradients) that follows it by Eq. 2.

    ``wrap``: how the copy is called, e.g. the trainer's autocast wrapper so that the teacher runs in the student's
    precision (default: the copy itself). ``tau`` is the value of the last update (1.0 before the first)."""

    def __init__(self, student: nn.Module, tau_base: float, wrap: Callable[[nn.Module], Callable] | None = None):
        if not 0.0 <= tau_base <= 1.0:
            raise ValueError(f"tau_base must be in [0, 1], got {tau_base}")
        self.student, self.tau_base, self.tau = student, tau_base, 1.0
        # torch's averaged copy: parameters follow by _average at the last tau, buffers are copied from the student
        self.averaged = AveragedModel(student, multi_avg_fn=lambda xi, theta, _: _average(xi, theta, self.tau))
        self.averaged.n_averaged.fill_(1)  # the copy is the teacher's start, not a slot for the next update to fill
        self.model = self.averaged.module.eval().requires_grad_(False)
        self._forward = wrap(self.model) if wrap is not None else self.model

    def __call__(self, features: dict[str, Tensor]) -> Tensor:
        """The teacher's sentence embeddings of tokenised ``features`` (no gradient): ``[B, d]``."""
        with torch.no_grad():
            return self._forward(features)["sentence_embedding"]  # [B, d]

    def update(self, step: int, total_steps: int) -> float:
        """After optimiser step ``step`` of an estimated ``total_steps``: ``xi <- tau xi + (1 - tau) theta`` with
        ``tau = ema_tau(step, total_steps, tau_base)``; returns tau."""
        self.tau = ema_tau(step, total_steps, self.tau_base)
        if self.tau < 1.0:  # tau = 1 is a frozen teacher: nothing is touched, buffers included
            with torch.no_grad():
                self.averaged.update_parameters(self.student)
        return self.tau
