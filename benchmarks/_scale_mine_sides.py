"""The two sides of ``benchmarks.scale_mine``'s task as folders of embedding shards (the format ``mlse embed`` writes
and ``mlse mine`` searches): the real part embedded by the ``embed`` pipeline, and the synthetic rows beyond it.

A helper module of that benchmark (no ``main``).

- :func:`real_task`: the task of ``benchmarks.mining_scale`` (:func:`mlse.evaluation.mining_pool.data_pool`): gold
  Tatoeba-Challenge X-English pairs (held out of every training set here: the pool draws them from the bitext's
  standard-script pairs, and no training recipe of this project mines from this pool) hidden among distractors from
  the local corpora, as many as they give;
- :func:`embed_side`: one side's texts written one a line and embedded by :func:`mlse.scale.embed.embed_corpus`;
- :func:`extend_side`: a folder of ``n`` rows: the real rows first (same ids, so the gold pairs keep theirs), then
  synthetic distractors: noisy copies of the side's real distractor embeddings (never of a gold sentence),
  ``normalize(e + g)`` with ``g ~ N(0, (noise / sqrt(d))^2 I)``, so ``|g|`` is about ``noise`` and a copy's cosine to
  its original about ``1 / sqrt(1 + noise^2)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlse.evaluation.mining_pool import data_pool, pool_composition, pool_task
from mlse.scale.embed import embed_corpus, embedding_shards
from mlse.scale.engine import EngineOptions
from mlse.scale.shards import ShardFolder, plan_chunks, read_shard_file


def real_task(n: int, gold_fraction: float, seed: int, data_dir=None):
    """(src texts, tgt texts, gold {(i, j)}, composition) of the size-``n`` real task."""
    pool = data_pool(n, gold_fraction, seed, data_dir)
    task = pool_task(pool, n, gold_fraction, seed)
    return task.src, task.tgt, task.gold, pool_composition(pool, task), sorted({str(p) for p in pool.sources})


def one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")  # one text a line: the ids stay the task's positions


def embed_side(texts: list[str], folder: Path, model: str, backend: str, shard_rows: int, options: EngineOptions):
    """Embed ``texts`` (one a line in ``folder``.txt) into ``folder``; resumed when run again. Returns the manifest."""
    corpus = folder.with_suffix(".txt")
    if not corpus.is_file():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        corpus.write_text("".join(one_line(t) + "\n" for t in texts), encoding="utf-8")
    manifest = embed_corpus(
        corpus, model, folder, backend=backend, shard_format="npy", shard_rows=shard_rows, resume=True, options=options
    )
    if manifest["rows_total"] != len(texts):
        raise SystemExit(f"{corpus}: {manifest['rows_total']} rows embedded, {len(texts)} texts written")
    return manifest


def quick_sides(n: int, gold: int, d: int, seed: int, folder: Path, shard_rows: int) -> tuple[Path, Path]:
    """--quick: two sides of ``n`` clustered unit vectors in ``d`` dimensions, rows ``i < gold`` a pair (the target a
    noisy copy of the source), as embed folders ``folder/src`` and ``folder/tgt``."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(4, n // 50), d))
    x = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))
    y = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))
    y[:gold] = x[:gold] + 0.25 * rng.standard_normal((gold, d))
    for name, m in (("src", x), ("tgt", y)):
        store = ShardFolder(folder / name, {"command": "synthetic", "side": name, "n": n, "d": d, "seed": seed})
        planned = plan_chunks(n, shard_rows)
        store.open(planned)
        m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
        for i, (lo, hi) in enumerate(planned):
            store.write(i, {"id": np.arange(lo, hi, dtype=np.int64), "embedding": m[lo:hi]})
        store.finish()
    return folder / "src", folder / "tgt"


def extend_side(real: Path, out: Path, n: int, gold_rows: set[int], noise: float, seed: int, shard_rows: int) -> Path:
    """A complete embed folder of ``n`` rows: ``real``'s rows, then noisy copies of its non-gold rows."""
    shards = embedding_shards(real)
    n_real = shards[-1][2]
    if n < n_real or n_real % shard_rows:
        raise SystemExit(f"extend_side: {n} rows from {n_real} real rows in shards of {shard_rows}")
    job = {"command": "scale_mine-extend", "real": str(real), "n": n, "noise": noise, "seed": seed}
    store = ShardFolder(out, job, shard_format="npy", resume=True, what=str(out))
    planned = plan_chunks(n, shard_rows)
    store.open(planned, {"rows_real": n_real, "noise": noise})
    if all(store.done(i) for i in range(len(planned))):
        return out
    real_emb = np.concatenate([read_shard_file(p)["embedding"] for p, _, _ in shards]).astype(np.float32)
    dim = real_emb.shape[1]
    distractors = np.setdiff1d(np.arange(n_real), np.fromiter(gold_rows, dtype=np.int64))
    for i, (lo, hi) in enumerate(planned):
        if store.done(i):
            continue
        if hi <= n_real:
            emb = real_emb[lo:hi]
        else:
            rng = np.random.default_rng([seed, i])
            emb = real_emb[rng.choice(distractors, hi - lo)]
            emb = emb + rng.standard_normal(emb.shape).astype(np.float32) * np.float32(noise / np.sqrt(dim))
            emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        store.write(i, {"id": np.arange(lo, hi, dtype=np.int64), "embedding": emb.astype(np.float32)})
    store.finish()
    return out
