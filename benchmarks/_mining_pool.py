"""The synthetic mining pool of ``benchmarks.mining_scale``: clustered vectors as a stand-in for sentence embeddings.
The pool built from real data, the size-N tasks taken as its prefixes and their composition are library code
(:mod:`mlse.evaluation.mining_pool`); the encoding of a task is in ``benchmarks._mining_encode``.

A helper module of that benchmark (no ``main``), split from it to keep each file short.
"""

from __future__ import annotations

import numpy as np

from mlse.evaluation.index import l2_normalize
from mlse.evaluation.mining_pool import MiningPool, gold_count


def synthetic_pool(
    n_max: int, gold_fraction: float, seed: int, d: int = 32
) -> tuple[MiningPool, np.ndarray, np.ndarray]:
    """Clustered unit vectors (topics) as a stand-in for sentence embeddings: gold targets are noisy copies of their
    sources. Returns the pool (items are row numbers) and the src [n_max, d] / tgt [n_max, d] matrices."""
    rng = np.random.default_rng(seed)
    g = gold_count(n_max, gold_fraction)
    centres = rng.standard_normal((max(4, n_max // 50), d))

    def clustered(n: int) -> np.ndarray:
        return centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))

    src = clustered(n_max)  # rows [0, g) are gold sources
    tgt = np.concatenate([src[:g] + 0.25 * rng.standard_normal((g, d)), clustered(n_max - g)])
    origin = {("src", i): "synthetic" for i in range(n_max)} | {("tgt", i): "synthetic" for i in range(n_max)}
    pool = MiningPool(
        gold=[(("src", i), ("tgt", i)) for i in range(g)],
        src_extra=[("src", i) for i in range(g, n_max)],
        tgt_extra=[("tgt", i) for i in range(g, n_max)],
        origin=origin,
        gold_lang=["synthetic"] * g,
    )
    return pool, l2_normalize(src), l2_normalize(tgt)
