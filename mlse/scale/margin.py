"""LASER's ratio-margin mining over two folders of embedding shards, without holding either side's vectors whole.

The steps of :func:`mlse.evaluation.mining.mine_candidates`, cut by shard:

1. **search**, both ways (:mod:`mlse.scale.search`): each query shard's ``depth`` = max(k, candidates) neighbours
   are written as a shard of the work folder and marked done, so a killed job resumes where it stopped;
2. **margin**: each side's mean of its first ``k`` similarities, then each query's best candidate by ratio margin
   (:func:`mlse.evaluation.margin.margin_best`);
3. **1:1 selection**: both directions' proposals, best score first (ties by source, then target id), accepted
   greedily so each sentence is used once (:func:`mlse.evaluation.mining.select_pairs`).

Memory: this process holds a few numbers per row and one result shard (or the index while building it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlse.errors import MlseError
from mlse.evaluation.margin import margin_best, row_means
from mlse.evaluation.mining import select_pairs
from mlse.scale.embed import complete_manifest, embedding_shards
from mlse.scale.engine import EngineOptions, Workers, note, run_chunks
from mlse.scale.search import IndexSpec, build_index, save_index
from mlse.scale.shards import ShardFolder
from mlse.scale.work import WorkSpec, peak_rss_mib


@dataclass
class Mined:
    """Mined pairs (``src`` ids, ``tgt`` ids, ratio-margin ``score``; best first), the index used, and what it cost:
    ``seconds`` per step (build, search, margin, select), the workers, this process's peak memory (MiB)."""

    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray
    index: IndexSpec
    seconds: dict = field(default_factory=dict)
    workers: list = field(default_factory=list)
    peak_rss_mib: float = 0.0


def _shard_means(sims: np.ndarray, k: int) -> np.ndarray:
    """:func:`mlse.evaluation.margin.row_means` of one shard, NaN for a row with nothing found (filled globally)."""
    means = row_means(sims, k)
    means[~np.isfinite(sims[:, :k]).any(axis=1)] = np.nan
    return means


def _side_means(folder: ShardFolder, k: int) -> np.ndarray:
    means = np.concatenate([_shard_means(folder.read(i)["sims"], k) for i in range(len(folder.manifest["planned"]))])
    empty = np.isnan(means)
    if empty.any():  # no neighbour found at all: the mean of the other rows, a neutral denominator (as row_means)
        means[empty] = means[~empty].mean() if (~empty).any() else 1.0
    return means


def _search(
    queries: Path,
    base: Path,
    work: Path,
    name: str,
    spec: IndexSpec,
    depth: int,
    options: EngineOptions,
    workers: Workers,
    seconds: dict,
) -> ShardFolder:
    """Every query shard's ``depth`` nearest neighbours in an index over ``base``, as shards of ``work/name``."""
    q_manifest, b_manifest = complete_manifest(queries), complete_manifest(base)
    q_shards, b_shards = embedding_shards(queries), embedding_shards(base)
    job = {
        "command": "search",
        "queries": q_manifest["job_id"],
        "base": b_manifest["job_id"],
        "index": spec.__dict__,
        "depth": depth,
    }
    folder = ShardFolder(work / name, job, shard_format="npy", resume=True, what=f"{work / name}")
    folder.open([(lo, hi) for _, lo, hi in q_shards], {"rows_base": b_manifest["rows_total"]})
    todo = [i for i in range(len(q_shards)) if not folder.done(i)]
    if not todo:
        return folder
    index_file = work / f"{name}-{folder.id}.faiss"
    if not index_file.is_file():
        started = time.perf_counter()
        note(f"{name}: indexing {b_manifest['rows_total']:,} rows ({spec.kind})")
        save_index(build_index(b_shards, spec), index_file)  # the index is dropped once saved
        seconds["build"] = seconds.get("build", 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    n = q_manifest["rows_total"]
    note(f"{name}: searching {n:,} rows in {len(todo)} shard(s)")
    work_spec = WorkSpec("search", index=str(index_file), depth=depth, nprobe=spec.nprobe)
    pending = [(i, str(q_shards[i][0])) for i in todo]
    for i, result in run_chunks(work_spec, pending, options, rows=n, workers=workers):
        lo, hi = q_shards[i][1:]
        if len(result["ids"]) != hi - lo:
            raise MlseError(f"{name}: shard {i} gave {len(result['ids'])} rows, expected {hi - lo}")
        folder.write(i, result)
    seconds["search"] = seconds.get("search", 0.0) + time.perf_counter() - started
    folder.finish()
    return folder


def mine_folders(
    src: str | Path,
    tgt: str | Path,
    work: str | Path,
    *,
    index: IndexSpec,
    k: int = 4,
    candidates: int = 16,
    options: EngineOptions = EngineOptions(),
) -> Mined:
    """Mine the complete ``embed`` folders ``src`` against ``tgt`` (search results kept in ``work``)."""
    if k < 1 or candidates < 1:
        raise MlseError(f"-k and --candidates must be positive integers, got {k} and {candidates}")
    src, tgt, work = Path(src), Path(tgt), Path(work)
    seconds: dict[str, float] = {}
    workers = Workers()
    depth = max(k, candidates)
    fwd = _search(src, tgt, work, "fwd", index, depth, options, workers, seconds)
    bwd = _search(tgt, src, work, "bwd", index, depth, options, workers, seconds)
    started = time.perf_counter()
    mean_src, mean_tgt = _side_means(fwd, k), _side_means(bwd, k)
    best = {}
    for name, folder, mean_q, mean_b in (("fwd", fwd, mean_src, mean_tgt), ("bwd", bwd, mean_tgt, mean_src)):
        found = []  # (best ids, best scores) of each query shard
        for i, (lo, hi) in enumerate(folder.manifest["planned"]):
            part = folder.read(i)
            found.append(margin_best(part["sims"], part["ids"], mean_q[lo:hi], mean_b, candidates))
        best[name] = tuple(np.concatenate(column) for column in zip(*found))
    seconds["margin"] = time.perf_counter() - started
    started = time.perf_counter()
    pairs = select_pairs(*best["fwd"], *best["bwd"])
    seconds["select"] = time.perf_counter() - started
    return Mined(*pairs, index=index, seconds=seconds, workers=workers.summary(), peak_rss_mib=peak_rss_mib())
