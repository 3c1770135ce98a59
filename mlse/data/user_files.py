"""One reader for the files users bring: rated or unrated sentence pairs, labelled sentences, parallel columns.

Every tab, the ``score`` and ``eval --pairs-file`` commands and :func:`mlse.read_pairs` read users' data here, so a
file reads (and fails) the same everywhere. Formats (TSV, CSV, JSONL, pasted text) and kinds (:data:`KINDS`, their
column names): see docs/your-data.md. Lines split on ``"\\n"`` only (U+0085 and U+2028 occur inside real sentences).

**Header detection.** The first row is a header when a cell is a known column name, when every cell is a language
code, or when a 3-column pairs file has a non-numeric third cell over a number; ``header=True/False`` overrides
(unknown names are then kept, columns read by position).

**Problems.** One message each, naming the file (never a server path), line and column. A file unreadable as a table
(binary, not UTF-8, bad header, no rows, CSV quoting error, over ``max_rows`` / ``max_bytes``) is refused; a bad row
is refused with ``bad_rows="raise"`` (default), or skipped with ``"skip"`` and listed in :attr:`UserTable.skipped`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mlse.data.records import FORMATS, cell_text, decode, guess_format, parse_range, raw_input, text_records
from mlse.data.table_stream import ChunkedTable, scan_table
from mlse.data.user_table import ROLE_NAMES, RowProblem, UserTable
from mlse.data.user_table_builder import TableBuilder
from mlse.errors import DataError

__all__ = [
    "FORMATS",
    "KINDS",
    "ChunkedTable",
    "ROLE_NAMES",
    "RowProblem",
    "UserTable",
    "parse_range",
    "read_pairs",
    "read_rows",
    "read_table",
]

KINDS = ("pairs", "sentences", "parallel")


# -- the entry points -------------------------------------------------------------------------------------------------
def read_table(
    source: str | os.PathLike[str] | bytes | None = None,
    *,
    text: str | None = None,
    kind: str | Sequence[str] = "auto",
    name: str | None = None,
    format: str | None = None,  # noqa: A002 - the word users know
    header: bool | None = None,
    gold_range: tuple[float, float] | None = None,
    bad_rows: str = "raise",
    max_rows: int | None = None,
    max_bytes: int | None = None,
    chunk_rows: int | None = None,
) -> UserTable | ChunkedTable:
    """Read a user's table from a path, from ``bytes`` or from pasted ``text``.

    ``kind``: one of :data:`KINDS`, a list of acceptable kinds, or "auto" (any). ``name``: how messages name the
    input (a path's file name by default, "pasted text" for ``text``). ``gold_range``: (low, high) the scores must lie
    in. ``bad_rows``: "raise" or "skip". ``max_rows`` / ``max_bytes``: refuse larger inputs. Raises
    :class:`~mlse.errors.DataError` with one message for every problem.

    ``chunk_rows`` (a path only): the table is not held but scanned, streaming, and read back ``chunk_rows`` rows at a
    time (:class:`~mlse.data.table_stream.ChunkedTable`): the same rules and messages, every row checked up front.
    """
    kinds = _kinds(kind)
    if format is not None and format not in FORMATS:
        raise DataError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    if chunk_rows is not None:
        if source is None or isinstance(source, bytes | bytearray):
            raise ValueError("chunk_rows reads a file: give its path")
        options = {"header": header, "gold_range": gold_range, "bad_rows": bad_rows, "max_rows": max_rows}
        return scan_table(
            source, name=name, format=format, kinds=kinds, chunk_rows=chunk_rows, max_bytes=max_bytes, **options
        )
    raw, label, suffix = raw_input(source, text, name, max_bytes)
    content = decode(raw, label)
    fmt = format or guess_format(content, suffix, kinds)
    records = text_records(content, fmt, label)  # refused (a JSON array, a CSV quoting error) before the rows' checks
    return TableBuilder(label, fmt, kinds, header, gold_range, bad_rows, max_rows).build(records)


def read_pairs(source=None, **options) -> UserTable:
    """:func:`read_table` for sentence pairs (``sentence1``, ``sentence2``, optional ``score``)."""
    return read_table(source, kind="pairs", **options)


def read_rows(
    rows,
    *,
    columns: Sequence[str] | None = None,
    kind: str | Sequence[str] = "pairs",
    name: str = "rows",
    gold_range: tuple[float, float] | None = None,
    bad_rows: str = "raise",
    max_rows: int | None = None,
) -> UserTable:
    """Rows already split into cells (tuples, a DataFrame's rows) checked as a file's rows are.

    ``columns``: the columns' names (read as a header given with ``header=True``) or None (columns by position). Cells
    are kept as text (None and NaN as empty). Messages name row *i* (from 1) as line *i* of ``name``; nothing is joined
    or split, so a tab or a line break inside a sentence stays in it.
    """
    body = [(i, [cell_text(v) for v in row]) for i, row in enumerate(rows, start=1)]
    header = [(None, [cell_text(c) for c in columns])] if columns is not None else []
    builder = TableBuilder(name, "rows", _kinds(kind), columns is not None, gold_range, bad_rows, max_rows)
    return builder.build(header + body)


def _kinds(kind) -> tuple[str, ...]:
    kinds = KINDS if kind == "auto" else ((kind,) if isinstance(kind, str) else tuple(kind))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"kind must be 'auto' or among {KINDS}, got {kind!r}")
    return kinds
