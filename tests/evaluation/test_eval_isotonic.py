"""mlse.evaluation.isotonic, the one isotonic fit: the models' calibration (mlse.calibration.isotonic.IsotonicMap) and
the predicted-vs-gold tab's curve (mlse.analysis.sts_errors.isotonic_fit) both use it, so the Gold tab draws the same
function twice where it used to draw a scipy fit and a scikit-learn fit."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.sts_errors import isotonic_fit
from mlse.calibration.isotonic import IsotonicMap
from mlse.evaluation.isotonic import pooled_isotonic


def _seeded(n: int = 40, seed: int = 29) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cos = np.round(rng.uniform(-0.2, 1.0, n), 2)  # ties on purpose
    gold = np.clip(np.round(2.5 * (cos + 0.2) + rng.normal(0, 0.8, n), 1), 0, 5)
    return cos, gold


def test_hand_made_pool_adjacent_violators():
    x, y = pooled_isotonic([1, 2, 3, 4], [1.0, 3.0, 2.0, 4.0])
    assert x.tolist() == [1, 2, 3, 4] and y.tolist() == [1.0, 2.5, 2.5, 4.0]  # the violating pair is pooled
    # equal x are pooled first (mean y, weighted by count): x=2 holds y 0 and 6 -> 3, then 3 > 2 is pooled with x=3
    x, y = pooled_isotonic([2, 1, 2, 3], [0.0, 1.0, 6.0, 2.0])
    assert x.tolist() == [1, 2, 3] and y == pytest.approx([1.0, 8 / 3, 8 / 3])
    with pytest.raises(ValueError, match="equal, non-zero length"):
        pooled_isotonic([], [])


@pytest.mark.parametrize("seed", range(4))
def test_properties_monotone_least_squares_mean_preserving(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 30, 80).astype(float)
    y = x / 10 + rng.normal(0, 1, 80)
    levels, fitted = pooled_isotonic(x, y)
    assert np.all(np.diff(levels) > 0) and np.all(np.diff(fitted) >= -1e-12)
    per_pair = fitted[np.searchsorted(levels, x)]
    assert per_pair.mean() == pytest.approx(y.mean())  # isotonic regression keeps the mean
    sse = np.sum((per_pair - y) ** 2)
    for _ in range(20):  # other non-decreasing functions of x fit no better
        other = np.sort(fitted + rng.normal(0, 0.1, len(fitted)))[np.searchsorted(levels, x)]
        assert sse <= np.sum((other - y) ** 2)
    assert sse <= np.sum((y.mean() - y) ** 2)


def test_both_paths_of_the_gold_tab_give_identical_numbers():
    cos, gold = _seeded()
    x, y = isotonic_fit(cos, gold)
    assert np.array_equal(x, np.sort(cos))
    assert np.array_equal(IsotonicMap.fit(cos, gold)(x), y)  # gold on 0-5: the calibration clips nothing


def test_the_tab_curve_keeps_its_numbers_from_scikit_learn():
    from sklearn.isotonic import IsotonicRegression  # what isotonic_fit used before

    cos, gold = _seeded()
    for scale in (1.0, 20.0):  # a user's scores need not be on the 0-5 scale: no clipping here
        x, y = isotonic_fit(cos, scale * gold)
        old = IsotonicRegression(out_of_bounds="clip").fit(cos, scale * gold).predict(np.sort(cos, kind="stable"))
        assert y == pytest.approx(old, abs=1e-12)
    assert isotonic_fit(cos, 20.0 * gold)[1].max() > 5.0


def test_the_calibration_keeps_its_knots():
    m = IsotonicMap.fit(*_seeded())
    # computed with the code before the change
    assert m.x == (-0.18, -0.17, -0.15, -0.14, -0.04, 0.26, 0.27, 0.47, 0.48, 0.53, 0.75, 0.81, 0.94, 0.96, 0.97, 0.98)
    assert m.y == pytest.approx(
        (
            0.0,
            0.3,
            0.3666666666666667,
            0.3666666666666667,
            0.9272727272727272,
            0.9272727272727272,
            1.4,
            1.4,
            1.8,
            1.9249999999999998,
            1.9249999999999998,
            3.475,
            3.475,
            3.65,
            3.65,
            3.8,
        ),
        abs=1e-12,
    )
