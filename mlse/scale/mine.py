"""``mine``: bitext mining between two corpora, LASER's ratio margin (``mine_bitexts.py --mode mine --retrieval
max``) through :func:`mlse.evaluation.mining.mine_candidates`: each side's best candidate by ratio margin among its
``candidates`` cosine neighbours (margin neighbourhood ``k``), forward and backward, union, greedy 1:1.

Both corpora are embedded by the ``embed`` pipeline into a work folder beside the output (``OUT.work/src``,
``OUT.work/tgt``: fp32 shards, resumed when the same command runs again, removed at the end). The neighbour search is
exact (faiss ``IndexFlatIP``) while both sides hold at most ``exact_max`` texts (:data:`EXACT_MAX`: at 100k per side
exact search took 229 s on 2 cores against 97 s for IVF with nprobe 64, 0.4 F1 points less; docs/speed.md, "Bitext
mining at scale"), else faiss IVF (``nlist`` about 4 * sqrt(n), ``nprobe`` lists visited). Pairs scoring at least
``threshold`` are written as TSV ``score<TAB>source<TAB>target``, best first (a tab or line break inside a text
becomes a space), in one atomic write.
"""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.errors import MlseError
from mlse.evaluation.index import knn, make_search
from mlse.evaluation.mining import mine_candidates
from mlse.scale.corpus import read_corpus
from mlse.scale.embed import embed_corpus, load_embeddings
from mlse.scale.engine import EngineOptions

EXACT_MAX = 100_000  # texts per side searched exactly; IVF beyond
NPROBE = 64


def work_folder(out: Path) -> Path:
    return out.with_name(out.name + ".work")


def clean(text: str) -> str:
    return text.replace("\t", " ").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


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
    exact_max: int = EXACT_MAX,
    nprobe: int = NPROBE,
    shard_rows: int = 10_000,
    batch_tokens: int | None = None,
    format: str | None = None,  # noqa: A002 - the option's name
    options: EngineOptions = EngineOptions(),
    keep_work: bool = False,
    stream=None,
) -> dict:
    """Mine ``src`` against ``tgt`` with ``model``; write the TSV ``out``; returns a summary."""
    stream = stream if stream is not None else sys.stderr
    out = Path(out)
    if out.is_dir():
        raise MlseError(f"--out {out}: is a folder, expected a file name such as mined.tsv")
    if k < 1 or candidates < 1:
        raise MlseError(f"-k and --candidates must be positive integers, got {k} and {candidates}")
    work = work_folder(out)
    sides = {}
    for side, path in (("src", src), ("tgt", tgt)):
        print(f"{side}: {path}", file=stream, flush=True)
        manifest = embed_corpus(
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
            stream=stream,
            what=f"{work / side} (the work folder of --out)",
        )
        sides[side] = (manifest, load_embeddings(work / side)[1])
    src_texts = read_corpus(src, format=format).texts
    tgt_texts = read_corpus(tgt, format=format).texts
    src_emb, tgt_emb = sides["src"][1], sides["tgt"][1]
    exact = max(len(src_emb), len(tgt_emb)) <= exact_max
    search = knn if exact else make_search("ivf", nprobe=nprobe)
    print(
        f"mining {len(src_emb):,} x {len(tgt_emb):,} ({'exact' if exact else f'IVF, nprobe {nprobe}'} search)",
        file=stream,
        flush=True,
    )
    mined = mine_candidates(
        src_emb, tgt_emb, k=k, candidates=min(candidates, len(src_emb), len(tgt_emb)), search=search
    )
    kept = [m for m in mined if threshold is None or m[2] >= threshold]
    buffer = io.StringIO()
    for i, j, score in kept:
        buffer.write(f"{score:.6f}\t{clean(src_texts[i])}\t{clean(tgt_texts[j])}\n")
    atomic_write_text(out, buffer.getvalue())
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "pairs": len(kept),
        "candidates": len(mined),
        "search": "exact" if exact else "ivf",
        "src_rows": len(src_emb),
        "tgt_rows": len(tgt_emb),
        "model_identity": sides["src"][0].get("model_identity"),
        "bad_rows": sides["src"][0].get("bad_rows", 0) + sides["tgt"][0].get("bad_rows", 0),
    }
