"""The encoding of ``benchmarks.mining_scale``'s task: both pools through the model's on-disk embedding cache, in
chunks, timed, with counts of what the cache served.

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

import time

import numpy as np

from mlse.evaluation.mining import MiningSplit


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
        print(
            f"  encoded {min(start + chunk, len(texts)):,} / {len(texts):,} texts ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    seconds = time.perf_counter() - t0
    emb = np.concatenate(parts).astype(np.float32)  # [2N, d]
    encoded = encoder.stats["encoded"] - before["encoded"]
    served = encoder.stats["served"] - before["served"]
    info = {
        "encode_s": seconds,
        "texts": len(texts),
        "encoded": encoded,
        "served_from_cache": served,
        "from_cache": encoded == 0,
        "cold_sentences_per_s": encoded / seconds if encoded > 0.5 * len(texts) else None,
    }
    n = len(task.src)
    return emb[:n], emb[n:], info
