"""The mining task of ``benchmarks/mining_scale.py``: its synthetic stand-in for sentence embeddings, and the encoding
of a task through the embedding cache. The pool built from real data, the size-N tasks taken as its prefixes and their
composition are library code: :mod:`mlse.evaluation.mining_pool`.

A helper module of that benchmark (no ``main``), split from it to keep each file short.
"""

from __future__ import annotations

import time

import numpy as np

from mlse.evaluation.index import l2_normalize
from mlse.evaluation.mining import MiningSplit
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


# -- encoding ---------------------------------------------------------------------------------------------------------


def encode_task(encoder, task: MiningSplit, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray, dict]:
    """src [N, d] and tgt [N, d] embeddings through the on-disk cache, timed; counts say what the cache served.

    Encoded in chunks because each chunk lands in the cache when done: an interrupted 100k run keeps its work.
    """
    texts = task.src + task.tgt
    before = dict(encoder.stats)
    t0 = time.perf_counter()
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(encoder.encode(texts[start : start + chunk], batch_size=64, show_progress=False))
        print(f"  encoded {min(start + chunk, len(texts)):,} / {len(texts):,} texts "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    emb = np.concatenate(parts).astype(np.float32)  # [2N, d]
    encoded = encoder.stats["encoded"] - before["encoded"]
    served = encoder.stats["served"] - before["served"]
    info = {"encode_s": seconds, "texts": len(texts), "encoded": encoded, "served_from_cache": served,
            "from_cache": encoded == 0,
            "cold_sentences_per_s": encoded / seconds if encoded > 0.5 * len(texts) else None}  # fmt: skip
    n = len(task.src)
    return emb[:n], emb[n:], info
