"""The ratio margin of Artetxe & Schwenk (2019): scores, neighbourhood means, and margin-based retrieval.

Ratio margin (Artetxe & Schwenk 2019, Eq. ratio; also Reimers & Gurevych 2020 for BUCC):

    score(x_i, y_j) = cos(x_i, y_j) / ( mean_{z in NN_k(x_i) among y} cos(x_i, z) / 2
                                        + mean_{z in NN_k(y_j) among x} cos(y_j, z) / 2 )

The denominator penalises "hub" targets close to everything. k is clipped to the searched set's size; the
denominator is assumed positive (a non-positive one yields inf / negative scores, as the formula says).
"""

from __future__ import annotations

import numpy as np

from mlse.evaluation.index import SearchFn, as_float32_matrix, check_positive_int, knn


def row_means(sims: np.ndarray, k: int) -> np.ndarray:
    """Mean of the first k found similarities per row [n] -> the ratio-margin neighbourhood term.

    Empty slots (-inf) are skipped; a row with none found takes the mean of the other rows (a neutral denominator).
    """
    head = sims[:, :k]  # [n, k']
    found = np.isfinite(head)  # [n, k']
    if found.all():
        return head.mean(axis=1, dtype=np.float32)  # the exact-search path
    counts = found.sum(axis=1)  # [n]
    means = np.where(found, head, 0.0).sum(axis=1, dtype=np.float32) / np.maximum(counts, 1)  # [n]
    if (counts == 0).any():
        means[counts == 0] = means[counts > 0].mean() if (counts > 0).any() else 1.0
    return means.astype(np.float32)


def neighbourhood_means(
    x: np.ndarray, y: np.ndarray, k: int = 4, *, search: SearchFn = knn
) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine of each x_i to its k nearest y, and of each y_j to its k nearest x.

    Returns (mean_x_to_y [n] float32, mean_y_to_x [m] float32), the halves of the ratio-margin denominator.
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


def margin_best(
    sims: np.ndarray, ids: np.ndarray, mean_q: np.ndarray, mean_b: np.ndarray, candidates: int
) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank each query's first `candidates` neighbours by ratio margin; keep the best.

    sims, ids [n, c'] of queries against base; mean_q [n], mean_b [m]: neighbourhood means. Returns (best_ids [n]
    int64, best_scores [n] float32); an empty shortlist gives id -1 and score -inf.
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
    check_positive_int(candidates, "candidates")
    check_positive_int(k, "k")


def margin_retrieve(
    x: np.ndarray, y: np.ndarray, k: int = 4, candidates: int = 16, *, search: SearchFn = knn
) -> tuple[np.ndarray, np.ndarray]:
    """For each x_i, the y_j with the highest ratio margin among its `candidates` cosine nearest neighbours.

    LASER's two-step retrieval: cosine k-NN proposes, the margin re-ranks. Returns (best_ids [n] int64, best_scores
    [n] float32); a query with an empty shortlist (approximate `search`) gets id -1 and score -inf.
    """
    xf = as_float32_matrix(x, "x")
    yf = as_float32_matrix(y, "y")
    _check_margin_args(k, candidates)
    # one search serves both the candidate list and the x-side neighbourhood mean
    sims, ids = search(xf, yf, max(k, candidates))  # [n, c'] sorted decreasing
    y_sims, _ = search(yf, xf, k)  # [m, k']: the second search, for the y-side neighbourhood mean
    return margin_best(sims, ids, row_means(sims, k), row_means(y_sims, k), candidates)


def margin_both_ways(
    fwd: tuple[np.ndarray, np.ndarray], bwd: tuple[np.ndarray, np.ndarray], k: int = 4, candidates: int = 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best-margin candidates in both directions from two searches' results.

    fwd = (sims [n, c'], ids [n, c']) of x searched against y, bwd likewise of y against x, each with max(k,
    candidates) columns unless the searched side is smaller; each gives both a shortlist and a neighbourhood mean.
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
