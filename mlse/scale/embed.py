"""``embed``: a corpus of texts -> sharded embeddings with an ``id`` column and a manifest, resumable.

Workers read and encode shards of ``shard_rows`` texts; this process writes each atomically
(:class:`mlse.scale.shards.ShardFolder`) and forgets it. A shard holds ``id`` (int64) and ``embedding`` ([rows, d],
unit rows, fp32 or fp16). With ``resume=True`` a killed job encodes only the shards not done.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from mlse.encoders.progress import ProgressLog as Progress
from mlse.errors import MlseError
from mlse.runs.folders import read_json_dict
from mlse.scale.corpus import scan_corpus
from mlse.scale.engine import EngineOptions, Workers, note, run_chunks
from mlse.scale.shards import MANIFEST, ShardFolder, plan_chunks, read_shard_file
from mlse.scale.work import WorkSpec

DTYPES = {"fp32": np.float32, "fp16": np.float16}
DEFAULT_SHARD_ROWS = 10_000


def report_bad_rows(listed: list, n_bad: int, kept: int, stream) -> None:
    """Each ``listed`` bad row, then the count of all ``n_bad``, on ``stream`` (the reader's ``file:line: why``
    messages)."""
    for message in listed:
        print(f"skipped {message}", file=stream)
    if n_bad > len(listed):
        print(f"skipped {n_bad - len(listed):,} more rows (only the first {len(listed)} are listed)", file=stream)
    if n_bad:
        print(f"{n_bad:,} bad row(s) skipped, {kept:,} kept", file=stream, flush=True)


def embed_corpus(
    corpus_path: str | Path,
    model: str,
    out: str | Path,
    *,
    backend: str = "torch",
    dtype: str = "fp32",
    shard_format: str = "parquet",
    shard_rows: int = DEFAULT_SHARD_ROWS,
    batch_tokens: int | None = None,
    format: str | None = None,  # noqa: A002 - the option's name
    resume: bool = False,
    options: EngineOptions = EngineOptions(),
    what: str | None = None,
) -> dict:
    """Embed every text of ``corpus_path`` with ``model`` into the folder ``out``; returns the manifest."""
    if dtype not in DTYPES:
        raise MlseError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    corpus_path = Path(corpus_path)
    corpus = scan_corpus(corpus_path, format=format, shard_rows=shard_rows)
    report_bad_rows(corpus.bad, corpus.n_bad, corpus.rows, sys.stderr)
    if not corpus.rows:
        raise MlseError(f"{corpus_path.name}: no text to embed ({corpus.n_bad:,} bad rows)")
    job = {
        "command": "embed",
        "input": corpus_path.name,
        "input_sha256": corpus.sha256,
        "input_format": corpus.format,
        "model": model,
        "backend": backend,
        "dtype": dtype,
        "shard_rows": shard_rows,
        "batch_tokens": batch_tokens,
    }
    planned = plan_chunks(corpus.rows, shard_rows)
    folder = ShardFolder(out, job, shard_format=shard_format, resume=resume, what=what or f"--out {out}")
    engine = options.resolve(corpus.rows)
    info = {"model": model, "backend": backend, "dtype": dtype, "input": str(corpus_path), "engine": engine}
    folder.open(planned, info | {"bad_rows": corpus.n_bad, "bad_rows_listed": corpus.bad})
    todo = [i for i in range(len(planned)) if not folder.done(i)]
    if not todo and folder.manifest.get("complete"):  # finished before: its record (progress, workers) stays
        return folder.manifest
    if len(todo) < len(planned):
        note(f"resuming {folder.id}: {len(planned) - len(todo)} of {len(planned)} shards already done")
    note(
        f"embedding {corpus.rows:,} texts with {model} ({backend}, {engine} engine) into {len(planned)} "
        f"shard(s) of {shard_rows:,}"
    )
    progress = Progress("embed", corpus.rows, folder.rows_done)
    spec = WorkSpec("embed", (model,), backend, batch_tokens)
    workers = Workers(check=lambda identities: check_identity(folder, identities[model]))
    pending = ((i, corpus.locator(i)) for i in todo)  # where each shard lies: the workers read the texts
    for index, result in run_chunks(spec, pending, options, rows=corpus.rows, workers=workers):
        lo, hi = planned[index]
        emb = result["embedding"]
        if len(emb) != hi - lo:
            raise MlseError(f"{corpus_path.name}: shard {index} gave {len(emb)} rows, expected {hi - lo}")
        if "dim" not in folder.manifest:
            folder.update(dim=int(emb.shape[1]))
        folder.manifest["workers"] = workers.summary()
        folder.write(index, {"id": np.arange(lo, hi, dtype=np.int64), "embedding": emb.astype(DTYPES[dtype])})
        progress.update(folder.rows_done)
    progress.close()
    return folder.finish(workers=workers.summary())


def check_identity(folder: ShardFolder, identity: str) -> None:
    """Record the model's identity; refuse to continue a job whose shards came from other weights."""
    recorded = folder.manifest.get("model_identity")
    if recorded is None:
        folder.update(model_identity=identity)
    elif recorded != identity:
        raise MlseError(
            f"{folder.what}: its shards were computed by {recorded}, but the model now loads as {identity}; "
            "use another folder"
        )


def complete_manifest(folder: str | Path) -> dict:
    """The manifest of a complete ``embed`` folder (MlseError if there is none, or the job has not finished)."""
    manifest = read_json_dict(Path(folder) / MANIFEST)
    if not manifest.get("complete"):
        raise MlseError(f"{folder}: not a complete embed folder (no manifest, or the job has not finished)")
    return manifest


def embedding_shards(folder: str | Path) -> list[tuple[Path, int, int]]:
    """(shard file, first id, end id) of every shard of a complete ``embed`` folder, in id order."""
    manifest = complete_manifest(folder)
    shards = sorted(manifest["shards"].values(), key=lambda e: e["lo"])
    return [(Path(folder) / e["file"], int(e["lo"]), int(e["hi"])) for e in shards]


def load_embeddings(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(ids [n] int64, embeddings [n, d] float32) of a complete ``embed`` folder, in id order: all of it in memory
    (the pipelines read :func:`embedding_shards` one at a time)."""
    parts = [read_shard_file(path) for path, _, _ in embedding_shards(folder)]
    ids = np.concatenate([p["id"] for p in parts])
    emb = np.concatenate([p["embedding"] for p in parts]).astype(np.float32)
    order = np.argsort(ids, kind="stable")
    return ids[order], emb[order]
