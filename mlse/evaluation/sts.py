"""STS evaluation: predictions (cosine) kept apart from metrics (Pearson / Spearman x 100, bootstrap CI).

Any prediction vector (cosine, a trained head, a baseline) is scored by the same metric code, as in the STS17 tables
of Reimers & Gurevych (2020) and Park et al.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from mlse.evaluation.correlation import level_ranks, pearson, rowwise_pearson, spearman

# Bootstrap resamples are ranked block-wise so that n_boot x n stays within this many elements (~64 MB float64).
_BOOT_BLOCK_ELEMENTS = 8_000_000


def check_vectors(pred: object, gold: object) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred, dtype=np.float64)
    g = np.asarray(gold, dtype=np.float64)
    if p.ndim != 1 or g.ndim != 1 or p.shape != g.shape:
        raise ValueError(f"pred and gold must be 1-D arrays of equal length, got {p.shape} and {g.shape}")
    if p.shape[0] < 2:
        raise ValueError(f"need at least 2 pairs to correlate, got {p.shape[0]}")
    if not (np.isfinite(p).all() and np.isfinite(g).all()):
        raise ValueError("pred and gold must be finite (no NaN / inf)")
    return p, g


def _bootstrap(p: np.ndarray, g: np.ndarray, n_boot: int, seed: int, ranked: bool) -> np.ndarray:
    """Pearson (x 100) of ``n_boot`` resamples of the pairs, drawn with replacement, of the values or their ranks.

    ``scipy.stats.bootstrap`` (``paired=True``) in blocks of ``_BOOT_BLOCK_ELEMENTS``; the vectorised statistic
    (:func:`level_ranks`, :func:`rowwise_pearson`) gives NaN, silently, where a resample's side is constant."""
    from scipy.stats import DegenerateDataWarning, bootstrap  # lazy: a noticeable import, for CIs only

    data = (p, g)
    if ranked:  # resample the values' levels (their index among the distinct values): ranks of levels = ranks
        (p_values, p_levels), (g_values, g_levels) = (np.unique(x, return_inverse=True) for x in (p, g))
        data = (p_levels, g_levels)

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:  # [rows, n] x 2 -> [rows]
        if ranked:
            a, b = level_ranks(a, len(p_values)), level_ranks(b, len(g_values))
        return 100.0 * rowwise_pearson(a, b)

    with warnings.catch_warnings():  # the CI is taken by percentile_ci95 (NaN resamples left out), not scipy's
        warnings.simplefilter("ignore", DegenerateDataWarning)
        result = bootstrap(
            data,
            statistic,
            n_resamples=n_boot,
            batch=max(1, _BOOT_BLOCK_ELEMENTS // p.shape[0]),
            paired=True,
            vectorized=True,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    return np.asarray(result.bootstrap_distribution, dtype=np.float64)


def bootstrap_spearman(pred: np.ndarray, gold: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Spearman rho (x 100) on `n_boot` resamples of the pairs drawn with replacement -> [n_boot].

    Average ranks for ties (as scipy.stats.spearmanr); resamples where one side is constant give NaN.
    """
    p, g = check_vectors(pred, gold)
    return _bootstrap(p, g, n_boot, seed, ranked=True)


def bootstrap_pearson(pred: np.ndarray, gold: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Pearson r (x 100) on `n_boot` resamples of the pairs drawn with replacement -> [n_boot] (NaN if constant)."""
    p, g = check_vectors(pred, gold)
    return _bootstrap(p, g, n_boot, seed, ranked=False)


def percentile_ci95(boots: np.ndarray) -> list[float]:
    """2.5 / 97.5 percentiles of bootstrap values, ignoring NaN resamples; [nan, nan] when none is finite."""
    boots = np.asarray(boots, dtype=np.float64)
    if not np.isfinite(boots).any():
        return [math.nan, math.nan]
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return [float(lo), float(hi)]


def sts_metrics(pred: np.ndarray, gold: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Pearson and Spearman (x 100) of predictions vs gold, plus a 95% percentile-bootstrap CI for Spearman.

    Returns {"pearson", "spearman", "spearman_ci95": [lo, hi], "n"}. The CI resamples pairs with replacement
    (`n_boot` times, seeded: identical inputs and seed give identical output) and takes the 2.5 / 97.5 percentiles of
    the resampled Spearman values, ignoring degenerate (constant) resamples. n_boot=0 skips it ([nan, nan]).
    Constant predictions give NaN correlations and a [nan, nan] CI.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be a non-negative integer, got {n_boot!r}")
    p, g = check_vectors(pred, gold)
    r, rho = 100.0 * pearson(p, g), 100.0 * spearman(p, g)  # NaN when a side is constant
    ci = [math.nan, math.nan]
    if n_boot > 0 and not math.isnan(rho):
        ci = percentile_ci95(_bootstrap(p, g, n_boot, seed, ranked=True))  # from [n_boot] resampled rhos
    return {"pearson": r, "spearman": rho, "spearman_ci95": ci, "n": int(p.shape[0])}


def average_scores(per_pair: dict[str, dict], groups: dict[str, list[str]]) -> dict[str, dict]:
    """Mean Pearson / Spearman over named groups of language pairs (e.g. "cross-lingual": ["en-de", "en-tr", ...]).

    per_pair: pair name -> `sts_metrics` dict. Returns {group: {"pearson", "spearman", "n_pairs", "missing"}}. A group
    with a member absent is not averaged (not comparable with the papers'): NaN means, "missing" lists the absent.
    """
    out: dict[str, dict] = {}
    for name, members in groups.items():
        missing = [m for m in members if m not in per_pair]
        present = [m for m in members if m in per_pair]
        if missing or not present:
            out[name] = {"pearson": math.nan, "spearman": math.nan, "n_pairs": len(present), "missing": missing}
            continue
        means = {key: float(np.mean([float(per_pair[m][key]) for m in present])) for key in ("pearson", "spearman")}
        out[name] = {**means, "n_pairs": len(present), "missing": []}
    return out


def paired_spearman_difference(
    pred_a: np.ndarray, pred_b: np.ndarray, gold: np.ndarray, *, n_boot: int = 1000, seed: int = 0
) -> dict:
    """Spearman of model A minus Spearman of model B (x 100) on the same pairs, with a paired 95 % bootstrap CI.

    Both models are scored on the same resamples (same ``seed`` and size), so the interval is that of the
    *difference*. Returns ``{"a", "b", "difference", "ci95", "share_a_ahead"}`` (share of resamples where A is higher).
    """
    pa, g = check_vectors(pred_a, gold)
    pb, _ = check_vectors(pred_b, gold)
    diff = _bootstrap(pa, g, n_boot, seed, ranked=True) - _bootstrap(pb, g, n_boot, seed, ranked=True)  # [n_boot]
    a, b = 100.0 * spearman(pa, g), 100.0 * spearman(pb, g)
    finite = diff[np.isfinite(diff)]
    return {
        "a": a,
        "b": b,
        "difference": a - b,
        "ci95": percentile_ci95(diff),
        "share_a_ahead": float(np.mean(finite > 0)) if finite.size else math.nan,
    }
