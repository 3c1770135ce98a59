"""EMA teacher -- Ham & Kim 2021 (paper 001, Sec. 5.2-5.3, Table 4)::

    L      = MSE(f_theta(x_lg), f_xi(x_en))                     Eq. 1: the target side only (include_src=False)
    xi    <- tau xi + (1 - tau) theta                           Eq. 2, after every optimiser step (EmaTeacher.update)
    tau_k  = 1 - (1 - tau_base) (cos(pi k / K) + 1) / 2         the BYOL schedule (ema_tau)

The student ``f_theta`` minimises the MSE of :mod:`mlse.losses.mse` (``include_src=False``: only the translation is
pulled to the teacher's embedding of the English sentence); the teacher ``f_xi`` starts as a copy of the student, runs
under ``no_grad`` in eval mode and follows the student by an exponential moving average (:class:`EmaTeacher` owns the
copy, its update and its forward). tau_base = 0.99999 in the paper (Table 4: 0.9999 and 0.999999 are worse; a frozen
teacher, ``tau_base = 1``, is about as bad as 0.999999).

The averaging is torch's (``torch.optim.swa_utils``): the teacher is an ``AveragedModel`` of the student whose average
is ``get_ema_multi_avg_fn`` at the step's tau (a ``lerp``, see :func:`_average`); what is this module's own is the
schedule, the frozen teacher at tau = 1 and the checks.
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
    other (an integer parameter) is copied, as it cannot move by a fraction.

    As a ``lerp``, ``xi + (1 - tau)(theta - xi)``, a teacher equal to the student stays bit-for-bit equal even for
    tau = 0.99999 in float32 (``tau * xi`` alone would shrink xi by tau's rounding error every step)."""
    floating = [(a, c) for a, c in zip(averaged, current) if a.is_floating_point()]
    if floating:
        get_ema_multi_avg_fn(tau)([a for a, _ in floating], [c for _, c in floating], None)
    for a, c in zip(averaged, current):
        if not a.is_floating_point():
            a.copy_(c)


def ema_tau(step: int, total_steps: int, tau_base: float) -> float:
    """BYOL / Ham & Kim (Sec. 5.3) decay ``tau_k`` (module docstring): ``tau_base`` at ``k = 0``, rising to 1 at ``k =
    K`` (``k`` clamped to ``[0, K]``); ``tau_base = 1`` gives 1 at every step (a frozen teacher). Ham & Kim: tau_base =
    0.99999, K = 105K steps."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not 0.0 <= tau_base <= 1.0:
        raise ValueError(f"tau_base must be in [0, 1], got {tau_base}")
    k = min(max(step, 0), total_steps)
    return 1.0 - (1.0 - tau_base) * (math.cos(math.pi * k / total_steps) + 1.0) / 2.0


def teacher_update_share(tau_base: float, total_steps: int, steps: int | None = None) -> float:
    """How far the teacher has moved towards the student's weights after ``steps`` updates (default: all of them):
    ``1 - prod_k tau_k``, the weight the teacher no longer puts on its start (were the student to stand still).

    A scale for comparing ``tau_base`` across run lengths: Ham & Kim's 0.99999 over 105K steps moves the teacher
    ~41%; over a few hundred steps it moves it ~0.2%, a frozen teacher in all but name.
    """
    last = total_steps if steps is None else steps
    return 1.0 - math.prod(ema_tau(k, total_steps, tau_base) for k in range(1, last + 1))


class EmaTeacher:
    """The teacher ``f_xi``: a frozen copy of ``student`` (eval mode, no gradients) that follows it by Eq. 2.

    ``wrap``: how the copy is called, e.g. the trainer's autocast wrapper so that the teacher runs in the student's
    precision (default: the copy itself). ``tau`` is the value of the last update (1.0 before the first).
    """

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
