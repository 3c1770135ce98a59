"""User-supplied tab-separated files, so people can evaluate on their own pairs.

Errors say ``file:line: expected ...`` because the user will open the file in an editor to fix it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from mlse.data.io import read_lines
from mlse.data.types import ParallelCorpus, ScoredPairs
from mlse.errors import DataError


def load_scored_tsv(path: str | os.PathLike[str], name: str | None = None) -> ScoredPairs:
    """Read ``s1<TAB>s2<TAB>score`` lines (blank lines skipped).

    The first line may be a header if its 3rd field is not a number. Scores are kept on their own
    scale (no 0-5 check): correlations do not care. Every line needs non-empty sentences and a
    finite numeric score.
    """
    p = Path(path)
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    header: str | None = None  # the 3rd field of a first line read as a header
    for lineno, line in enumerate(_lines(p), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataError(
                f"{p}:{lineno}: expected 3 tab-separated fields (sentence1, sentence2, score), found {len(fields)}"
            )
        score = _parse_float(fields[2])
        if score is None:
            if lineno == 1 and not _looks_numeric(fields[2]):
                header = fields[2]
                continue  # header line
            raise DataError(f"{p}:{lineno}: expected a finite numeric score in the 3rd field, got {fields[2]!r}"
                            + _decimal_comma_hint(fields[2]))
        if not fields[0].strip() or not fields[1].strip():
            raise DataError(f"{p}:{lineno}: expected two non-empty sentences")
        s1.append(fields[0])
        s2.append(fields[1])
        scores.append(score)
    if not s1:
        if header is not None:  # the only line(s) had a non-numeric score: say so rather than "empty"
            raise DataError(f"{p}:1: no scored pairs found: line 1 was read as a header because its score {header!r} "
                            "is not a number (expected lines of sentence1<TAB>sentence2<TAB>score)"
                            + _decimal_comma_hint(header))  # fmt: skip
        raise DataError(f"{p}: no scored pairs found (expected lines of sentence1<TAB>sentence2<TAB>score)")
    return ScoredPairs(s1=s1, s2=s2, scores=scores, name=name or p.stem, sources=[p])


def load_parallel_tsv(path: str | os.PathLike[str], src_lang: str = "src", tgt_lang: str = "tgt") -> ParallelCorpus:
    """Read ``src<TAB>tgt`` lines (blank lines skipped; no header) into a ParallelCorpus."""
    p = Path(path)
    src: list[str] = []
    tgt: list[str] = []
    for lineno, line in enumerate(_lines(p), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(f"{p}:{lineno}: expected 2 tab-separated fields (source, target), found {len(fields)}")
        if not fields[0].strip() or not fields[1].strip():
            raise DataError(f"{p}:{lineno}: expected two non-empty sentences")
        src.append(fields[0])
        tgt.append(fields[1])
    if not src:
        raise DataError(f"{p}: no sentence pairs found (expected lines of source<TAB>target)")
    return ParallelCorpus(src=src, tgt=tgt, src_lang=src_lang, tgt_lang=tgt_lang, name=p.stem, sources=[p])


def _lines(p: Path) -> list[str]:
    lines = read_lines(p)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # spreadsheet exports often start with a byte-order mark
    return lines


def _parse_float(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _decimal_comma_hint(text: str) -> str:
    """A hint when the score is a number written with a decimal comma (spreadsheets in many locales)."""
    return "; write decimals with a dot (3.5, not 3,5)" if _parse_float(text.replace(",", ".")) is not None else ""


def _looks_numeric(text: str) -> bool:
    """True for things float() accepts, including nan/inf: those are bad scores, not header names."""
    try:
        float(text.strip())
    except ValueError:
        return False
    return True
