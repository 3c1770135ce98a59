"""mlse.evaluation.correlation: the one Pearson / Spearman of the package, against scipy and hand-made numbers, and
the callers that used their own copies before (STS metrics, Stage-2 early stopping, backbone calibration reports)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mlse.evaluation.correlation import average_ranks, level_ranks, pearson, rowwise_pearson, spearman


def _seeded(n: int = 40, seed: int = 29) -> tuple[np.ndarray, np.ndarray]:
    """Cosines with ties (rounded to 2 places) and noisy gold scores on the 0-5 scale."""
    rng = np.random.default_rng(seed)
    cos = np.round(rng.uniform(-0.2, 1.0, n), 2)
    gold = np.clip(np.round(2.5 * (cos + 0.2) + rng.normal(0, 0.8, n), 1), 0, 5)
    return cos, gold


def test_hand_made_numbers():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = (1, 2, 3, 4), y = (1, 3, 2, 4): centred dot 4, norms sqrt(5) and sqrt(5) -> r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # a monotone but not linear relation: Spearman 1, Pearson below 1
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    y = [1.0, 4.0, 9.0, 16.0, 100.0]
    assert spearman(x, y) == pytest.approx(1.0) and pearson(x, y) < 0.95
    # ties share their average rank: (10, 20, 20, 30) -> ranks (1, 2.5, 2.5, 4)
    assert average_ranks([10, 20, 20, 30]).tolist() == [1.0, 2.5, 2.5, 4.0]


def test_undefined_correlations_are_nan_not_warnings():
    with np.errstate(all="raise"):
        assert math.isnan(pearson([0.1, 0.1, 0.1], [1.0, 2.0, 3.0]))  # the mean of equal floats misses them by an ulp
        assert math.isnan(spearman([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))
        assert math.isnan(pearson([1.0], [2.0])) and math.isnan(spearman([], []))
    with pytest.raises(ValueError, match="equal length"):
        pearson([1.0, 2.0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("seed", range(5))
def test_equal_to_scipy_on_random_data_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 50).astype(float)  # many ties
    y = x + rng.normal(0, 2, 50)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert np.array_equal(average_ranks(x), stats.rankdata(x))


def test_properties_bounds_symmetry_and_invariance():
    rng = np.random.default_rng(3)
    for _ in range(20):
        x, y = rng.normal(size=30), rng.normal(size=30)
        r, rho = pearson(x, y), spearman(x, y)
        assert -1.0 <= r <= 1.0 and -1.0 <= rho <= 1.0
        assert pearson(y, x) == pytest.approx(r, abs=1e-15)
        assert pearson(3 * x + 7, y) == pytest.approx(r, abs=1e-12)  # affine invariance
        assert spearman(np.exp(x), y) == pytest.approx(rho, abs=1e-12)  # any monotone map keeps Spearman
        assert pearson(x, x) == 1.0  # clipped: never a hair above 1


def test_rowwise_and_level_ranks_agree_with_the_scalar_functions():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(6, 25)), rng.normal(size=(6, 25))
    a[2] = 1.5  # a constant row
    rows = rowwise_pearson(a, b)
    assert math.isnan(rows[2])
    for i in (0, 1, 3, 4, 5):
        assert rows[i] == pytest.approx(pearson(a[i], b[i]), abs=1e-15)
    x = rng.integers(0, 4, size=(3, 9))
    values, levels = np.unique(x, return_inverse=True)
    assert np.array_equal(level_ranks(levels.reshape(x.shape), len(values)), stats.rankdata(x, axis=1))


# -- the callers give the numbers they gave with their own copies (pinned from the code before the change) ------------


def test_sts_metrics_unchanged():
    from mlse.evaluation.sts import sts_metrics

    m = sts_metrics(*_seeded(), n_boot=0)
    assert m["pearson"] == pytest.approx(78.0015851893897, abs=1e-9)  # was scipy.stats.pearsonr
    assert m["spearman"] == pytest.approx(75.38977745292675, abs=1e-9)  # was scipy.stats.spearmanr
    assert math.isnan(sts_metrics([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], n_boot=10)["pearson"])


def test_backbone_calibration_report_unchanged():
    from mlse.calibration.backbone import _split_metrics
    from mlse.calibration.isotonic import IsotonicMap
    from mlse.data.types import ScoredPairs

    cos, gold = _seeded()
    datasets = {
        name: ScoredPairs([""] * 20, [""] * 20, g.astype(np.float32), name, [])
        for name, g in (("a", gold[:20]), ("b", gold[20:]))
    }
    report = _split_metrics(datasets, {"a": cos[:20], "b": cos[20:]}, IsotonicMap.fit(cos, gold))
    assert report == {
        "n": 40,
        "spearman_cosine_pooled": 75.39,
        "spearman_calibrated_pooled": 81.25,
        "spearman_cosine_mean": 76.58,
        "spearman_calibrated_mean": 81.07,
        "mae_calibrated": 0.493,
        "per_pair_spearman_calibrated": {"a": 81.53, "b": 80.61},
    }


def test_stage2_dev_pearson_is_the_pearson_of_its_cosine():
    torch = pytest.importorskip("torch")
    from mlse.heads.stage2 import Stage2Config, Stage2Head, Stage2Net

    rng = np.random.default_rng(0)
    m1, m2 = rng.normal(size=(30, 8)).astype(np.float32), rng.normal(size=(30, 8)).astype(np.float32)
    gold = rng.uniform(0, 5, 30).astype(np.float32)
    torch.manual_seed(0)
    head = Stage2Head(Stage2Config())
    head.dim_, head.net_ = 8, Stage2Net(8, 8, False, "identity", False)
    # the torch cosine and np.corrcoef the head used before agree with the shared functions to float32 precision
    with torch.no_grad():
        old_cos = torch.nn.functional.cosine_similarity(
            head.net_.embed(torch.from_numpy(m1)), head.net_.embed(torch.from_numpy(m2)), dim=-1
        ).numpy()
    assert head._dev_pearson(m1, m2, gold) == pytest.approx(np.corrcoef(old_cos, gold)[0, 1], abs=1e-6)
    assert head._dev_pearson(m1, m2, gold) == pearson(head.cosine(m1, m2), gold)
