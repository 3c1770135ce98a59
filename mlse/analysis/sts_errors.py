"""STS error analysis for the app's predicted-vs-gold view (pure numpy; no gradio, no encoder).

A bootstrap CI for Pearson (the STS metric code only bootstraps Spearman), a binned calibration curve, an isotonic
fit, and the pairs where a model's ranking disagrees most with the gold ranking.
"""

from __future__ import annotations

import math

import numpy as np

from mlse.evaluation.correlation import average_ranks
from mlse.evaluation.index import check_positive_int
from mlse.evaluation.isotonic import pooled_isotonic
from mlse.evaluation.sts import bootstrap_pearson, check_vectors, percentile_ci95

# Gold scores are stored as float32 (3.8 -> 3.7999999523); a range typed by a user must still include them.
RANGE_TOLERANCE = 1e-5


def bootstrap_pearson_ci(pred: np.ndarray, gold: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> list[float]:
    """95% percentile-bootstrap CI of Pearson r x 100, resampling pairs like ``sts_metrics`` does for Spearman.

    Seeded; degenerate resamples are ignored; [nan, nan] when n_boot is 0 or every resample is degenerate.
    """
    if n_boot <= 0:
        return [math.nan, math.nan]
    return percentile_ci95(bootstrap_pearson(pred, gold, n_boot=n_boot, seed=seed))


def calibration_bins(pred: np.ndarray, gold: np.ndarray, n_bins: int = 10) -> dict[str, np.ndarray]:
    """Mean gold score per equal-count bin of the predicted score: the empirical calibration curve.

    Equal-count bins, since cosines crowd into a narrow band. Returns arrays [b]: pred_lo, pred_hi, mean_pred,
    mean_gold, sem_gold (standard error of the mean gold), count.
    """
    p, g = check_vectors(pred, gold)  # [n], [n]
    order = np.argsort(p, kind="stable")  # [n]
    chunks = [c for c in np.array_split(order, max(1, min(n_bins, p.shape[0]))) if c.size]
    sem = [float(np.std(g[c], ddof=1) / math.sqrt(c.size)) if c.size > 1 else math.nan for c in chunks]
    return {
        "pred_lo": np.array([p[c].min() for c in chunks]),
        "pred_hi": np.array([p[c].max() for c in chunks]),
        "mean_pred": np.array([p[c].mean() for c in chunks]),
        "mean_gold": np.array([g[c].mean() for c in chunks]),
        "sem_gold": np.array(sem),
        "count": np.array([c.size for c in chunks]),
    }


def isotonic_fit(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best non-decreasing map from predicted to gold score (least squares): (sorted pred [n], fitted gold [n]).

    The same fit as the models' calibrations (:mod:`mlse.evaluation.isotonic`), unclipped; Spearman is unchanged.
    """
    p, g = check_vectors(pred, gold)
    levels, fitted = pooled_isotonic(p, g)  # [m] distinct pred ascending, [m]
    x = np.sort(p, kind="stable")  # [n]
    return x, fitted[np.searchsorted(levels, x)]


def percentile_ranks(x: np.ndarray) -> np.ndarray:
    """Mid-rank of each value as a fraction in (0, 1): (average rank - 0.5) / n; ties share one value."""
    x = np.asarray(x, dtype=np.float64)
    return (average_ranks(x) - 0.5) / x.shape[0]


def rank_disagreements(
    pred: np.ndarray, gold: np.ndarray, *, low: float, high: float, k: int = 20
) -> dict[str, np.ndarray]:
    """The k pairs, among those whose **gold** score lies in [low, high], where model and gold disagree most.

    Measured on ranks, so a model whose cosines live in [0.6, 1] is not "wrong" everywhere: ``pred_as_gold`` is the
    gold score at the prediction's percentile (over *all* pairs), and pairs are sorted by |pred_as_gold - gold|.
    ``rank_gap``: prediction's percentile minus gold's, in points. The range is inclusive (:data:`RANGE_TOLERANCE`).
    Returns arrays [<=k]: index, gold, pred, pred_as_gold, diff (pred_as_gold - gold), rank_gap; and "n_in_range".
    """
    p, g = check_vectors(pred, gold)  # [n], [n]
    check_positive_int(k, "k")
    if low > high:
        raise ValueError(f"empty score range: low {low:g} > high {high:g}")
    rank_p, rank_g = percentile_ranks(p), percentile_ranks(g)  # [n], [n]
    by_gold = np.argsort(g, kind="stable")  # [n]
    # equal ranks give diff 0
    as_gold = np.interp(rank_p, rank_g[by_gold], g[by_gold])  # [n]
    diff = as_gold - g  # [n]
    chosen = np.flatnonzero((g >= low - RANGE_TOLERANCE) & (g <= high + RANGE_TOLERANCE))  # [m]
    # Largest |diff| first; ties broken by the larger rank gap, then by index (stable, reproducible).
    order = np.lexsort((chosen, -np.abs(rank_p - rank_g)[chosen], -np.abs(diff[chosen])))[:k]
    idx = chosen[order]
    return {
        "index": idx,
        "gold": g[idx],
        "pred": p[idx],
        "pred_as_gold": as_gold[idx],
        "diff": diff[idx],
        "rank_gap": 100.0 * (rank_p - rank_g)[idx],
        "n_in_range": np.int64(chosen.size),
    }
