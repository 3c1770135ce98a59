"""The texts a scale job embeds or mines: one sentence per line (TXT), a table (TSV, CSV, JSONL: the one user-file
reader, :func:`mlse.data.user_files.read_table`), or a Parquet file (its ``text`` / ``sentence`` column).

A bad row never stops the job midway: in a TXT file a line that is not UTF-8 or is empty (blank) is counted and
listed as ``file:line: why``; a table's ragged or empty rows are skipped by the reader with the same messages; a
Parquet row with a null or empty text is listed as ``file:row N``. Kept texts get ids 0, 1, 2 ... in file order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlse.data.user_files import ROLE_NAMES, read_table
from mlse.errors import DataError, MlseError

CORPUS_FORMATS = ("txt", "tsv", "csv", "jsonl", "parquet")
MAX_LISTED = 20  # bad rows listed by message; all of them are counted
_BY_SUFFIX = {".txt": "txt", ".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


@dataclass
class Corpus:
    """Kept texts in file order, and the rows refused (the first :data:`MAX_LISTED` by message, all counted)."""

    name: str
    format: str
    texts: list[str]
    bad: list[str] = field(default_factory=list)
    n_bad: int = 0

    def refuse(self, message: str) -> None:
        self.n_bad += 1
        if len(self.bad) < MAX_LISTED:
            self.bad.append(message)

    def report(self) -> dict:
        return {"rows": len(self.texts), "bad_rows": self.n_bad, "bad_rows_listed": list(self.bad)}


def corpus_format(path: Path, format: str | None) -> str:  # noqa: A002 - the option's name
    if format is not None:
        if format not in CORPUS_FORMATS:
            raise MlseError(f"unknown corpus format {format!r}; choose from {', '.join(CORPUS_FORMATS)}")
        return format
    return _BY_SUFFIX.get(path.suffix.lower(), "txt")


def read_corpus(path: str | Path, *, format: str | None = None) -> Corpus:  # noqa: A002 - the option's name
    """The texts of ``path`` (format from ``format`` or the suffix; an unknown suffix is read as TXT)."""
    path = Path(path)
    if not path.is_file():
        raise MlseError(f"{path}: no such file")
    fmt = corpus_format(path, format)
    if fmt == "txt":
        return _read_txt(path)
    if fmt == "parquet":
        return _read_parquet(path)
    return _read_table(path, fmt)


def _read_txt(path: Path) -> Corpus:
    corpus = Corpus(path.name, "txt", [])
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")  # "\n" only: U+0085 and U+2028 occur inside real sentences
    if lines and lines[-1] == b"":
        lines.pop()  # the file's final line break
    for number, raw in enumerate(lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            corpus.refuse(f"{path.name}:{number}: not valid UTF-8 (byte {exc.start + 1})")
            continue
        if not text.strip():
            corpus.refuse(f"{path.name}:{number}: empty line")
            continue
        corpus.texts.append(text)
    return corpus


def _read_table(path: Path, fmt: str) -> Corpus:
    try:
        table = read_table(path, kind="sentences", format=fmt, bad_rows="skip", name=path.name)
    except DataError as exc:
        raise MlseError(f"{exc} (a plain text file with one sentence per line is read with --format txt)") from None
    corpus = Corpus(path.name, fmt, list(table.role("sentence") or []))
    corpus.bad = [str(p) for p in table.skipped[:MAX_LISTED]]
    corpus.n_bad = table.n_skipped
    return corpus


def _read_parquet(path: Path) -> Corpus:
    import pyarrow.parquet as pq  # lazy: only Parquet input needs Arrow

    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - Arrow raises many types for a file that is not Parquet
        raise MlseError(f"{path.name}: cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    names = {n.lower(): n for n in table.column_names}
    column = next((names[n] for n in ROLE_NAMES["sentence"] if n in names), None)
    if column is None:
        raise MlseError(f"{path.name}: no text column; name it one of {', '.join(ROLE_NAMES['sentence'])}")
    corpus = Corpus(path.name, "parquet", [])
    for number, value in enumerate(table.column(column).to_pylist(), start=1):
        if not isinstance(value, str) or not value.strip():
            corpus.refuse(f"{path.name}:row {number}: column {column!r}: " + ("null" if value is None else "empty"))
            continue
        corpus.texts.append(value)
    return corpus
