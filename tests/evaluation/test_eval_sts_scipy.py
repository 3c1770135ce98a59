"""The bootstrap CIs of mlse.evaluation.sts against scipy.stats.bootstrap with scipy's own Spearman (ranks, then
Pearson): the unpaired CI is scipy's resampling with this package's statistic, and the paired model-vs-model
difference resamples each pair once for both models, as ``scipy.stats.bootstrap(..., paired=True)`` does."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mlse.evaluation.sts import bootstrap_pearson, paired_spearman_difference, sts_metrics

N_BOOT = 2000


def scipy_spearman(x: np.ndarray, g: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman x 100 by definition (Pearson of average ranks), vectorised over resamples by scipy."""
    return 100 * stats.pearsonr(stats.rankdata(x, axis=axis), stats.rankdata(g, axis=axis), axis=axis).statistic


def scipy_ci(data: tuple, statistic, seed: int) -> list[float]:
    result = stats.bootstrap(
        data, statistic, paired=True, n_resamples=N_BOOT, method="percentile", rng=np.random.default_rng(seed)
    )
    return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


@pytest.fixture(scope="module")
def models() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, 60), 1)  # ties in the gold scores, as in STS ratings
    return gold + rng.normal(0, 1.0, 60), gold + rng.normal(0, 2.0, 60), gold  # A (better), B, gold


def test_unpaired_ci_is_scipys_bootstrap_of_spearman(models):
    a, _, gold = models
    ours = sts_metrics(a, gold, n_boot=N_BOOT, seed=5)["spearman_ci95"]
    assert ours == pytest.approx(scipy_ci((a, gold), scipy_spearman, seed=5), abs=1e-9)  # the same resamples
    pearson = np.percentile(bootstrap_pearson(a, gold, n_boot=N_BOOT, seed=2), [2.5, 97.5])
    by_scipy = scipy_ci((a, gold), lambda x, g, axis=-1: 100 * stats.pearsonr(x, g, axis=axis).statistic, seed=2)
    assert list(pearson) == pytest.approx(by_scipy, abs=1e-9)


def test_paired_difference_agrees_with_scipys_paired_bootstrap(models):
    a, b, gold = models

    def difference(x, y, g, axis=-1):
        return scipy_spearman(x, g, axis) - scipy_spearman(y, g, axis)

    same = paired_spearman_difference(a, b, gold, n_boot=N_BOOT, seed=5)["ci95"]
    assert same == pytest.approx(scipy_ci((a, b, gold), difference, seed=5), abs=1e-9)  # same seed: same resamples
    # other seeds: other resamples, the same interval within Monte-Carlo error (an endpoint's standard error with 2000
    # resamples is ~1-2 % of the width here; 10 % of it is several of them)
    for ours_seed, scipy_seed in [(6, 12), (7, 13)]:
        ours = paired_spearman_difference(a, b, gold, n_boot=N_BOOT, seed=ours_seed)["ci95"]
        theirs = scipy_ci((a, b, gold), difference, seed=scipy_seed)
        width = theirs[1] - theirs[0]
        assert ours == pytest.approx(theirs, abs=0.1 * width)
