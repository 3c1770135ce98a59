"""mlse.evaluation.index and .margin: faiss k-NN (exact, IVF, HNSW) vs the numpy oracle, and the ratio margin vs a
direct double loop."""

import numpy as np
import pytest

from mlse.evaluation.index import (
    build_hnsw,
    build_ivf,
    default_nlist,
    knn,
    knn_hnsw,
    knn_ivf,
    knn_numpy,
    l2_normalize,
    make_search,
    recall_at_k,
    search_index,
)
from mlse.evaluation.margin import margin_retrieve, margin_retrieve_both, neighbourhood_means, ratio_margin_scores
from mlse.evaluation.mining import mine_candidates


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
        np.testing.assert_allclose(ratio_margin_scores(x, y, k), expected, rtol=1e-5)
        pairs = np.array([[0, 0], [4, 5], [2, 1]])
        np.testing.assert_allclose(ratio_margin_scores(x, y, k, pairs), expected[pairs[:, 0], pairs[:, 1]], rtol=1e-5)
        mx, my = neighbourhood_means(x, y, k)
        assert mx.shape == (5,) and my.shape == (6,)


def test_margin_retrieve_is_best_margin_in_shortlist():
    rng = np.random.default_rng(4)
    x, y = _unit(rng, 20, 8), _unit(rng, 30, 8)
    full = ratio_margin_scores(x, y, 4)
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


# -- approximate indexes --------------------------------------------------------------------------------------------


def _clustered(rng: np.random.Generator, n: int, d: int, n_clusters: int, spread: float = 0.35) -> np.ndarray:
    """Unit vectors around random cluster centres: the shape real sentence embeddings have (topics)."""
    centres = rng.standard_normal((n_clusters, d))
    members = centres[rng.integers(0, n_clusters, n)] + spread * rng.standard_normal((n, d))
    return l2_normalize(members.astype(np.float32))


def test_ivf_visiting_every_list_is_exact():
    rng = np.random.default_rng(10)
    q, b = _unit(rng, 60, 16), _unit(rng, 400, 16)
    sims, ids = knn_ivf(q, b, 7, nlist=12, nprobe=12)
    sims_np, ids_np = knn_numpy(q, b, 7)
    assert sims.shape == ids.shape == (60, 7) and sims.dtype == np.float32 and ids.dtype == np.int64
    assert recall_at_k(ids, ids_np) == 1.0
    _check_same_neighbours(sims, ids, sims_np, ids_np, b, q)
    # nprobe beyond nlist is clipped, not an error
    assert recall_at_k(knn_ivf(q, b, 7, nlist=12, nprobe=500)[1], ids_np) == 1.0


def test_ivf_and_hnsw_recall_on_clustered_data():
    rng = np.random.default_rng(11)
    base = _clustered(rng, 3000, 32, 40)
    queries = l2_normalize(base[:300] + 0.1 * rng.standard_normal((300, 32)).astype(np.float32))
    _, exact = knn(queries, base, 10)
    _, ivf_ids = knn_ivf(queries, base, 10, nlist=default_nlist(3000), nprobe=16)
    _, hnsw_ids = knn_hnsw(queries, base, 10, m=16, ef_search=64)
    assert recall_at_k(ivf_ids, exact) >= 0.9
    assert recall_at_k(hnsw_ids, exact) >= 0.95


def test_one_built_index_serves_a_sweep():
    rng = np.random.default_rng(12)
    base = _clustered(rng, 2000, 16, 30)
    queries = base[::10]
    _, exact = knn(queries, base, 8)
    ivf = build_ivf(base, 64, seed=0)
    recalls = [recall_at_k(search_index(ivf, queries, 8, nprobe=p)[1], exact) for p in (1, 4, 16, 64)]
    assert recalls == sorted(recalls) and recalls[-1] == 1.0  # more lists visited: a superset of candidates
    hnsw = build_hnsw(base, m=8, ef_construction=40)
    hnsw_recalls = [recall_at_k(search_index(hnsw, queries, 8, ef_search=ef)[1], exact) for ef in (8, 256)]
    assert hnsw_recalls[1] >= hnsw_recalls[0] and hnsw_recalls[1] >= 0.98
    # Same seed, same k-means, same answers.
    again = build_ivf(base, 64, seed=0)
    np.testing.assert_array_equal(
        search_index(again, queries, 8, nprobe=4)[1], search_index(ivf, queries, 8, nprobe=4)[1]
    )


def test_ivf_empty_slots_are_marked_and_skipped_by_the_margin():
    rng = np.random.default_rng(13)
    x, y = _clustered(rng, 120, 8, 6), _clustered(rng, 150, 8, 6)
    sims, ids = knn_ivf(x, y, 60, nlist=30, nprobe=1)  # one list of ~5 vectors cannot fill 60 slots
    assert (ids == -1).any()
    assert np.all(np.isneginf(sims[ids == -1])) and np.all(np.isfinite(sims[ids >= 0]))
    search = make_search("ivf", nlist=30, nprobe=1)
    best_ids, best_scores = margin_retrieve(x, y, k=4, candidates=60, search=search)
    assert best_ids.shape == (120,) and np.all(best_ids < 150)
    assert np.all(np.isfinite(best_scores[best_ids >= 0]))
    mx, my = neighbourhood_means(x, y, 60, search=search)
    assert np.all(np.isfinite(mx)) and np.all(np.isfinite(my))
    cands = mine_candidates(x, y, k=4, candidates=16, search=search)
    assert cands and all(0 <= i < 120 and 0 <= j < 150 for i, j, _ in cands)


