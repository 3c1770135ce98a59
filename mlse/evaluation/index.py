"""Nearest-neighbour search (exact, IVF, HNSW) for the evaluation metrics.

Rows are L2-normalised float32, so an inner product is a cosine; inputs are validated once, at the boundary. faiss
is imported lazily so that importing this module stays cheap.

Search functions share one signature, `search(queries [n, d], base [m, d], k) -> (sims [n, k], ids [n, k])`, rows
sorted by decreasing similarity: `knn` (faiss.IndexFlatIP), `knn_numpy` (the test oracle), `knn_ivf` and `knn_hnsw`.
An approximate index may leave slots unfilled: id -1, sim -inf (the margin functions skip them).
"""

from __future__ import annotations

import functools
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


def check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_pair(queries: object, base: object, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate a (queries, base, k) triple; return float32 matrices and k clipped to the base size."""
    q = as_float32_matrix(queries, "queries")  # [n, d]
    b = as_float32_matrix(base, "base")  # [m, d]
    if q.shape[1] != b.shape[1]:
        raise ValueError(f"dimension mismatch: queries have d={q.shape[1]}, base has d={b.shape[1]}")
    check_positive_int(k, "k")
    if b.shape[0] == 0:
        raise ValueError("base is empty: nothing to search")
    return q, b, int(min(k, b.shape[0]))


def knn(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact k-nearest neighbours by inner product with faiss.IndexFlatIP: (sims [n, k] float32, ids [n, k] int64),
    each row sorted by decreasing similarity; k is clipped to len(base)."""
    q, b, k = _check_pair(queries, base, k)
    import faiss  # lazy: keeps `import mlse.evaluation.index` cheap

    index = faiss.IndexFlatIP(b.shape[1])
    index.add(b)
    return search_index(index, q, k)  # [n, k], [n, k]


def knn_numpy(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force twin of `knn` (same contract): the test oracle and a fallback without faiss.
    Block-wise over queries; ties go to the smaller base id."""
    q, b, k = _check_pair(queries, base, k)
    n, m = q.shape[0], b.shape[0]
    out_sims = np.empty((n, k), dtype=np.float32)
    out_ids = np.empty((n, k), dtype=np.int64)
    block = max(1, _NUMPY_BLOCK_ELEMENTS // m)
    for start in range(0, n, block):
        sims = q[start : start + block] @ b.T  # [r, m]
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]  # [r, k] unordered
        top_sims = np.take_along_axis(sims, top, axis=1)  # [r, k]
        # by (-sim, id): lexsort's last key is the primary one
        order = np.lexsort((top, -top_sims), axis=1)  # [r, k]
        out_ids[start : start + block] = np.take_along_axis(top, order, axis=1)
        out_sims[start : start + block] = np.take_along_axis(top_sims, order, axis=1)
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

    k-means is seeded, so the index is reproducible.
    """
    b = as_float32_matrix(base, "base")  # [m, d]
    nlist = check_positive_int(nlist, "nlist")
    if nlist > b.shape[0]:
        raise ValueError(f"nlist={nlist} exceeds the {b.shape[0]} base vectors (k-means needs a point per list)")
    import faiss  # lazy: only a search needs faiss

    quantizer = faiss.IndexFlatIP(b.shape[1])
    index = faiss.IndexIVFFlat(quantizer, b.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    # silences faiss' warning below 39 points per list: small bases are legitimate here and their recall is measured
    index.cp.min_points_per_centroid = 1
    index.train(b)
    index.add(b)
    return index  # the wrapper keeps the quantizer alive


def build_hnsw(base: np.ndarray, m: int = 32, ef_construction: int = 80) -> Any:
    """faiss.IndexHNSWFlat (inner product) over `base` [m, d], `m` links per node, `ef_construction` build beam."""
    b = as_float32_matrix(base, "base")  # [m, d]
    m = check_positive_int(m, "m")
    ef_construction = check_positive_int(ef_construction, "ef_construction")
    if b.shape[0] == 0:
        raise ValueError("base is empty: nothing to search")
    import faiss  # lazy: only a search needs faiss

    index = faiss.IndexHNSWFlat(b.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(b)
    return index


def search_index(
    index: Any, queries: np.ndarray, k: int, *, nprobe: int | None = None, ef_search: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Search a built faiss index (from `build_ivf` / `build_hnsw`); same return contract as `knn`.

    nprobe (IVF lists visited, clipped to nlist) and ef_search (HNSW beam) are set on the index before searching, so
    one built index serves a whole parameter sweep.
    """
    q = as_float32_matrix(queries, "queries")  # [n, d]
    if q.shape[1] != index.d:
        raise ValueError(f"dimension mismatch: queries have d={q.shape[1]}, index has d={index.d}")
    k = check_positive_int(k, "k")
    if index.ntotal == 0:
        raise ValueError("base is empty: nothing to search")
    k = min(k, int(index.ntotal))
    if nprobe is not None:
        if not hasattr(index, "nprobe"):
            raise ValueError("nprobe applies to an IVF index only")
        index.nprobe = min(check_positive_int(nprobe, "nprobe"), int(index.nlist))
    if ef_search is not None:
        if not hasattr(index, "hnsw"):
            raise ValueError("ef_search applies to an HNSW index only")
        index.hnsw.efSearch = check_positive_int(ef_search, "ef_search")
    if q.shape[0] == 0:
        return np.zeros((0, k), dtype=np.float32), np.zeros((0, k), dtype=np.int64)
    return _clean_results(*index.search(q, k))  # [n, k], [n, k]


def knn_ivf(
    queries: np.ndarray, base: np.ndarray, k: int, nlist: int | None = None, nprobe: int = 8, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate k-NN with an IVF index built on `base` (nlist None -> `default_nlist`); contract of `knn`.
    nprobe == nlist visits every list, which makes the search exact."""
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
    functions = {  # name -> (function, the parameters it takes)
        "exact": (knn, ()),
        "numpy": (knn_numpy, ()),
        "ivf": (knn_ivf, ("nlist", "nprobe", "seed")),
        "hnsw": (knn_hnsw, ("m", "ef_search", "ef_construction")),
    }
    if method not in functions:
        raise ValueError(f"unknown search method {method!r}; choose from {', '.join(functions)}")
    fn, allowed = functions[method]
    unknown = set(params) - set(allowed)
    if unknown:
        raise ValueError(f"search method {method!r} takes no parameter(s) {', '.join(sorted(unknown))}")
    return functools.partial(fn, **params)


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Mean over queries of |approx top-k  &  exact top-k| / k, both [n, k] id arrays (k = exact_ids.shape[1]).

    Ids of -1 never count. On tied similarities recall can fall short of 1.0 even for a correct search.
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
    # [n, k, k] comparison, chunked over queries to bound memory
    hits = 0
    for start in range(0, a.shape[0], 65536):
        blk_a, blk_e = a[start : start + 65536], e[start : start + 65536]
        match = (blk_e[:, :, None] == blk_a[:, None, :]) & (blk_a[:, None, :] >= 0)  # [r, k, k]
        hits += int(match.any(axis=2).sum())
    return hits / e.size
