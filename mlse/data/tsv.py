"""User-supplied pairs files for ``eval --pairs-file`` and scripts: thin wrappers over the one user-file reader
(:func:`mlse.data.user_files.read_table`), whose messages name the file as the caller gave it (the user will open it
in an editor to fix it).
"""

from __future__ import annotations

import os
from pathlib import Path

from mlse.data.types import ParallelCorpus, ScoredPairs
from mlse.data.user_files import read_pairs, read_table
from mlse.errors import DataError


def load_scored_tsv(path: str | os.PathLike[str], name: str | None = None) -> ScoredPairs:
    """Rated pairs (sentence1, sentence2, score) from a TSV, CSV or JSONL file, with or without a header.

    Blank lines are skipped; each row needs two non-empty sentences and a finite score (any scale). A file without a
    score column is refused."""
    p = Path(path)
    pairs = read_pairs(p, name=str(p)).to_scored_pairs()
    pairs.name = name or p.stem
    pairs.sources = [p]
    return pairs


def load_parallel_tsv(path: str | os.PathLike[str], src_lang: str = "src", tgt_lang: str = "tgt") -> ParallelCorpus:
    """``source<TAB>target`` lines (blank lines skipped; no header) into a ParallelCorpus."""
    p = Path(path)
    table = read_table(p, kind="parallel", format="tsv", header=False, name=str(p))
    if len(table.languages) != 2:
        raise DataError(
            f"{p}:{table.lines[0]}: expected 2 tab-separated fields (source, target), found {len(table.languages)}"
        )
    corpus = table.to_parallel()
    return ParallelCorpus(corpus.src, corpus.tgt, src_lang=src_lang, tgt_lang=tgt_lang, name=p.stem, sources=[p])
