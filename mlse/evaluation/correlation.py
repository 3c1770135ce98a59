"""Pearson and Spearman correlation: the one implementation every score, head and calibration report uses.

Plain numpy (no scipy). Spearman is Pearson of average ranks, as ``scipy.stats.spearmanr``. An undefined correlation
(a constant side, fewer than two pairs) is NaN, never a warning or an exception. Values are in [-1, 1].
"""

from __future__ import annotations

import math

import numpy as np


def rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``a`` with the same row of ``b`` ([B, n] -> [B]); NaN for constant rows."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    # tested on the values: the mean of equal floats can miss them by an ulp, leaving a spurious non-zero spread
    constant = (a.max(axis=1) == a.min(axis=1)) | (b.max(axis=1) == b.min(axis=1))  # [B]
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    num = np.einsum("bn,bn->b", a, b)  # [B]
    den = np.sqrt(np.einsum("bn,bn->b", a, a) * np.einsum("bn,bn->b", b, b))  # [B]
    with np.errstate(invalid="ignore", divide="ignore"):
        r = num / den
    r[constant | (den == 0)] = np.nan
    return np.clip(r, -1.0, 1.0)  # rounding can put a perfect correlation a hair past 1


def level_ranks(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """Average ranks per row (1-based, ties averaged) of values given as their levels.

    ``levels`` [rows, n]: each value's index among the sorted distinct values (``np.unique(x, return_inverse=True)``),
    so no sort is needed: a tie group of ``c`` values above ``below`` smaller ones gets average rank below+(c+1)/2.
    """
    rows = levels.shape[0]
    offsets = (np.arange(rows) * n_levels)[:, None]  # [rows, 1]: each row counts in its own slice
    counts = np.bincount((levels + offsets).ravel(), minlength=rows * n_levels).reshape(rows, n_levels)
    below = np.cumsum(counts, axis=1) - counts  # [rows, n_levels] values strictly smaller
    average = below + (counts + 1) / 2.0  # [rows, n_levels]
    return np.take_along_axis(average, levels, axis=1)  # [rows, n]


def average_ranks(x) -> np.ndarray:
    """1-based ranks of ``x`` [n], ties sharing their average rank -> [n] float64."""
    values, levels = np.unique(np.asarray(x, dtype=np.float64).ravel(), return_inverse=True)
    return level_ranks(levels.reshape(1, -1), len(values))[0]


def pearson(x, y) -> float:
    """Pearson r of two equal-length 1-D sequences; NaN when undefined (fewer than two pairs, a constant side)."""
    a, b = _pair(x, y)
    if a.shape[0] < 2:
        return math.nan
    return float(rowwise_pearson(a[None, :], b[None, :])[0])


def spearman(x, y) -> float:
    """Spearman rho (Pearson of average ranks); NaN when undefined, as :func:`pearson` (which checks the length)."""
    a, b = _pair(x, y)
    return pearson(average_ranks(a), average_ranks(b))


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a correlation needs two 1-D sequences of equal length, got {a.shape} and {b.shape}")
    return a, b
