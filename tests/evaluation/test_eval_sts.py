"""mlse.evaluation.sts: cosine predictions, correlations vs scipy, bootstrap CI, group averages."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from mlse.encoders.protocol import cosine_predictions
from mlse.evaluation.sts import average_scores, bootstrap_spearman, sts_metrics


def _synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, n)
    pred = gold / 5 + rng.normal(0, 0.3, n)
    return pred, gold


def test_cosine_predictions_unnormalised_rows():
    a = np.array([[3, 0], [1, 1], [0, 0], [1, 0]], dtype=np.float32)
    b = np.array([[10, 0], [-2, -2], [1, 0], [0, 5]], dtype=np.float32)
    np.testing.assert_allclose(cosine_predictions(a, b), [1.0, -1.0, 0.0, 0.0], atol=1e-7)
    with pytest.raises(ValueError):
        cosine_predictions(a, b[:3])


def test_sts_metrics_match_scipy():
    pred, gold = _synthetic(300)
    m = sts_metrics(pred, gold, n_boot=200)
    assert m["n"] == 300
    assert m["pearson"] == pytest.approx(100 * stats.pearsonr(pred, gold)[0])
    assert m["spearman"] == pytest.approx(100 * stats.spearmanr(pred, gold)[0])


def test_bootstrap_spearman_matches_scipy_per_resample():
    pred, gold = _synthetic(40)
    pred = np.round(pred, 1)  # ties, to check average ranks
    boots = bootstrap_spearman(pred, gold, n_boot=5, seed=7)
    rng = np.random.default_rng(7)
    idx = rng.integers(0, 40, size=(5, 40))
    expected = [100 * stats.spearmanr(pred[i], gold[i])[0] for i in idx]
    np.testing.assert_allclose(boots, expected, rtol=1e-10)


def test_ci_contains_estimate_shrinks_and_is_deterministic():
    small = sts_metrics(*_synthetic(40), n_boot=500, seed=1)
    large = sts_metrics(*_synthetic(2000), n_boot=500, seed=1)
    for m in (small, large):
        lo, hi = m["spearman_ci95"]
        assert lo <= m["spearman"] <= hi

    def width(m):
        return m["spearman_ci95"][1] - m["spearman_ci95"][0]

    assert width(large) < width(small)
    assert sts_metrics(*_synthetic(40), n_boot=500, seed=1) == small
    assert sts_metrics(*_synthetic(40), n_boot=500, seed=2)["spearman_ci95"] != small["spearman_ci95"]


def test_constant_predictions_give_nan_without_warnings():
    gold = np.arange(10, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = sts_metrics(np.ones(10), gold)
    assert math.isnan(m["pearson"]) and math.isnan(m["spearman"])
    assert all(math.isnan(v) for v in m["spearman_ci95"])


def test_sts_metrics_validation():
    with pytest.raises(ValueError):
        sts_metrics(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        sts_metrics(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    assert all(math.isnan(v) for v in sts_metrics(*_synthetic(10), n_boot=0)["spearman_ci95"])


def test_average_scores_groups_and_missing():
    per_pair = {"en-en": {"pearson": 80.0, "spearman": 82.0}, "en-de": {"pearson": 70.0, "spearman": 72.0}}
    out = average_scores(per_pair, {"all": ["en-en", "en-de"], "xl": ["en-de", "en-tr"]})
    assert out["all"] == {"pearson": 75.0, "spearman": 77.0, "n_pairs": 2, "missing": []}
    assert out["xl"]["missing"] == ["en-tr"] and out["xl"]["n_pairs"] == 1
    assert math.isnan(out["xl"]["spearman"])


def test_resample_ranks_equal_scipy_average_ranks_with_ties():
    from mlse.evaluation.correlation import level_ranks

    rng = np.random.default_rng(3)
    for x in (rng.normal(size=200), rng.integers(0, 6, 200).astype(float), np.round(rng.uniform(0, 5, 500), 1)):
        values, levels = np.unique(x, return_inverse=True)
        idx = rng.integers(0, len(x), size=(40, len(x)))  # resamples with replacement: new ties
        assert np.array_equal(level_ranks(levels[idx], len(values)), stats.rankdata(x[idx], axis=1))


def test_paired_difference_matches_an_explicit_paired_bootstrap():
    from scipy.stats import spearmanr

    from mlse.evaluation.sts import paired_spearman_difference

    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 60)
    a = gold + rng.normal(0, 1.0, 60)  # the better model
    b = gold + rng.normal(0, 2.0, 60)
    out = paired_spearman_difference(a, b, gold, n_boot=300, seed=5)
    # the oracle: the same 300 resamples of the pairs (drawn as the library draws them), both models on each
    idx = np.random.default_rng(5).integers(0, 60, size=(300, 60))
    diffs = [100 * (spearmanr(a[i], gold[i])[0] - spearmanr(b[i], gold[i])[0]) for i in idx]
    assert out["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-9)
    assert out["difference"] == pytest.approx(100 * (spearmanr(a, gold)[0] - spearmanr(b, gold)[0]))
    assert out["share_a_ahead"] == pytest.approx(np.mean(np.array(diffs) > 0))
    assert 0 < out["ci95"][0] < out["difference"] < out["ci95"][1]  # A is ahead, and the CI says so
    same = paired_spearman_difference(a, a, gold, n_boot=100)
    assert same["ci95"] == [0.0, 0.0] and same["share_a_ahead"] == 0.0  # a model against itself: no difference
