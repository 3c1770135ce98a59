"""Exact nearest-neighbour search and the ratio margin of Artetxe & Schwenk (2019).

All functions take float32 matrices whose rows are L2-normalised, so an inner product is a cosine. Inputs are
validated and converted to contiguous float32 once, at the boundary. faiss is imported lazily inside `knn` so that
`import mlse.index` stays cheap (the app and the CLI import this module for its pure-numpy helpers too).

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

import numpy as np

# Rows of the [chunk, m] similarity block kept in memory at once by the numpy fallback (~64 MB of float32).
_NUMPY_BLOCK_ELEMENTS = 16_000_000


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


def _check_pair(queries: object, base: object, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate a (queries, base, k) triple; return float32 matrices and k clipped to the base size."""
    q = as_float32_matrix(queries, "queries")  # [n, d]
    b = as_float32_matrix(base, "base")  # [m, d]
    if q.shape[1] != b.shape[1]:
        raise ValueError(f"dimension mismatch: queries have d={q.shape[1]}, base has d={b.shape[1]}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
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


def neighbourhood_means(x: np.ndarray, y: np.ndarray, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine of each x_i to its k nearest y, and of each y_j to its k nearest x.

    Returns (mean_x_to_y [n] float32, mean_y_to_x [m] float32): the two halves of the ratio-margin denominator.
    k is clipped to the size of the searched side.
    """
    x_sims, _ = knn(x, y, k)  # [n, kx]
    y_sims, _ = knn(y, x, k)  # [m, ky]
    return x_sims.mean(axis=1, dtype=np.float32), y_sims.mean(axis=1, dtype=np.float32)


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
) -> np.ndarray:
    """Ratio-margin scores, for chosen pairs or (pairs=None) for the full [n, m] matrix.

    pairs: integer [p, 2] of (i, j) -> returns [p] float32. `means` lets callers reuse a precomputed
    `neighbourhood_means(x, y, k)` (it must match x, y and k).
    """
    xf = as_float32_matrix(x, "x")  # [n, d]
    yf = as_float32_matrix(y, "y")  # [m, d]
    if xf.shape[1] != yf.shape[1]:
        raise ValueError(f"dimension mismatch: x has d={xf.shape[1]}, y has d={yf.shape[1]}")
    mean_x, mean_y = neighbourhood_means(xf, yf, k) if means is None else means  # [n], [m]
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


def margin_retrieve(
    x: np.ndarray, y: np.ndarray, k: int = 4, candidates: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    """For each x_i, the y_j with the highest ratio margin among its `candidates` cosine nearest neighbours.

    This is LASER's two-step retrieval: cosine k-NN proposes candidates, the margin re-ranks them (a y outside the
    cosine shortlist is never returned). Returns (best_ids [n] int64, best_scores [n] float32).
    """
    xf = as_float32_matrix(x, "x")
    yf = as_float32_matrix(y, "y")
    if isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer)) or candidates < 1:
        raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    # One search serves both the candidate list and the x-side neighbourhood mean.
    sims, ids = knn(xf, yf, max(k, candidates))  # [n, c'] sorted decreasing
    kx = min(k, sims.shape[1])
    mean_x = sims[:, :kx].mean(axis=1, dtype=np.float32)  # [n]
    y_sims, _ = knn(yf, xf, k)  # [m, ky]
    mean_y = y_sims.mean(axis=1, dtype=np.float32)  # [m]
    c = min(candidates, sims.shape[1])
    cand_sims, cand_ids = sims[:, :c], ids[:, :c]  # [n, c]
    scores = cand_sims / ((mean_x[:, None] + mean_y[cand_ids]) / 2)  # [n, c]
    best = np.argmax(scores, axis=1)  # [n]
    rows = np.arange(xf.shape[0])
    return cand_ids[rows, best].astype(np.int64), scores[rows, best].astype(np.float32)
