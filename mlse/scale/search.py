"""Nearest-neighbour search over embedding shards, for ``mine``: an index built from one side's shards (read one at a
time), saved beside them, then searched shard by shard with the other side's shards as queries, by as many workers as
there are (:class:`mlse.scale.work.ChunkWorker`, kind ``search``); a worker holds the index and one query shard.

Index kinds (``IndexSpec.kind``), all inner product on unit vectors: ``exact`` (faiss ``IndexFlatIP``), ``ivf``
(``IndexIVFFlat``, ``nlist`` lists, ``nprobe`` visited) and ``ivf-pq`` (4-bit ``IndexIVFPQFastScan`` inside
``IndexRefine``: the ``refine`` x depth best are re-scored on fp16 copies, so only the shortlist is approximate).
Lists are trained on a seeded sample (reproducible). Results follow :mod:`mlse.evaluation.index`: ``sims`` [n, k]
float32 and ``ids`` [n, k] int64, best first, an empty slot id -1 and sim -inf.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_stream
from mlse.data.parallel import seeded_subset
from mlse.errors import MlseError
from mlse.evaluation.index import default_nlist, search_index
from mlse.scale.shards import read_shard_file

INDEX_KINDS = ("exact", "ivf", "ivf-pq")
TRAIN_PER_LIST = 40  # k-means points per list (faiss warns below 39)
# a large shortlist: 4-bit PQ codes rank close neighbours poorly on e5's narrow cone of vectors (docs/scale.md)
REFINE = 64


@dataclass(frozen=True)
class IndexSpec:
    """How to index one side: ``kind``, lists (``nlist``, None: about 4 * sqrt(n)), lists visited (``nprobe``), PQ
    shortlist factor (``refine``), training sample (``train_rows``, None: 40 a list), k-means ``niter``, ``seed``."""

    kind: str = "ivf-pq"
    nlist: int | None = None
    nprobe: int = 64
    refine: int = REFINE
    train_rows: int | None = None
    niter: int = 10
    seed: int = 0

    def __post_init__(self):
        if self.kind not in INDEX_KINDS:
            raise MlseError(f"unknown index {self.kind!r}; choose from {', '.join(INDEX_KINDS)}")
        for name in ("nprobe", "refine", "niter", "nlist"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise MlseError(f"--{name} must be a positive integer, got {value}")

    def lists(self, n: int) -> int:
        return max(1, min(n, self.nlist or default_nlist(n)))


def _empty_index(spec: IndexSpec, dim: int, n: int):
    import faiss  # lazy: only a search needs faiss

    if spec.kind == "exact":
        return faiss.IndexFlatIP(dim)
    quantizer = faiss.IndexFlatIP(dim)
    nlist = spec.lists(n)
    if spec.kind == "ivf":
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf = index
    else:
        if dim % 2:
            raise MlseError(f"--index ivf-pq needs an even embedding size, this model's is {dim}; use --index ivf")
        pq_m = dim // 4 if dim % 8 == 0 else dim // 2  # sub-vectors of 4 (or 2) dimensions, 4 bits each
        ivf = faiss.IndexIVFPQFastScan(quantizer, dim, nlist, pq_m, 4, faiss.METRIC_INNER_PRODUCT)
        fp16 = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        index = faiss.IndexRefine(ivf, fp16)  # faiss' Python wrapper keeps ivf and fp16 alive with it
        index.k_factor = float(spec.refine)
    ivf.cp.seed = spec.seed
    ivf.cp.niter = spec.niter
    ivf.cp.min_points_per_centroid = 1  # small bases are legitimate (tests); their recall is measured
    ivf.nprobe = min(spec.nprobe, nlist)
    return index


def _vectors(path: Path) -> np.ndarray:
    return np.ascontiguousarray(read_shard_file(path)["embedding"], dtype=np.float32)


def build_index(shards: list[tuple[Path, int, int]], spec: IndexSpec):
    """An index over the embedding shards ``(path, lo, hi)`` (rows lo..hi of the side, in id order, together every
    row once): trained on a seeded sample of rows, then filled shard by shard."""
    n = sum(hi - lo for _, lo, hi in shards)
    if n == 0:
        raise MlseError("nothing to index: the side has no rows")
    dim = int(_vectors(shards[0][0]).shape[1])
    index = _empty_index(spec, dim, n)
    if not index.is_trained:
        want = min(n, spec.train_rows or max(10_000, TRAIN_PER_LIST * spec.lists(n)))
        chosen = seeded_subset(n, want, spec.seed)
        sample = [_vectors(path)[chosen[(chosen >= lo) & (chosen < hi)] - lo] for path, lo, hi in shards]
        index.train(np.concatenate(sample))
        del sample
    for path, _, _ in shards:
        index.add(_vectors(path))
    return index


def save_index(index, path: Path) -> None:
    """``index`` written atomically to ``path`` (faiss' own format)."""
    import faiss  # lazy: only a search needs faiss

    atomic_write_stream(path, lambda fh: faiss.write_index(index, faiss.PyCallbackIOWriter(fh.write)))


def load_index(path: str | Path, *, nprobe: int | None = None, threads: int | None = None):
    """The index saved at ``path``; ``nprobe`` set on its lists (an IVF index), ``threads`` for faiss."""
    import faiss  # lazy: only a search needs faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    index = faiss.read_index(str(path))
    if nprobe is not None and not isinstance(index, faiss.IndexFlat):
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = min(nprobe, ivf.nlist)
    return index


def search_shard(index, path: str | Path, depth: int) -> dict[str, np.ndarray]:
    """The ``depth`` nearest neighbours in ``index`` of every row of the embedding shard at ``path``."""
    sims, ids = search_index(index, _vectors(Path(path)), depth)
    return {"sims": sims, "ids": ids}
