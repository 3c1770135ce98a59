"""mlse.analysis.sts_errors on hand-made numbers: disagreement ranking, percentile ranks, calibration bins, the
Pearson bootstrap CI (moved from tests/ui/test_ui_gold.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.sts_errors import bootstrap_pearson_ci, calibration_bins, percentile_ranks, rank_disagreements


def test_rank_disagreements_hand_made():
    gold = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    pred = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # same order as gold: no disagreement
    same = rank_disagreements(pred, gold, low=0, high=5, k=6)
    assert np.allclose(same["diff"], 0.0) and np.allclose(same["rank_gap"], 0.0)
    swapped = pred.copy()
    swapped[[0, 5]] = swapped[[5, 0]]  # the model ranks the least similar pair first and vice versa
    out = rank_disagreements(swapped, gold, low=0, high=5, k=2)
    assert set(out["index"]) == {0, 5} and np.allclose(np.abs(out["diff"]), 5.0)
    only_low = rank_disagreements(swapped, gold, low=0, high=0.5, k=5)
    assert list(only_low["index"]) == [0] and int(only_low["n_in_range"]) == 1
    with pytest.raises(ValueError):
        rank_disagreements(pred, gold, low=3, high=2)


def test_percentile_ranks_and_calibration():
    assert np.allclose(percentile_ranks([3.0, 1.0, 2.0, 2.0]), [0.875, 0.125, 0.5, 0.5])
    rng = np.random.default_rng(0)
    pred = rng.uniform(0, 1, 1000)
    gold = 5 * pred  # perfectly calibrated after scaling
    bins = calibration_bins(pred, gold, 10)
    assert bins["count"].sum() == 1000 and len(bins["count"]) == 10
    assert np.allclose(bins["mean_gold"], 5 * bins["mean_pred"]) and (np.diff(bins["mean_pred"]) > 0).all()


def test_bootstrap_pearson_ci():
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    y = x + rng.normal(size=300)
    ci = bootstrap_pearson_ci(x, y, n_boot=300, seed=3)
    r = 100 * np.corrcoef(x, y)[0, 1]
    assert ci[0] < r < ci[1] and ci[1] - ci[0] < 20
    assert ci == bootstrap_pearson_ci(x, y, n_boot=300, seed=3)  # seeded: reproducible
