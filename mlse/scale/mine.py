"""``mine``: bitext mining between two corpora, LASER's ratio margin (``mine_bitexts.py --mode mine --retrieval
max``): each side's best candidate by ratio margin among its ``candidates`` cosine neighbours (margin neighbourhood
``k``), forward and backward, union, greedy 1:1 -- :func:`mlse.evaluation.mining.mine_candidates`, run shard by shard
(:func:`mlse.scale.margin.mine_folders`).

Work (embeddings, searches) lives in ``OUT.work/``, resumed by a rerun and removed at the end. ``--index``: ``exact``
up to ``exact_max`` texts a side, else ``ivf-pq`` (or ``ivf``). Pairs scoring at least ``threshold`` are written
atomically as TSV ``score<TAB>source<TAB>target``, best first (tabs and line breaks in a text become spaces).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_stream
from mlse.data.scored_file import tsv_clean
from mlse.errors import MlseError
from mlse.scale.corpus import scan_corpus
from mlse.scale.embed import embed_corpus
from mlse.scale.engine import EngineOptions, note
from mlse.scale.margin import mine_folders
from mlse.scale.search import INDEX_KINDS, REFINE, IndexSpec

EXACT_MAX = 100_000  # texts per side searched exactly; an approximate index beyond
NPROBE = 64
APPROXIMATE = "ivf-pq"  # the index --index auto uses beyond EXACT_MAX
INDEX_CHOICES = ("auto", *INDEX_KINDS)


def pick_index(kind: str, n_src: int, n_tgt: int, exact_max: int) -> str:
    """The index ``--index kind`` means for sides of ``n_src`` and ``n_tgt`` texts."""
    if kind not in INDEX_CHOICES:
        raise MlseError(f"unknown index {kind!r}; choose from {', '.join(INDEX_CHOICES)}")
    if kind != "auto":
        return kind
    return "exact" if max(n_src, n_tgt) <= exact_max else APPROXIMATE


def texts_by_id(path: Path, format: str | None, shard_rows: int, wanted: np.ndarray) -> dict[int, str]:  # noqa: A002
    """{id: text} for the ``wanted`` ids of a corpus, read shard by shard (only the shards that hold one)."""
    scan = scan_corpus(path, format=format, shard_rows=shard_rows)
    wanted = np.unique(wanted)
    out: dict[int, str] = {}
    for index in np.unique(wanted // shard_rows).tolist():
        texts = scan.shard_texts(index)
        lo = index * shard_rows
        for i in wanted[(wanted >= lo) & (wanted < lo + len(texts))].tolist():
            out[i] = texts[i - lo]
    return out


def mine_files(
    src: str | Path,
    tgt: str | Path,
    model: str,
    out: str | Path,
    *,
    backend: str = "torch",
    k: int = 4,
    candidates: int = 16,
    threshold: float | None = None,
    index: str = "auto",
    exact_max: int = EXACT_MAX,
    nprobe: int = NPROBE,
    refine: int = REFINE,
    shard_rows: int = 10_000,
    batch_tokens: int | None = None,
    format: str | None = None,  # noqa: A002 - the option's name
    options: EngineOptions = EngineOptions(),
    keep_work: bool = False,
) -> dict:
    """Mine ``src`` against ``tgt`` with ``model``; write the TSV ``out``; returns a summary."""
    out = Path(out)
    if out.is_dir():
        raise MlseError(f"--out {out}: is a folder, expected a file name such as mined.tsv")
    if k < 1 or candidates < 1:
        raise MlseError(f"-k and --candidates must be positive integers, got {k} and {candidates}")
    pick_index(index, 0, 0, exact_max)  # an unknown --index is refused before any work
    work = out.with_name(out.name + ".work")
    manifests = {}
    for side, path in (("src", src), ("tgt", tgt)):
        note(f"{side}: {path}")
        manifests[side] = embed_corpus(
            path,
            model,
            work / side,
            backend=backend,
            dtype="fp32",
            shard_format="npy",
            shard_rows=shard_rows,
            batch_tokens=batch_tokens,
            format=format,
            resume=True,
            options=options,
            what=f"{work / side} (the work folder of --out)",
        )
    n_src, n_tgt = manifests["src"]["rows_total"], manifests["tgt"]["rows_total"]
    kind = pick_index(index, n_src, n_tgt, exact_max)
    spec = IndexSpec(kind, nprobe=nprobe, refine=refine)
    note(f"mining {n_src:,} x {n_tgt:,} ({'exact' if kind == 'exact' else f'{kind}, nprobe {nprobe}'} search)")
    mined = mine_folders(
        work / "src", work / "tgt", work, index=spec, k=k, candidates=min(candidates, n_src, n_tgt), options=options
    )
    keep = np.ones(len(mined.score), dtype=bool) if threshold is None else mined.score >= threshold
    src_ids, tgt_ids, scores = mined.src[keep], mined.tgt[keep], mined.score[keep]
    src_text = texts_by_id(Path(src), format, shard_rows, src_ids)
    tgt_text = texts_by_id(Path(tgt), format, shard_rows, tgt_ids)

    def fill(stream_out) -> None:
        for i, j, score in zip(src_ids.tolist(), tgt_ids.tolist(), scores.tolist()):
            stream_out.write(f"{score:.6f}\t{tsv_clean(src_text[i])}\t{tsv_clean(tgt_text[j])}\n")

    atomic_write_stream(out, fill, text=True)
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "pairs": int(keep.sum()),
        "candidates": len(mined.score),
        "search": kind,
        "src_rows": n_src,
        "tgt_rows": n_tgt,
        "model_identity": manifests["src"].get("model_identity"),
        "bad_rows": manifests["src"].get("bad_rows", 0) + manifests["tgt"].get("bad_rows", 0),
        "seconds": mined.seconds,
    }
