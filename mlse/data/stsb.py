"""STS Multi MT: the STS benchmark machine-translated into 10 languages (plus the English original).

Row *i* is the same sentence pair in every language file, which is what makes cross-lingual pairs
possible: pair A-B is (A.sentence1[i], B.sentence2[i], score[i]).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from mlse.data.layout import STS_DIR, STS_LANGS, STS_SPLITS
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.data.types import ScoredPairs
from mlse.errors import DataError
from mlse.memo import MB, bytes_memoized

MIN_SCORE, MAX_SCORE = 0.0, 5.0


def sts_file(lang: str, split: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of one language/split CSV (validates both names)."""
    lang, split = _check(lang, STS_LANGS), _check(split, STS_SPLITS, "STS split")
    return require_subdir(resolve_data_dir(data_dir), STS_DIR) / f"stsb-{lang}-{split}.csv"


def load_sts(pair: str, split: str = "test", data_dir: str | os.PathLike[str] | None = None) -> ScoredPairs:
    """Load an STS Multi MT pair: ``"en-de"`` (en sentence1 with de sentence2) or ``"en"`` (= en-en).

    The returned name is ``"stsb_multi_mt/{split}/{a}-{b}"``; scores are 0-5. Both files must have the same
    row count and identical scores row by row (else their rows are not the same pairs): DataError."""
    lang_a, lang_b = _parse_pair(pair)
    path_a, path_b = sts_file(lang_a, split, data_dir), sts_file(lang_b, split, data_dir)
    s1_a, _, scores_a = _read_sts(path_a)
    _, s2_b, scores_b = _read_sts(path_b)  # cached: no second parse when a == b
    if len(s1_a) != len(s2_b):
        raise DataError(f"STS files are not row-aligned: {path_a} has {len(s1_a)} rows, {path_b} has {len(s2_b)} rows")
    differs = np.flatnonzero(~np.isclose(scores_a, scores_b, rtol=0.0, atol=1e-6))
    if differs.size:
        row = int(differs[0])
        raise DataError(
            f"STS files are not row-aligned: score differs on row {row + 1} "
            f"({path_a}: {scores_a[row]}, {path_b}: {scores_b[row]}; {differs.size} rows differ)"
        )
    sources = [path_a] if path_a == path_b else [path_a, path_b]
    name = f"{STS_DIR}/{split}/{lang_a}-{lang_b}"
    return ScoredPairs(list(s1_a), list(s2_b), scores_a.copy(), name=name, sources=sources)


def read_sts_file(path: str | os.PathLike[str]) -> tuple[list[str], list[str], np.ndarray]:
    """Parse one STS Multi MT CSV into (sentence1, sentence2, scores); cached per path and mtime."""
    s1, s2, scores = _read_sts(Path(path))
    return list(s1), list(s2), scores.copy()


def _check(value: str, allowed: tuple[str, ...], what: str = "STS Multi MT language") -> str:
    """``value`` stripped and lower-cased when it is one of ``allowed``, else a DataError naming ``what`` it is."""
    code = value.strip().lower()
    if code not in allowed:
        raise DataError(f"unknown {what} {value!r}; available: {', '.join(allowed)}")
    return code


def _parse_pair(pair: str) -> tuple[str, str]:
    parts = pair.strip().split("-")
    if len(parts) in (1, 2):
        return _check(parts[0], STS_LANGS), _check(parts[-1], STS_LANGS)
    raise DataError(f"STS pair {pair!r} must look like 'en-de' or 'en'; languages: {', '.join(STS_LANGS)}")


def _read_sts(path: Path) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    return _parse_sts_cached(str(path), st.st_mtime_ns, st.st_size)


# One language file serves up to 21 pairs (en-de, de-en, de-fr, ...): parse it once per process, mtime and size.
@bytes_memoized("stsb.files", 64 * MB)
def _parse_sts_cached(path_str: str, mtime_ns: int, size: int) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    import pandas as pd  # deferred: keeps `import mlse.data` light

    path = Path(path_str)
    try:
        df = pd.read_csv(
            path,
            header=None,
            keep_default_na=False,  # "NA", "null" etc. are real sentences here
            dtype=str,
            index_col=False,  # never let an extra field silently become an index
            encoding="utf-8",
        )
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: file is empty") from None
    except pd.errors.ParserError:
        raise _field_count_error(path) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 ({exc.reason})") from None
    # A wrong first row shows in the shape; shorter later rows come back as "" (or NaN), caught below.
    if df.shape[1] != 3 or df.isna().to_numpy().any():
        raise _field_count_error(path)
    scores = pd.to_numeric(df[2].str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        # With keep_default_na=False a short row reads as an empty score: report the real problem.
        short = _field_count_problem(path)
        if short is not None:
            raise short
        line = _records(path)[int(bad[0])][0]
        raise DataError(f"{path}:{line}: expected a numeric score in the 3rd field, got {df[2].iloc[bad[0]]!r}")
    out_of_range = np.flatnonzero((scores < MIN_SCORE) | (scores > MAX_SCORE))
    if out_of_range.size:
        row = int(out_of_range[0])
        line = _records(path)[row][0]
        raise DataError(f"{path}:{line}: score {scores[row]:g} is outside {MIN_SCORE:g}..{MAX_SCORE:g}")
    arr = scores.astype(np.float32)
    arr.setflags(write=False)  # shared through the cache: callers get copies
    return tuple(df[0].tolist()), tuple(df[1].tolist()), arr


def _records(path: Path) -> list[tuple[int, int]]:
    """(1-based starting line, field count) of each non-blank CSV record (pandas skips blank lines too), for error
    messages: a quoted field may span lines, so row index + 1 is not enough."""
    records: list[tuple[int, int]] = []
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        previous_end = 0
        for record in reader:
            if record:
                records.append((previous_end + 1, len(record)))
            previous_end = reader.line_num
    return records


def _field_count_error(path: Path) -> DataError:
    return _field_count_problem(path) or DataError(
        f"{path}: malformed CSV, expected 3 fields per row (sentence1,sentence2,score)"
    )


def _field_count_problem(path: Path) -> DataError | None:
    """The first record without exactly 3 fields, as an error naming its line, or None."""
    for line, fields in _records(path):
        if fields != 3:
            return DataError(
                f"{path}:{line}: expected 3 comma-separated fields (sentence1,sentence2,score), found {fields}"
            )
    return None
