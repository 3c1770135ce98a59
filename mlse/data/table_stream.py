"""A user's table read in chunks: :func:`mlse.data.user_files.read_table` with ``chunk_rows``, for files too large to
hold (the ``score`` command at scale).

Same parser and row checks as a whole read. :func:`scan_table` streams the file once: settles the layout, checks
every row, and keeps where each chunk of ``chunk_rows`` kept rows starts (byte offset, line number);
:meth:`ChunkedTable.read` reads a chunk back in any process (:meth:`ChunkedTable.locator` is picklable). Whatever a
whole read refuses, the scan refuses with the same message: before any work, never midway.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlse.data.io import open_binary
from mlse.data.records import check_size, guess_format, line_records, refuse_binary, refuse_json_array, refuse_nul
from mlse.data.user_table import RowProblem, UserTable
from mlse.data.user_table_builder import TableBuilder
from mlse.errors import DataError

HEAD_RECORDS = 52  # the header and 51 rows: all that TableBuilder.decide looks at (it reads 50 rows for the roles)
GUESS_LINES = 20  # lines the format is guessed from, as a whole read does
_BOM = b"\xef\xbb\xbf"


class FileLines:
    """The decoded lines (each ending in "\\n") of a file opened in binary, from byte ``offset`` (line ``line``),
    split on "\\n" only; ``offset`` and ``line`` then count the bytes and the lines given so far. A line that is not
    UTF-8 or holds a NUL byte is refused as a whole read refuses the file."""

    def __init__(self, fh, label: str, offset: int = 0, line: int = 1):
        self.fh, self.label = fh, label
        self.offset = offset  # the end of the last line given
        self.line = line - 1  # the number of the last line given

    def __iter__(self) -> Iterator[str]:
        for raw in self.fh:
            start = self.offset
            self.offset += len(raw)
            self.line += 1
            bom = len(_BOM) if start == 0 and raw.startswith(_BOM) else 0
            refuse_nul(raw, self.label)
            try:
                text = raw[bom:].decode("utf-8")
            except UnicodeDecodeError as exc:
                at = start + bom + exc.start
                raise DataError(
                    f"{self.label}:{self.line}: not valid UTF-8 (byte offset {at}); save the file as UTF-8"
                ) from None
            yield text if text.endswith("\n") else text + "\n"


@dataclass(frozen=True)
class TableLayout:
    """What every chunk of one table is read by: the file, its format, and what the scan settled (the columns, the
    header, the kind, the roles: :meth:`TableBuilder.layout`)."""

    path: str
    label: str
    format: str
    kinds: tuple[str, ...]
    settled: dict
    gold_range: tuple[float, float] | None = None

    def builder(self) -> TableBuilder:
        """A builder that skips bad rows silently (the scan counted them) and reads rows as the scan did."""
        builder = TableBuilder(self.label, self.format, self.kinds, None, self.gold_range, "skip", None)
        return builder.settle(self.settled)


@dataclass
class ChunkedTable:
    """A user's table scanned once and read back in chunks of ``chunk_rows`` kept rows (the last one shorter):
    ``len()`` kept rows, ``spans[c]`` where chunk ``c`` starts, refused rows (first 50 in ``skipped``, all counted in
    ``n_skipped``). :meth:`read` gives one chunk as a :class:`UserTable` whose ``lines`` are the file's."""

    layout: TableLayout
    chunk_rows: int
    rows: int
    spans: list[tuple[int, int]]
    skipped: list[RowProblem]
    n_skipped: int

    def __len__(self) -> int:
        return self.rows

    @property
    def roles(self) -> dict[str, str]:
        return dict(self.layout.settled["roles"])

    @property
    def n_chunks(self) -> int:
        return len(self.spans)

    def locator(self, index: int) -> tuple:
        """What :func:`read_span` needs to read chunk ``index`` (small: where it starts, how many rows)."""
        offset, line = self.spans[index]
        return ("table", self.layout, offset, line, min(self.chunk_rows, self.rows - index * self.chunk_rows))

    def read(self, index: int) -> UserTable:
        return read_span(self.locator(index))

    def chunks(self) -> Iterator[UserTable]:
        return map(self.read, range(self.n_chunks))


