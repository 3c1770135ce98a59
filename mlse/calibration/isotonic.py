"""An isotonic map from cosine to the human 0-5 STS scale: fitted once on dev pairs, applied with ``np.interp``.

Stage-2 heads and backbones share it (no torch). Least squares under a non-decreasing constraint keeps the cosine's
ranking (up to ties) while putting every model on one scale. Identical cosines are pooled first so the knots strictly
increase; each flat step is stored by its two ends, which ``np.interp`` turns back into exactly the full fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlse.errors import MlseError
from mlse.evaluation.isotonic import pooled_isotonic

SCORE_MIN, SCORE_MAX = 0.0, 5.0


@dataclass(frozen=True)
class IsotonicMap:
    """Knots of a non-decreasing piecewise-linear map; values outside the knots take the nearest end's score."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __post_init__(self):
        if len(self.x) != len(self.y) or not self.x:
            raise MlseError(
                f"a calibration needs as many x as y knots and at least one, got {len(self.x)} and {len(self.y)}"
            )

    @classmethod
    def fit(cls, cosine: np.ndarray, gold: np.ndarray) -> IsotonicMap:
        """Least-squares non-decreasing fit of ``gold`` [n] on ``cosine`` [n] (:mod:`mlse.evaluation.isotonic`), clipped
        to 0-5; pairs with a non-finite value are left out."""
        cosine = np.asarray(cosine, dtype=np.float64).ravel()
        gold = np.asarray(gold, dtype=np.float64).ravel()
        keep = np.isfinite(cosine) & np.isfinite(gold)
        if cosine.shape != gold.shape or not keep.any():
            raise MlseError(f"cannot fit a calibration on {int(keep.sum())} usable (cosine, gold) pairs")
        levels, fitted = pooled_isotonic(cosine[keep], gold[keep])  # [m] sorted and distinct, [m] non-decreasing
        return cls(*_step_ends(levels, np.clip(fitted, SCORE_MIN, SCORE_MAX)))

    def __call__(self, cosine) -> np.ndarray:
        """Scores on the 0-5 scale for ``cosine`` (any shape)."""
        return np.interp(np.asarray(cosine, dtype=np.float64), self.x, self.y)

    def to_dict(self) -> dict:
        return {"x": [float(v) for v in self.x], "y": [float(v) for v in self.y]}

    @classmethod
    def from_dict(cls, data: dict) -> IsotonicMap:
        """The map saved by :meth:`to_dict` (or the older one-knot-per-pair lists Stage-2 heads stored)."""
        try:
            x = tuple(float(v) for v in data["x"])
            y = tuple(float(v) for v in data["y"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MlseError(f"malformed calibration knots ({type(exc).__name__}: {exc})") from None
        return cls(x, y)


def _step_ends(x: np.ndarray, y: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Drop the interior knots of each flat step: the first and last knot of a run of equal y are enough."""
    same_as_prev = np.r_[False, y[1:] == y[:-1]]
    same_as_next = np.r_[y[:-1] == y[1:], False]
    keep = ~(same_as_prev & same_as_next)  # interior of a flat run: redundant for interpolation
    return tuple(x[keep].tolist()), tuple(y[keep].tolist())
