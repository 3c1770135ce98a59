"""mlse.index: faiss k-NN vs the numpy oracle, and the ratio margin vs a direct double loop."""

import numpy as np
import pytest

from mlse.index import (
    full_margin_matrix,
    knn,
    knn_numpy,
    l2_normalize,
    margin_retrieve,
    neighbourhood_means,
    ratio_margin_scores,
)


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    return l2_normalize(rng.standard_normal((n, d)).astype(np.float32))


def _check_same_neighbours(sims_a, ids_a, sims_b, ids_b, base, queries):
    """Equal similarity values; equal ids wherever the similarity is not tied with a neighbour."""
    np.testing.assert_allclose(sims_a, sims_b, atol=1e-5)
    for r in range(sims_a.shape[0]):
        row = sims_b[r]
        for c in range(row.shape[0]):
            gap_prev = row[c - 1] - row[c] if c > 0 else np.inf
            gap_next = row[c] - row[c + 1] if c + 1 < row.shape[0] else np.inf
            if min(gap_prev, gap_next) > 1e-4:
                assert ids_a[r, c] == ids_b[r, c]
        # Whatever the ids, they must carry the similarity they claim.
        np.testing.assert_allclose(base[ids_a[r]] @ queries[r], sims_a[r], atol=1e-5)


@pytest.mark.parametrize("n,m,d,k", [(50, 200, 16, 5), (7, 3, 8, 10), (30, 30, 4, 1)])
def test_knn_matches_numpy_oracle(n, m, d, k):
    rng = np.random.default_rng(n + m + d + k)
    q, b = _unit(rng, n, d), _unit(rng, m, d)
    sims, ids = knn(q, b, k)
    sims_np, ids_np = knn_numpy(q, b, k)
    kk = min(k, m)
    assert sims.shape == ids.shape == (n, kk)
    assert sims.dtype == np.float32 and ids.dtype == np.int64
    assert np.all(np.diff(sims, axis=1) <= 1e-6)  # decreasing
    _check_same_neighbours(sims, ids, sims_np, ids_np, b, q)


def test_knn_with_ties_compares_values():
    b = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    q = np.array([[1, 0], [0, 1]], dtype=np.float32)
    sims, ids = knn(q, b, 3)
    sims_np, ids_np = knn_numpy(q, b, 3)
    np.testing.assert_allclose(sims, sims_np, atol=1e-6)
    assert set(ids[0, :2]) == {0, 1} and set(ids[1, :2]) == {2, 3}
    assert list(ids_np[0, :2]) == [0, 1]  # oracle breaks ties by id


def test_knn_converts_dtype_and_validates():
    rng = np.random.default_rng(0)
    q64 = _unit(rng, 4, 6).astype(np.float64)
    b = _unit(rng, 9, 6)
    sims, ids = knn(np.asfortranarray(q64), b, 2)
    assert sims.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_allclose(sims, knn_numpy(q64, b, 2)[0], atol=1e-6)
    with pytest.raises(ValueError, match="dimension"):
        knn(q64, _unit(rng, 3, 5), 1)
    with pytest.raises(ValueError, match="2-D"):
        knn(q64[0], b, 1)
    with pytest.raises(ValueError, match="k must"):
        knn(q64, b, 0)
    with pytest.raises(ValueError, match="empty"):
        knn(q64, b[:0], 1)
    with pytest.raises(ValueError, match="NaN"):
        knn_numpy(np.full((1, 6), np.nan), b, 1)
    s0, i0 = knn(q64[:0], b, 3)
    assert s0.shape == (0, 3) and i0.shape == (0, 3)


def _margin_loop(x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The LASER ratio margin written out literally, one pair at a time."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    out = np.zeros((len(x), len(y)))
    for i in range(len(x)):
        for j in range(len(y)):
            nn_x = sorted((float(x64[i] @ z) for z in y64), reverse=True)[:k]
            nn_y = sorted((float(y64[j] @ z) for z in x64), reverse=True)[:k]
            denom = sum(nn_x) / (2 * len(nn_x)) + sum(nn_y) / (2 * len(nn_y))
            out[i, j] = float(x64[i] @ y64[j]) / denom
    return out


def test_ratio_margin_matches_double_loop():
    rng = np.random.default_rng(3)
    x = _unit(rng, 5, 4) + 0.8  # shift so cosines are positive
    x, y = l2_normalize(x), l2_normalize(_unit(rng, 6, 4) + 0.8)
    for k in (1, 3, 4, 10):
        expected = _margin_loop(x, y, k)
        np.testing.assert_allclose(full_margin_matrix(x, y, k), expected, rtol=1e-5)
        pairs = np.array([[0, 0], [4, 5], [2, 1]])
        np.testing.assert_allclose(ratio_margin_scores(x, y, k, pairs), expected[pairs[:, 0], pairs[:, 1]], rtol=1e-5)
        mx, my = neighbourhood_means(x, y, k)
        assert mx.shape == (5,) and my.shape == (6,)


def test_margin_retrieve_is_best_margin_in_shortlist():
    rng = np.random.default_rng(4)
    x, y = _unit(rng, 20, 8), _unit(rng, 30, 8)
    full = full_margin_matrix(x, y, 4)
    ids, scores = margin_retrieve(x, y, k=4, candidates=30)  # shortlist = everything
    np.testing.assert_array_equal(ids, full.argmax(axis=1))
    np.testing.assert_allclose(scores, full.max(axis=1), rtol=1e-5)
    ids3, _ = margin_retrieve(x, y, k=4, candidates=3)
    _, top3 = knn(x, y, 3)
    assert all(ids3[i] in top3[i] for i in range(len(x)))


def test_ratio_margin_rejects_bad_pairs():
    x = l2_normalize(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="out of range"):
        ratio_margin_scores(x, x, 1, np.array([[0, 3]]))
    with pytest.raises(ValueError, match=r"\[p, 2\]"):
        ratio_margin_scores(x, x, 1, np.array([0, 1, 2]))
