"""EnsembleEncoder: unit rows, and the cosine of two rows is the mean of the members' cosines."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.encoders.ensemble import EnsembleEncoder
from mlse.errors import MlseError


class Fixed:
    """An encoder whose embeddings are given (unnormalised, so the ensemble must normalise them itself)."""

    def __init__(self, name: str, table: dict[str, np.ndarray]):
        self.name, self.table = name, table

    @property
    def identity(self) -> str:
        return f"fixed:{self.name}"

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None):
        rows = np.stack([self.table[t] for t in texts]).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True) if normalize else rows


def test_the_ensemble_cosine_is_the_mean_of_the_members_cosines():
    rng = np.random.default_rng(0)
    texts = ["a", "b", "c"]
    a = Fixed("a", {t: rng.standard_normal(5) * 3 for t in texts})  # 5-d and 7-d: dimensions may differ
    b = Fixed("b", {t: rng.standard_normal(7) for t in texts})
    ens = EnsembleEncoder([a, b])
    e = ens.encode(texts, normalize=False)
    assert e.shape == (3, 12) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)
    ea, eb = a.encode(texts), b.encode(texts)
    for i in range(3):
        for j in range(3):
            assert e[i] @ e[j] == pytest.approx((ea[i] @ ea[j] + eb[i] @ eb[j]) / 2, abs=1e-6)
    assert ens.name == "a+b" and ens.identity == "ensemble(fixed:a,fixed:b)"


def test_an_ensemble_of_one_is_refused():
    with pytest.raises(MlseError, match="at least two"):
        EnsembleEncoder([Fixed("a", {})])
