"""The heads' shared epoch loop (mlse.heads.fit): early stopping on hand-made score sequences, one training epoch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from mlse.heads.fit import EarlyStopping, fit_epochs, train_epoch
from mlse.stop_signal import StopSignal


def _net(value: float = 0.0) -> nn.Linear:
    net = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        net.weight.fill_(value)
    return net


def _run(scores, **kwargs):
    """Feed ``scores`` epoch by epoch, the net's weight set to the epoch number first; returns (stopping, history)."""
    net = _net()
    stopping = EarlyStopping(net, **kwargs)
    history: list[dict] = []

    def run_epoch(epoch: int) -> dict:
        with torch.no_grad():
            net.weight.fill_(float(epoch))
        return {"epoch": epoch, "score": scores[epoch - 1]}

    fit_epochs(len(scores), run_epoch, "score", stopping, history)
    return stopping, history


def test_minimising_stops_after_patience_and_keeps_the_best_epoch():
    stopping, history = _run([3.0, 2.0, 2.5, 2.0, 1.96, 1.0], mode="min", min_delta=0.05, patience=3)
    # epoch 4 ties epoch 2 and epoch 5 improves by less than min_delta: three bad epochs after epoch 2
    assert [r["epoch"] for r in history] == [1, 2, 3, 4, 5]
    assert stopping.best == 2.0 and stopping.best_epoch == 2 and not stopping.stopped
    stopping.restore()
    assert stopping.net.weight.item() == 2.0 and not stopping.net.training


def test_maximising_from_a_starting_score_falls_back_to_the_start():
    stopping, history = _run([0.4, 0.5, 0.3], mode="max", min_delta=1e-5, patience=2, best=0.5)
    assert len(history) == 2 and stopping.best == 0.5 and stopping.best_epoch == 0  # nothing beat the start
    stopping.restore()
    assert stopping.net.weight.item() == 0.0  # the weights before the first epoch


def test_nan_never_improves_and_the_stop_waits_for_weights_worth_keeping():
    asked = []

    def pressed():
        asked.append(True)
        return True

    stop = StopSignal(also=pressed)  # the one stop model: a signal, here with a condition that counts the asks
    stopping, history = _run([math.nan, math.nan, 1.0, 0.5], mode="min", min_delta=0.0, patience=5, stop=stop)
    # not asked while no epoch was worth keeping; asked (and obeyed) right after epoch 3
    assert len(history) == 3 and len(asked) == 1 and stopping.stopped and stopping.best_epoch == 3
    stopping, _ = _run([math.nan, math.nan], mode="min", min_delta=0.0, patience=5)
    assert stopping.best_state is None  # the caller says the run diverged


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(_net(), mode="up", min_delta=0.0, patience=1)


def test_train_epoch_steps_per_slice_and_returns_the_mean_loss():
    net = _net(1.0)
    seen: list[list[int]] = []

    def batch_loss(rows: np.ndarray) -> torch.Tensor:
        seen.append(rows.tolist())
        return net.weight.sum() * len(rows)  # loss = w * |batch|: gradient |batch|

    optimiser = torch.optim.SGD(net.parameters(), lr=0.1)
    mean = train_epoch(optimiser, np.array([4, 0, 3, 1, 2]), 2, batch_loss)
    assert seen == [[4, 0], [3, 1], [2]]
    # w: 1.0 -> (loss 2.0) 0.8 -> (loss 1.6) 0.6 -> (loss 0.6) 0.5; mean of the three losses
    assert mean == pytest.approx((2.0 + 1.6 + 0.6) / 3) and net.weight.item() == pytest.approx(0.5)
    assert train_epoch(optimiser, np.array([], dtype=int), 2, batch_loss) == 0.0