def _format(path: Path, label: str, kinds: tuple[str, ...]) -> str:
    """The format a whole read would guess: by the suffix, else from the first lines."""
    with open_binary(path, label) as fh:
        refuse_binary(fh.read(8), label)
        fh.seek(0)
        head: list[str] = []
        for line in FileLines(fh, label):
            head.append(line)
            if len(head) >= GUESS_LINES and any(x.strip() for x in head):
                break
    return guess_format("".join(head), path.suffix.lower(), kinds)


def scan_table(
    path,
    *,
    name: str | None = None,
    format: str | None = None,  # noqa: A002 - the reader's word
    kinds: Sequence[str] = ("pairs",),
    header: bool | None = None,
    gold_range: tuple[float, float] | None = None,
    bad_rows: str = "raise",
    chunk_rows: int,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> ChunkedTable:
    """One streaming pass over the table at ``path`` (the options as :func:`mlse.data.user_files.read_table`'s)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows}")
    path, kinds = Path(path), tuple(kinds)
    label = name or path.name
    if path.is_file():
        check_size(path.stat().st_size, label, max_bytes)
    fmt = format or _format(path, label, kinds)
    builder = TableBuilder(label, fmt, kinds, header, gold_range, bad_rows, max_rows)
    columns = _jsonl_columns(path, label, builder) if fmt == "jsonl" else None
    with open_binary(path, label) as fh:
        refuse_binary(fh.read(8), label)
        fh.seek(0)
        lines = FileLines(fh, label)
        # each record with where the file stands just after it: (record, byte offset, lines read)
        records = ((record, lines.offset, lines.line) for record in line_records(lines, fmt, label))
        head = list(itertools.islice(records, HEAD_RECORDS))
        body = builder.decide([record for record, _, _ in head], columns)
        titled = len(body) < len(head)  # the first record was a header (a JSONL file's columns are its keys)
        ends = [(offset, line) for _, offset, line in head[1 if titled else 0 :]]
        start = (head[0][1], head[0][2] + 1) if titled else (0, 1)
        first = ((record, *end) for record, end in zip(body, ends))
        rest = ((builder.body_record(record), offset, line) for record, offset, line in records)
        spans = [start]
        for (line, fields), offset, lines_read in itertools.chain(first, rest):
            if builder.accept(line, fields) and builder.kept % chunk_rows == 0:
                spans.append((offset, lines_read + 1))
    builder.require_rows(builder.kept)
    if builder.kept % chunk_rows == 0:
        spans.pop()  # the span after the last row starts no chunk
    # an absolute path: a worker process (a Ray actor) may run in another folder
    layout = TableLayout(os.path.abspath(path), label, fmt, kinds, builder.layout(), gold_range)
    return ChunkedTable(layout, chunk_rows, builder.kept, spans, list(builder.skipped), builder.n_skipped)


def _jsonl_columns(path: Path, label: str, builder: TableBuilder) -> list[str]:
    """A JSONL table's columns: the keys of all its objects (one pass; only the keys are kept). A file that opens
    like a JSON array is read whole here, to refuse it as a whole read does."""
    with open_binary(path, label) as fh:
        lines = FileLines(fh, label)
        first = next((line for line in lines if line.strip()), "")
        if first.lstrip().startswith("["):
            fh.seek(0)
            refuse_json_array("".join(FileLines(fh, label)), label)
        fh.seek(0)
        return builder.jsonl_keys(line_records(FileLines(fh, label), "jsonl", label))


def read_span(locator: tuple) -> UserTable:
    """The rows of one chunk (a :meth:`ChunkedTable.locator`), read from where it starts, by the scan's rules."""
    _, layout, offset, line, count = locator
    builder = layout.builder()
    rows: list[list[str]] = []
    numbers: list[int] = []
    if count:
        with open_binary(Path(layout.path), layout.label) as fh:
            fh.seek(offset)
            lines = FileLines(fh, layout.label, offset, line)
            for record in line_records(lines, layout.format, layout.label, first_line=line):
                number, fields = builder.body_record(record)
                if builder.accept(number, fields):
                    rows.append(fields)
                    numbers.append(number)
                    if len(rows) == count:
                        break
    if len(rows) != count:
        raise DataError(f"{layout.label}: changed while it was being read (run the command again)")
    return builder.table(rows, numbers, skipped=False)  # the scan counted the refused rows
