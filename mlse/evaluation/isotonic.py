"""Isotonic regression: the best non-decreasing map from one score to another, in the least-squares sense.

Behind :class:`mlse.calibration.isotonic.IsotonicMap` and :func:`mlse.analysis.sts_errors.isotonic_fit`. Equal x are
pooled first (mean y, weighted by count), so knots strictly increase; the fit is scipy's pool-adjacent-violators.
"""

from __future__ import annotations

import numpy as np


def pooled_isotonic(x, y) -> tuple[np.ndarray, np.ndarray]:
    """(distinct x ascending [m], fitted y [m] non-decreasing) of the least-squares isotonic fit of ``y`` on ``x``.

    ``x``, ``y``: finite values of equal length (at least one); the caller drops or refuses anything else.
    """
    from scipy.optimize import isotonic_regression  # lazy: slow to import; only this computation needs it

    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape or not x.size:
        raise ValueError(f"an isotonic fit needs x and y of equal, non-zero length, got {x.shape} and {y.shape}")
    levels, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)  # sorted, ties pooled
    mean_y = np.bincount(inverse, weights=y) / counts  # [m]
    return levels, isotonic_regression(mean_y, weights=counts.astype(np.float64)).x  # [m], [m]
