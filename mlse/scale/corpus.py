"""The texts a scale job embeds or mines: one sentence per line (TXT), a Parquet file (its ``text`` / ``sentence``
column), or a table (TSV, CSV, JSONL: the one user-file reader's rules, streamed by
:func:`mlse.data.table_stream.scan_table`).

A corpus is never held whole: :func:`scan_corpus` streams it once, keeping where each shard of ``shard_rows`` texts
lies, the bad rows and the sha256; :func:`read_span` reads a shard back (on Ray, from the same path on every node).
Bad rows are counted and listed, never fatal; kept texts get ids 0, 1, 2 ... in file order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from mlse.data import table_stream
from mlse.data.hashing import file_sha256
from mlse.data.user_files import ROLE_NAMES
from mlse.errors import DataError, MlseError

CORPUS_FORMATS = ("txt", "tsv", "csv", "jsonl", "parquet")
MAX_LISTED = 20  # bad rows listed by message; all of them are counted
_BY_SUFFIX = {".txt": "txt", ".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
_BOM = b"\xef\xbb\xbf"


@dataclass
class CorpusScan:
    """What one streaming pass learned: ``rows`` kept texts, where each shard of ``shard_rows`` of them lies
    (``spans``: [start, end) bytes of TXT or rows of Parquet; a table's in ``table``), the bad rows, ``sha256``."""

    path: Path
    format: str
    shard_rows: int
    rows: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    n_bad: int = 0
    sha256: str = ""
    column: str | None = None  # Parquet: the text column
    table: table_stream.ChunkedTable | None = None  # TSV / CSV / JSONL: where each shard's rows start

    @property
    def name(self) -> str:
        return self.path.name

    def refuse(self, message: str) -> None:
        self.n_bad += 1
        if len(self.bad) < MAX_LISTED:
            self.bad.append(message)

    def keep(self, at: int) -> None:
        """Count a kept text that starts at ``at`` (a byte offset or a row); every ``shard_rows``-th starts a shard."""
        if self.rows % self.shard_rows == 0:
            self.spans.append((at, -1))
        self.rows += 1

    def end_spans(self, end: int) -> None:
        """Each shard ends where the next starts, the last one at ``end``."""
        starts = [start for start, _ in self.spans]
        self.spans = list(zip(starts, starts[1:] + [end]))

    def locator(self, index: int) -> tuple:
        """What a worker needs to read shard ``index`` (:func:`read_span`): where it lies in the file."""
        if self.table is not None:
            return ("table", self.table.locator(index))
        start, end = self.spans[index]
        return (self.format, str(self.path), start, end, self.column)

    def shard_texts(self, index: int) -> list[str]:
        return read_span(self.locator(index))


def scan_corpus(path: str | Path, *, format: str | None = None, shard_rows: int = 10_000) -> CorpusScan:  # noqa: A002
    """One streaming pass over ``path`` (format from ``format`` or the suffix; an unknown suffix is read as TXT)."""
    path = Path(path)
    if not path.is_file():
        raise MlseError(f"{path}: no such file")
    if shard_rows < 1:
        raise MlseError(f"rows per shard must be a positive integer, got {shard_rows}")
    if format is not None and format not in CORPUS_FORMATS:
        raise MlseError(f"unknown corpus format {format!r}; choose from {', '.join(CORPUS_FORMATS)}")
    scan = CorpusScan(path, format or _BY_SUFFIX.get(path.suffix.lower(), "txt"), shard_rows)
    {"txt": _scan_txt, "parquet": _scan_parquet}.get(scan.format, _scan_table)(scan)
    return scan


def _txt_text(raw: bytes, name: str, number: int, refuse) -> str | None:
    """The text of one TXT line (its line break removed), or None after ``refuse(message)``."""
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        refuse(f"{name}:{number}: not valid UTF-8 (byte {exc.start + 1})")
        return None
    if not text.strip():
        refuse(f"{name}:{number}: empty line")
        return None
    return text


def _scan_txt(scan: CorpusScan) -> None:
    digest = hashlib.sha256()
    offset = 0
    with open(scan.path, "rb") as fh:  # a binary file iterates on "\n" only: U+0085 and U+2028 stay inside lines
        for number, raw in enumerate(fh, start=1):
            digest.update(raw)
            line = raw[len(_BOM) :] if number == 1 and raw.startswith(_BOM) else raw
            if _txt_text(line, scan.name, number, scan.refuse) is not None:
                scan.keep(offset)
            offset += len(raw)
    scan.sha256 = digest.hexdigest()
    scan.end_spans(offset)


def _parquet_column(path: Path, names: list[str]) -> str:
    lower = {n.lower(): n for n in names}
    column = next((lower[n] for n in ROLE_NAMES["sentence"] if n in lower), None)
    if column is None:
        raise MlseError(f"{path.name}: no text column; name it one of {', '.join(ROLE_NAMES['sentence'])}")
    return column


def _parquet_text(value, name: str, column: str, number: int, refuse) -> str | None:
    if not isinstance(value, str) or not value.strip():
        refuse(f"{name}:row {number}: column {column!r}: " + ("null" if value is None else "empty"))
        return None
    return value


def _scan_parquet(scan: CorpusScan) -> None:
    import pyarrow.parquet as pq  # lazy: only Parquet input needs Arrow

    try:
        source = pq.ParquetFile(scan.path)
        scan.column = _parquet_column(scan.path, source.schema_arrow.names)
        raw_row = 0
        for batch in source.iter_batches(columns=[scan.column], batch_size=65_536):
            for value in batch.column(0).to_pylist():
                raw_row += 1
                if _parquet_text(value, scan.name, scan.column, raw_row, scan.refuse) is not None:
                    scan.keep(raw_row - 1)
    except MlseError:
        raise
    except Exception as exc:  # noqa: BLE001 - Arrow raises many types for a file that is not Parquet
        raise MlseError(f"{scan.name}: cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    scan.end_spans(raw_row)
    scan.sha256 = file_sha256(scan.path)


def _scan_table(scan: CorpusScan) -> None:
    try:
        table = table_stream.scan_table(
            scan.path,
            kinds=("sentences",),
            format=scan.format,
            bad_rows="skip",
            name=scan.name,
            chunk_rows=scan.shard_rows,
        )
    except DataError as exc:
        raise MlseError(f"{exc} (a plain text file with one sentence per line is read with --format txt)") from None
    scan.table, scan.rows = table, len(table)
    scan.bad = [str(p) for p in table.skipped[:MAX_LISTED]]
    scan.n_bad = table.n_skipped
    scan.sha256 = file_sha256(scan.path)


def read_span(locator: tuple) -> list[str]:
    """The kept texts of one shard (a :meth:`CorpusScan.locator`), by the rules the scan applied."""
    kind = locator[0]
    if kind == "table":
        return list(table_stream.read_span(locator[1]).role("sentence") or [])
    _, path, start, end, column = locator
    path = Path(path)
    ignore = lambda _message: None  # noqa: E731 - the scan counted the bad rows already
    if kind == "txt":
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
        if start == 0 and data.startswith(_BOM):
            data = data[len(_BOM) :]
        lines = (_txt_text(raw, path.name, 0, ignore) for raw in data.split(b"\n"))
        return [text for text in lines if text is not None]
    import pyarrow.parquet as pq  # lazy: only Parquet input needs Arrow

    texts: list[str] = []
    source = pq.ParquetFile(path)
    first = 0
    for group in range(source.num_row_groups):
        rows = source.metadata.row_group(group).num_rows
        lo, hi = max(start, first), min(end, first + rows)
        if lo < hi:
            values = source.read_row_group(group, columns=[column]).column(0).slice(lo - first, hi - lo)
            texts += [v for v in values.to_pylist() if _parquet_text(v, path.name, column, 0, ignore) is not None]
        first += rows
    return texts
