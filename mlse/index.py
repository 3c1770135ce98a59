"""Nearest-neighbour search (exact, IVF, HNSW) and the ratio margin of Artetxe & Schwenk (2019).

All functions take float32 matrices whose rows are L2-normalised, so an inner product is a cosine. Inputs are
validated and converted to contiguous float32 once, at the boundary. faiss is imported lazily inside the search
functions so that `import mlse.index` stays cheap (the app and the CLI import this module for its pure-numpy helpers).

Search functions share one signature, `search(queries [n, d], base [m, d], k) -> (sims [n, k], ids [n, k])`, rows
sorted by decreasing similarity: `knn` (exact, faiss.IndexFlatIP), `knn_numpy` (exact, the test oracle), `knn_ivf`
(faiss.IndexIVFFlat) and `knn_hnsw` (faiss.IndexHNSWFlat). The margin functions take any of them as `search=`, so
mining can run on an approximate index (`make_search("ivf", nlist=..., nprobe=...)`). An approximate index may find
fewer than k neighbours for a query (an IVF probe that visits small lists): those slots hold id -1 and sim -inf, and
the margin functions skip them. `recall_at_k` measures an approximate search against the exact one.

Ratio margin (LASER, "Margin-based parallel corpus mining with multilingual sentence embeddings", Eq. ratio; the same
scoring is used by Reimers & Gurevych 2020 for BUCC):

    score(x_i, y_j) = cos(x_i, y_j) / ( mean_{z in NN_k(x_i) among y} cos(x_i, z) / 2
                                        + mean_{z in NN_k(y_j) among x} cos(y_j, z) / 2 )

The denominator is the average similarity of each side to its k nearest neighbours in the other language, so a
"hub" target that is close to everything is penalised and an isolated pair is rewarded. k is clipped to the size of
the searched set. The denominator is assumed positive (it is for any realistic sentence embeddings); a
non-positive denominator yields inf / negative scores exactly as the formula says.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

# Rows of the [chunk, m] similarity block kept in memory at once by the numpy fallback (~64 MB of float32).
_NUMPY_BLOCK_ELEMENTS = 16_000_000

# (queries [n, d], base [m, d], k) -> (sims [n, k'] float32, ids [n, k'] int64), k' = min(k, m)
SearchFn = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def as_float32_matrix(a: object, name: str) -> np.ndarray:
    """Return `a` as a C-contiguous float32 [n, d] array; ValueError if it is not a finite 2-D numeric matrix."""
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [n, d], got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return arr


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); all-zero rows stay zero. Use before `knn` on raw embeddings."""
    arr = as_float32_matrix(x, "x")  # [n, d]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)  # [n, 1]
    norms[norms == 0] = 1.0
    return arr / norms


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_pair(queries: object, base: object, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate a (queries, base, k) triple; return float32 matrices and k clipped to the base size."""
    q = as_float32_matrix(queries, "queries")  # [n, d]
    b = as_float32_matrix(base, "base")  # [m, d]
    if q.shape[1] != b.shape[1]:
        raise ValueError(f"dimension mismatch: queries have d={q.shape[1]}, base has d={b.shape[1]}")
    _check_positive_int(k, "k")
    if b.shape[0] == 0:
        raise ValueError("base is empty: nothing to search")
    return q, b, int(min(k, b.shape[0]))


def knn(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact k-nearest neighbours by inner product with faiss.IndexFlatIP.

    Returns (sims [n, k] float32, ids [n, k] int64), each row sorted by decreasing similarity; k is clipped to
    len(base). Rows are expected to be L2-normalised so sims are cosines.
    """
    q, b, k = _check_pair(queries, base, k)
    if q.shape[0] == 0:
        return np.zeros((0, k), dtype=np.float32), np.zeros((0, k), dtype=np.int64)
    import faiss  # lazy: keeps `import mlse.index` cheap

    index = faiss.IndexFlatIP(b.shape[1])
    index.add(b)
    sims, ids = index.search(q, k)  # [n, k], [n, k]
    return np.ascontiguousarray(sims, dtype=np.float32), np.ascontiguousarray(ids, dtype=np.int64)


def knn_numpy(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force twin of `knn` (same contract): the test oracle and a fallback without faiss.

    Works block-wise over queries so memory stays bounded; ties are broken by the smaller base id.
    """
    q, b, k = _check_pair(queries, base, k)
    n, m = q.shape[0], b.shape[0]
    out_sims = np.empty((n, k), dtype=np.float32)
    out_ids = np.empty((n, k), dtype=np.int64)
    block = max(1, _NUMPY_BLOCK_ELEMENTS // m)
    for start in range(0, n, block):
        sims = q[start:start + block] @ b.T  # [r, m]
        if k < m:
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]  # [r, k] unordered
        else:
            top = np.broadcast_to(np.arange(m), sims.shape)  # [r, m]
        top_sims = np.take_along_axis(sims, top, axis=1)  # [r, k]
        # Sort by (-sim, id): lexsort's last key is the primary one.
        order = np.lexsort((top, -top_sims), axis=1)  # [r, k]
        out_ids[start:start + block] = np.take_along_axis(top, order, axis=1)
        out_sims[start:start + block] = np.take_along_axis(top_sims, order, axis=1)
    return out_sims, out_ids


# -- approximate indexes --------------------------------------------------------------------------------------------


def _clean_results(sims: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """faiss marks a slot it could not fill with id -1 and sim -FLT_MAX; make that sim -inf so no mean uses it."""
    sims = np.array(sims, dtype=np.float32, order="C")  # [n, k] (a copy: faiss' buffer is not ours to edit)
    ids = np.ascontiguousarray(ids, dtype=np.int64)  # [n, k]
    sims[ids < 0] = -np.inf
    return sims, ids


def default_nlist(n: int) -> int:
    """IVF list count for n base vectors: about 4 * sqrt(n) (faiss' rule of thumb), at least 1, at most n."""
    return int(min(max(1, round(4 * math.sqrt(n))), max(1, n)))


def build_ivf(base: np.ndarray, nlist: int, *, seed: int = 0) -> Any:
    """faiss.IndexIVFFlat (inner product) over `base` [m, d]: k-means with `nlist` lists trained on base, then filled.

    The training set is the base itself (the vectors that will be searched); faiss subsamples it to 256 points per
    list when it is larger. k-means is seeded, so the index is reproducible.
    """
    b = as_float32_matrix(base, "base")  # [m, d]
    nlist = _check_positive_int(nlist, "nlist")
    if nlist > b.shape[0]:
        raise ValueError(f"nlist={nlist} exceeds the {b.shape[0]} base vectors (k-means needs a point per list)")
    import faiss

    quantizer = faiss.IndexFlatIP(b.shape[1])
    index = faiss.IndexIVFFlat(quantizer, b.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    # faiss prints a warning to stderr below 39 points per list; small bases are legitimate here (tests, --quick) and
    # their recall is measured rather than assumed, so the warning is noise.
    index.cp.min_points_per_centroid = 1
    index.train(b)
    index.add(b)
    return index  # faiss' Python wrapper keeps a reference to the quantizer inside the index


def build_hnsw(base: np.ndarray, m: int = 32, ef_construction: int = 80) -> Any:
    """faiss.IndexHNSWFlat (inner product) over `base` [m, d], `m` links per node, `ef_construction` build beam."""
    b = as_float32_matrix(base, "base")  # [m, d]
    m = _check_positive_int(m, "m")
    ef_construction = _check_positive_int(ef_construction, "ef_construction")
    if b.shape[0] == 0:
        raise ValueError("base is empty: nothing to search")
    import faiss

    index = faiss.IndexHNSWFlat(b.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(b)
    return index


def search_index(
    index: Any, queries: np.ndarray, k: int, *, nprobe: int | None = None, ef_search: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Search a built faiss index (from `build_ivf` / `build_hnsw`); same return contract as `knn`.

    nprobe (IVF: lists visited per query, clipped to nlist) and ef_search (HNSW: search beam; faiss uses at least k)
    are set on the index before searching, so one built index serves a whole parameter sweep.
    """
    q = as_float32_matrix(queries, "queries")  # [n, d]
    if q.shape[1] != index.d:
        raise ValueError(f"dimension mismatch: queries have d={q.shape[1]}, index has d={index.d}")
    k = _check_positive_int(k, "k")
    if index.ntotal == 0:
        raise ValueError("base is empty: nothing to search")
    k = min(k, int(index.ntotal))
    if nprobe is not None:
        if not hasattr(index, "nprobe"):
            raise ValueError("nprobe applies to an IVF index only")
        index.nprobe = min(_check_positive_int(nprobe, "nprobe"), int(index.nlist))
    if ef_search is not None:
        if not hasattr(index, "hnsw"):
            raise ValueError("ef_search applies to an HNSW index only")
        index.hnsw.efSearch = _check_positive_int(ef_search, "ef_search")
    if q.shape[0] == 0:
        return np.zeros((0, k), dtype=np.float32), np.zeros((0, k), dtype=np.int64)
    return _clean_results(*index.search(q, k))  # [n, k], [n, k]


def knn_ivf(
    queries: np.ndarray, base: np.ndarray, k: int, nlist: int | None = None, nprobe: int = 8, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate k-NN with an IVF index built on `base` (nlist None -> `default_nlist`); contract of `knn`.

    nprobe == nlist visits every list, which makes the search exact.
    """
    q, b, k = _check_pair(queries, base, k)
    index = build_ivf(b, default_nlist(b.shape[0]) if nlist is None else nlist, seed=seed)
    return search_index(index, q, k, nprobe=nprobe)


def knn_hnsw(
    queries: np.ndarray, base: np.ndarray, k: int, m: int = 32, ef_search: int = 64, ef_construction: int = 80
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate k-NN with an HNSW graph built on `base`; contract of `knn`."""
    q, b, k = _check_pair(queries, base, k)
    return search_index(build_hnsw(b, m, ef_construction), q, k, ef_search=ef_search)


def make_search(method: str = "exact", **params: Any) -> SearchFn:
    """A search function by name: "exact" (`knn`), "numpy" (`knn_numpy`), "ivf" (`knn_ivf`: nlist, nprobe, seed),
    "hnsw" (`knn_hnsw`: m, ef_search, ef_construction). Unknown names or parameters raise ValueError."""
    functions: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
        "exact": knn, "numpy": knn_numpy, "ivf": knn_ivf, "hnsw": knn_hnsw,
    }  # fmt: skip
    allowed = {"exact": set(), "numpy": set(), "ivf": {"nlist", "nprobe", "seed"},
               "hnsw": {"m", "ef_search", "ef_construction"}}  # fmt: skip
    if method not in functions:
        raise ValueError(f"unknown search method {method!r}; choose from {', '.join(functions)}")
    unknown = set(params) - allowed[method]
    if unknown:
        raise ValueError(f"search method {method!r} takes no parameter(s) {', '.join(sorted(unknown))}")
    fn = functions[method]

    def search(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return fn(queries, base, k, **params)

    return search


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Mean over queries of |approx top-k  &  exact top-k| / k, both [n, k] id arrays (k = exact_ids.shape[1]).

    Ids of -1 (slots an approximate index left empty) never count. With tied similarities an exact search may list
    either of two equally near ids, so recall can fall short of 1.0 on tied data even for a correct search.
    """
    a = np.asarray(approx_ids)
    e = np.asarray(exact_ids)
    if a.ndim != 2 or e.ndim != 2 or a.shape[0] != e.shape[0]:
        raise ValueError(f"approx_ids and exact_ids must be [n, k] arrays of equal n, got {a.shape} and {e.shape}")
    if a.shape[1] < e.shape[1]:
        raise ValueError(f"approx_ids has {a.shape[1]} columns, fewer than the k={e.shape[1]} of exact_ids")
    if e.size == 0:
        return 1.0  # no queries or k = 0: nothing to miss
    a = a[:, : e.shape[1]]  # [n, k]
    # [n, k, k] comparison: fine for k up to a few dozen; chunked so 100k queries stay at a few MB at a time.
    hits = 0
    for start in range(0, a.shape[0], 65536):
        blk_a, blk_e = a[start:start + 65536], e[start:start + 65536]
        match = (blk_e[:, :, None] == blk_a[:, None, :]) & (blk_a[:, None, :] >= 0)  # [r, k, k]
        hits += int(match.any(axis=2).sum())
    return hits / e.size


# -- ratio margin ---------------------------------------------------------------------------------------------------


def row_means(sims: np.ndarray, k: int) -> np.ndarray:
    """Mean of the first k found similarities per row [n] -> the ratio-margin neighbourhood term.

    Slots an approximate index left empty (-inf) are skipped; a row with none found takes the mean of the other rows
    (a neutral denominator) rather than a made-up similarity.
    """
    head = sims[:, :k]  # [n, k']
    found = np.isfinite(head)  # [n, k']
    if found.all():
        return head.mean(axis=1, dtype=np.float32)  # the exact-search path, bit for bit as before
    counts = found.sum(axis=1)  # [n]
    means = np.where(found, head, 0.0).sum(axis=1, dtype=np.float32) / np.maximum(counts, 1)  # [n]
    if (counts == 0).any():
        means[counts == 0] = means[counts > 0].mean() if (counts > 0).any() else 1.0
    return means.astype(np.float32)


def neighbourhood_means(
    x: np.ndarray, y: np.ndarray, k: int = 4, *, search: SearchFn = knn
) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine of each x_i to its k nearest y, and of each y_j to its k nearest x.

    Returns (mean_x_to_y [n] float32, mean_y_to_x [m] float32): the two halves of the ratio-margin denominator.
    k is clipped to the size of the searched side. `search` picks the index (exact by default).
    """
    x_sims, _ = search(x, y, k)  # [n, kx]
    y_sims, _ = search(y, x, k)  # [m, ky]
    return row_means(x_sims, k), row_means(y_sims, k)


def _as_pairs(pairs: object, n: int, m: int) -> np.ndarray:
    """Validate an index-pair array [p, 2] (i into x, j into y)."""
    arr = np.asarray(pairs)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"pairs must be an integer array [p, 2], got shape {arr.shape} dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if (arr[:, 0] < 0).any() or (arr[:, 0] >= n).any() or (arr[:, 1] < 0).any() or (arr[:, 1] >= m).any():
        raise ValueError(f"pairs out of range for x of size {n} and y of size {m}")
    return arr


def ratio_margin_scores(
    x: np.ndarray,
    y: np.ndarray,
    k: int = 4,
    pairs: np.ndarray | None = None,
    *,
    means: tuple[np.ndarray, np.ndarray] | None = None,
    search: SearchFn = knn,
) -> np.ndarray:
    """Ratio-margin scores, for chosen pairs or (pairs=None) for the full [n, m] matrix.

    pairs: integer [p, 2] of (i, j) -> returns [p] float32. `means` lets callers reuse a precomputed
    `neighbourhood_means(x, y, k)` (it must match x, y and k); otherwise they come from `search`.
    """
    xf = as_float32_matrix(x, "x")  # [n, d]
    yf = as_float32_matrix(y, "y")  # [m, d]
    if xf.shape[1] != yf.shape[1]:
        raise ValueError(f"dimension mismatch: x has d={xf.shape[1]}, y has d={yf.shape[1]}")
    mean_x, mean_y = neighbourhood_means(xf, yf, k, search=search) if means is None else means  # [n], [m]
    if len(mean_x) != xf.shape[0] or len(mean_y) != yf.shape[0]:
        raise ValueError("means do not match the sizes of x and y")
    if pairs is None:
        cos = xf @ yf.T  # [n, m]
        denom = (mean_x[:, None] + mean_y[None, :]) / 2  # [n, m]
        return (cos / denom).astype(np.float32)
    idx = _as_pairs(pairs, xf.shape[0], yf.shape[0])  # [p, 2]
    i, j = idx[:, 0], idx[:, 1]
    cos = np.einsum("pd,pd->p", xf[i], yf[j])  # [p]
    return (cos / ((mean_x[i] + mean_y[j]) / 2)).astype(np.float32)


def full_margin_matrix(x: np.ndarray, y: np.ndarray, k: int = 4) -> np.ndarray:
    """Ratio margin for every (x_i, y_j): [n, m] float32. O(n*m) memory, meant for small inputs (tests, app)."""
    return ratio_margin_scores(x, y, k)


def margin_best(
    sims: np.ndarray, ids: np.ndarray, mean_q: np.ndarray, mean_b: np.ndarray, candidates: int
) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank each query's first `candidates` neighbours by ratio margin; keep the best.

    sims, ids [n, c'] from a search of queries against base; mean_q [n] and mean_b [m] are the neighbourhood means
    of queries and base. Returns (best_ids [n] int64, best_scores [n] float32); a query whose shortlist is empty
    (approximate index) gets id -1 and score -inf.
    """
    c = min(candidates, sims.shape[1])
    cand_sims, cand_ids = sims[:, :c], ids[:, :c]  # [n, c]
    found = cand_ids >= 0  # [n, c]
    denom = (mean_q[:, None] + mean_b[np.where(found, cand_ids, 0)]) / 2  # [n, c]
    scores = np.where(found, cand_sims / denom, -np.inf)  # [n, c]
    if scores.shape[1] == 0:
        return np.full(len(scores), -1, dtype=np.int64), np.full(len(scores), -np.inf, dtype=np.float32)
    best = np.argmax(scores, axis=1)  # [n]
    rows = np.arange(scores.shape[0])
    best_ids = np.where(found[rows, best], cand_ids[rows, best], -1)
    return best_ids.astype(np.int64), scores[rows, best].astype(np.float32)


def _check_margin_args(k: object, candidates: object) -> None:
    _check_positive_int(candidates, "candidates")
    _check_positive_int(k, "k")


def margin_retrieve(
    x: np.ndarray, y: np.ndarray, k: int = 4, candidates: int = 16, *, search: SearchFn = knn
) -> tuple[np.ndarray, np.ndarray]:
    """For each x_i, the y_j with the highest ratio margin among its `candidates` cosine nearest neighbours.

    This is LASER's two-step retrieval: cosine k-NN proposes candidates, the margin re-ranks them (a y outside the
    cosine shortlist is never returned). Returns (best_ids [n] int64, best_scores [n] float32). `search` picks the
    index; with an approximate one a query whose shortlist came back empty gets id -1 and score -inf.
    """
    xf = as_float32_matrix(x, "x")
    yf = as_float32_matrix(y, "y")
    _check_margin_args(k, candidates)
    # One search serves both the candidate list and the x-side neighbourhood mean.
    sims, ids = search(xf, yf, max(k, candidates))  # [n, c'] sorted decreasing
    mean_x = row_means(sims, k)  # [n]
    y_sims, _ = search(yf, xf, k)  # [m, ky]
    mean_y = row_means(y_sims, k)  # [m]
    return margin_best(sims, ids, mean_x, mean_y, candidates)


def margin_both_ways(
    fwd: tuple[np.ndarray, np.ndarray], bwd: tuple[np.ndarray, np.ndarray], k: int = 4, candidates: int = 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best-margin candidates in both directions from two searches' results.

    fwd = (sims [n, c'], ids [n, c']) of x searched against y, bwd = (sims [m, c'], ids [m, c']) of y against x, each
    with at least max(k, candidates) columns unless the searched side is smaller. Each search gives both its side's
    shortlist and its side's neighbourhood mean, so two searches do what two `margin_retrieve` calls do with four.
    Returns (x->y best ids [n], scores [n], y->x best ids [m], scores [m]).
    """
    _check_margin_args(k, candidates)
    mean_x = row_means(fwd[0], k)  # [n]
    mean_y = row_means(bwd[0], k)  # [m]
    fwd_ids, fwd_scores = margin_best(fwd[0], fwd[1], mean_x, mean_y, candidates)
    bwd_ids, bwd_scores = margin_best(bwd[0], bwd[1], mean_y, mean_x, candidates)
    return fwd_ids, fwd_scores, bwd_ids, bwd_scores


def margin_retrieve_both(
    x: np.ndarray, y: np.ndarray, k: int = 4, candidates: int = 16, *, search: SearchFn = knn
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`margin_retrieve(x, y)` and `margin_retrieve(y, x)` at once, with one search per direction (same results for
    an exact search). Returns (x->y best ids [n], scores [n], y->x best ids [m], scores [m])."""
    xf = as_float32_matrix(x, "x")
    yf = as_float32_matrix(y, "y")
    _check_margin_args(k, candidates)
    depth = max(k, candidates)
    return margin_both_ways(search(xf, yf, depth), search(yf, xf, depth), k, candidates)
