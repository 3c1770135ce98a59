"""``score --engine ray``: the columns :func:`mlse.api.score_pairs` gives, with the encoding done by an engine.

An embedding depends in its last bits on its batch, so this module plans what the local ``score``'s cache would encode
per chunk (:func:`mlse.scale.pairs.plan_fresh`, one bit a text); workers encode exactly those texts, and this process
takes the chunks in order, puts the new vectors in the cache, reads the others back (fp32) and scores with
:func:`mlse.encoders.protocol.similarity`: the scored file is byte-identical. It holds a few chunks and the plan, never
the table. A model without an embedding cache (a Stage-2 scorer) is scored whole chunks on the workers, equal only to
float precision. Finished chunks are kept in ``OUT.parts`` so a rerun encodes only the rest. See docs/scale.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from mlse import api
from mlse.encoders.cache import CachedEncoder, text_key
from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.models import load_model
from mlse.scale.engine import EngineOptions, Workers, note, run_chunks
from mlse.scale.pairs import PairSource, fresh_texts, plan_fresh
from mlse.scale.shards import ShardFolder
from mlse.scale.work import WorkSpec


def parts_folder(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def remove_parts(parts: Path | None) -> None:
    """Drop the parts folder once the scored file is written."""
    if parts is not None and parts.is_dir():
        shutil.rmtree(parts, ignore_errors=True)


def cached_encoder(model) -> CachedEncoder | None:
    """The embedding cache inside ``model`` (a calibrated backbone wraps one), or None."""
    for _ in range(4):
        if isinstance(model, CachedEncoder):
            return model
        model = getattr(model, "inner", None)
    return None


def chunk_vectors(cache: CachedEncoder, texts: list[str], fresh: list[str], emb) -> dict[str, np.ndarray]:
    """{text: vector} for one chunk, as the local engine's cache gives them: ``fresh`` (encoded for this chunk, put in
    the cache here) with ``emb``, the others read from the cache (fp32: the same bytes)."""
    store = cache.store(True)
    if fresh:
        store.put_many([text_key(t) for t in fresh], emb)
    vectors = dict(zip(fresh, emb)) if fresh else {}
    rest = [t for t in dict.fromkeys(texts) if t not in vectors]
    keys = [text_key(t) for t in rest]
    found = store.get_many(keys)
    for t, key in zip(rest, keys):
        if key not in found:
            raise MlseError(
                f"the embedding cache {store.path} lost a text this run counted on (another process cleared it?); "
                "run the same command again"
            )
        vectors[t] = found[key]
    return vectors


def score_on_engine(
    models: list[str],
    pairs: PairSource,
    *,
    backend: str,
    options: EngineOptions,
    job: dict,
    parts: Path | None,
    batch_tokens: int | None = None,
    progress=None,
    emit,
) -> None:
    """Score every pair of ``pairs`` (a :class:`~mlse.scale.pairs.PairSource`, in chunks of its ``chunk_rows``):
    ``emit(index, chunk, columns)`` for each chunk in order (``columns`` as :func:`mlse.api.score_pairs` gives them),
    then ``progress(done, total)``. ``parts`` (None: nothing kept) holds the finished chunks."""
    n, names = pairs.rows, list(dict.fromkeys(models))
    planned = pairs.planned()
    loaded = {name: load_model(name, backend=backend) for name in names}  # weights load on first encode only
    caches = {name: cached_encoder(model) for name, model in loaded.items()}
    exact = all(c is not None for c in caches.values()) and batch_tokens is None
    folder = None
    if parts is not None:
        folder = ShardFolder(parts, job | {"exact": exact}, shard_format="npy", resume=True, what=f"{parts}")
        folder.open(planned, {"models": names, "backend": backend})
    identities = {name: model.identity for name, model in loaded.items()}

    def identity(found: dict[str, str]) -> None:
        for name, ident in found.items():
            if identities[name] != ident:
                raise MlseError(f"{name}: a worker loads {ident}, this machine {identities[name]}: other weights")

    if exact:
        plan = plan_fresh({name: cache.store(True) for name, cache in caches.items()}, pairs)
        spec = WorkSpec("encode", tuple(names), backend)
    else:
        spec = WorkSpec("score", tuple(names), backend, batch_tokens)

    def payload(c: int):
        where = pairs.locator(c)  # where the chunk lies: the worker reads its pairs
        return {"pairs": where, "fresh": {name: plan[name][c] for name in names}} if exact else where

    keys = {f"m{i}": name for i, name in enumerate(names)}  # shard column names (a model name may hold a "/")

    def stored(c: int) -> dict:
        part = folder.read(c)
        if exact:  # (texts, vectors): the texts that run encoded (the cache may hold some of them by now)
            return {keys[k]: ([str(t) for t in part[f"{k}_texts"]], v) for k, v in part.items() if k in keys}
        return {str(k): part[f"c{i}"] for i, k in enumerate(part["names"])}

    done_before = {c for c in range(len(planned)) if folder is not None and folder.done(c)}
    results: dict[int, tuple] = {}  # finished chunks (their pairs, their result) waiting for the ones before them
    done = following = 0  # pairs emitted; the next chunk to emit

    def take_ready() -> None:
        nonlocal done, following
        while following < len(planned) and (following in results or following in done_before):
            c = following
            chunk, result = results.pop(c) if c in results else (pairs.read(c), stored(c))
            columns: dict[str, np.ndarray] = {} if exact else dict(result)
            for name in names if exact else ():
                fresh, emb = result.get(name, ([], None))
                vectors = chunk_vectors(caches[name], [*chunk.s1, *chunk.s2], fresh, emb)

                def lookup(_model, texts, vectors=vectors):
                    return np.stack([vectors[t] for t in texts])

                cos, cal = similarity(loaded[name], chunk.s1, chunk.s2, encode=lookup)
                columns[api.column_name(name, api.COSINE)] = cos
                if cal is not None:
                    columns[api.column_name(name, api.CALIBRATED)] = cal
            emit(c, chunk, api.ordered_columns(names, columns))
            done += len(chunk.s1)
            if progress is not None:
                progress(done, n)
            following += 1

    workers = Workers(check=identity)
    pending = ((c, payload(c)) for c in range(len(planned)) if c not in done_before)
    for c, result in run_chunks(spec, pending, options, rows=n, workers=workers):
        chunk = pairs.read(c)
        if exact:  # the texts this chunk encoded, as the plan marks them (the worker read the same chunk)
            result = {name: (fresh_texts(chunk, plan[name][c]), emb) for name, emb in result.items()}
        if folder is not None:
            if exact:
                named = {k: result[name][1] for k, name in keys.items() if name in result}
                named |= {f"{k}_texts": np.array(result[name][0]) for k, name in keys.items() if name in result}
            else:
                named = {"names": np.array(list(result))} | {f"c{i}": v for i, v in enumerate(result.values())}
            folder.write(c, named or {"empty": np.zeros(0)}, rows=planned[c][1] - planned[c][0])
        results[c] = (chunk, result)
        take_ready()
    take_ready()
    if following < len(planned):
        raise MlseError(f"score: chunk {following} of {len(planned)} never finished")
    for line in workers.lines("score"):
        note(line)