def test_margin_with_full_probe_ivf_matches_exact():
    rng = np.random.default_rng(14)
    x, y = _clustered(rng, 200, 16, 10), _clustered(rng, 180, 16, 10)
    exact = mine_candidates(x, y, k=4, candidates=8)
    full_probe = make_search("ivf", nlist=12, nprobe=12)
    approx = mine_candidates(x, y, k=4, candidates=8, search=full_probe)
    assert [(i, j) for i, j, _ in approx] == [(i, j) for i, j, _ in exact]
    np.testing.assert_allclose([sc for *_, sc in approx], [sc for *_, sc in exact], rtol=1e-5)
    for approx_means, exact_means in zip(neighbourhood_means(x, y, 4, search=full_probe), neighbourhood_means(x, y, 4)):
        np.testing.assert_allclose(approx_means, exact_means, rtol=1e-6)
    np.testing.assert_allclose(ratio_margin_scores(x, y, 4, search=knn_numpy), ratio_margin_scores(x, y, 4), rtol=1e-5)


def test_margin_retrieve_both_equals_two_single_calls():
    rng = np.random.default_rng(15)
    x, y = _unit(rng, 40, 8), _unit(rng, 25, 8)
    fwd_ids, fwd_sc, bwd_ids, bwd_sc = margin_retrieve_both(x, y, k=3, candidates=6)
    ids_a, sc_a = margin_retrieve(x, y, k=3, candidates=6)
    ids_b, sc_b = margin_retrieve(y, x, k=3, candidates=6)
    np.testing.assert_array_equal(fwd_ids, ids_a)
    np.testing.assert_array_equal(bwd_ids, ids_b)
    np.testing.assert_array_equal(fwd_sc, sc_a)  # same searches, same sums: bit-identical
    np.testing.assert_array_equal(bwd_sc, sc_b)


def test_recall_at_k_counts():
    exact = np.array([[0, 1, 2], [3, 4, 5]])
    assert recall_at_k(exact, exact) == 1.0
    assert recall_at_k(np.array([[2, 1, 0], [5, 9, -1]]), exact) == pytest.approx(4 / 6)  # order is irrelevant
    assert recall_at_k(np.array([[0, 1, 2, 7], [3, 4, 5, 8]]), exact) == 1.0  # extra columns are cut to k
    assert recall_at_k(np.array([[-1, -1, -1], [-1, -1, -1]]), exact) == 0.0
    assert recall_at_k(np.zeros((0, 3), dtype=np.int64), np.zeros((0, 3), dtype=np.int64)) == 1.0
    with pytest.raises(ValueError, match="equal n"):
        recall_at_k(exact[:1], exact)
    with pytest.raises(ValueError, match="fewer"):
        recall_at_k(exact[:, :2], exact)


def test_approximate_search_validation():
    rng = np.random.default_rng(16)
    q, b = _unit(rng, 5, 8), _unit(rng, 50, 8)
    with pytest.raises(ValueError, match="nlist"):
        knn_ivf(q, b, 3, nlist=51, nprobe=1)  # more lists than points
    with pytest.raises(ValueError, match="nlist"):
        knn_ivf(q, b, 3, nlist=0, nprobe=1)
    with pytest.raises(ValueError, match="nprobe"):
        knn_ivf(q, b, 3, nlist=5, nprobe=0)
    with pytest.raises(ValueError, match="k must"):
        knn_ivf(q, b, 0, nlist=5, nprobe=1)
    with pytest.raises(ValueError, match="dimension"):
        knn_ivf(q, _unit(rng, 50, 4), 3, nlist=5, nprobe=1)
    with pytest.raises(ValueError, match="empty"):
        knn_hnsw(q, b[:0], 3)
    with pytest.raises(ValueError, match="m must"):
        knn_hnsw(q, b, 3, m=0)
    with pytest.raises(ValueError, match="ef_search"):
        knn_hnsw(q, b, 3, ef_search=0)
    with pytest.raises(ValueError, match="NaN"):
        knn_hnsw(np.full((1, 8), np.nan), b, 3)
    ivf = build_ivf(b, 5)
    with pytest.raises(ValueError, match="HNSW"):
        search_index(ivf, q, 3, ef_search=8)
    with pytest.raises(ValueError, match="IVF"):
        search_index(build_hnsw(b), q, 3, nprobe=2)
    with pytest.raises(ValueError, match="dimension"):
        search_index(ivf, _unit(rng, 2, 4), 3)
    with pytest.raises(ValueError, match="unknown search method"):
        make_search("annoy")
    with pytest.raises(ValueError, match="no parameter"):
        make_search("exact", nprobe=3)
    sims, ids = knn_hnsw(q[:0], b, 3)
    assert sims.shape == ids.shape == (0, 3)
    assert knn_ivf(q, b, 500, nlist=5, nprobe=5)[1].shape == (5, 50)  # k clipped to the base size
    assert default_nlist(1) == 1 and default_nlist(10_000) == 400 and default_nlist(5) == 5
