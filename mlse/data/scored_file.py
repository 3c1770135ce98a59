"""The one writer of a scored file: a user's table of pairs with each model's score columns, as CSV or TSV.

The ``score`` command, the app and :func:`mlse.write_scored` all write here, so the same scores give the same file:
the input's columns as read (one named like a score column is replaced), then score columns with six decimals, blank
for unscored rows. Paths are written atomically. TSV has no quoting: tabs and line breaks in a cell become spaces.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import numpy as np

from mlse.atomic import atomic_write_stream
from mlse.data.user_table import UserTable

BIG_CELL = 1 << 20  # characters; a cell longer than this is written in slices of this size


def write_scored(
    table: UserTable,
    scores: Mapping[str, np.ndarray],
    out: str | Path | TextIO,
    *,
    tsv: bool | None = None,
    header: bool = True,
) -> Path | None:
    """Write ``table`` with the ``scores`` columns (``{"<model> cosine": values [n], ...}``, or the frame
    :func:`mlse.score_pairs` returned: its score columns) to ``out``: a path (written atomically; returned) or an open
    text stream. ``tsv`` None: TSV when the path ends in ``.tsv``, else CSV. ``header=False`` (a stream): the rows
    only, to continue a file written chunk by chunk (the ``score`` command at scale)."""
    if isinstance(out, str | Path):
        path = Path(out)
        tsv = path.suffix.lower() == ".tsv" if tsv is None else tsv
        return atomic_write_stream(path, lambda stream: write_scored(table, scores, stream, tsv=tsv), text=True)
    run = getattr(scores, "attrs", {}).get("run")  # a scored frame: only its score columns
    names = list(run.columns) if run is not None else list(scores)
    kept = [i for i, c in enumerate(table.columns) if c not in names]
    values = [np.asarray(scores[name], dtype=np.float64) for name in names]
    if tsv:

        def write(cells: list[str]) -> None:
            out.write("\t".join(tsv_clean(c) for c in cells) + "\n")
    else:
        write = csv.writer(out, lineterminator="\n").writerow
    if header:
        write([table.columns[i] for i in kept] + names)
    for r, row in enumerate(table.rows):
        cells = [row[i] for i in kept] + [f"{v[r]:.6f}" if math.isfinite(v[r]) else "" for v in values]
        if any(len(c) > BIG_CELL for c in cells):
            _write_big_row(out, cells, bool(tsv))
        else:
            write(cells)
    return None


def tsv_clean(cell: str) -> str:
    """``cell`` with its tabs and line breaks (CRLF as one) turned into spaces: TSV has no quoting."""
    return cell.replace("\t", " ").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _csv_quoted_characters() -> str:
    """The characters that make the csv module quote a field (``lineterminator="\\n"``; whether a lone CR does
    depends on the Python version, so it is asked)."""
    quoted = ""
    for c in ',"\r\n\t':
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([f"a{c}b", "x"])
        quoted += c if buffer.getvalue().startswith('"') else ""
    return quoted


_CSV_QUOTED = _csv_quoted_characters()


def _write_big_row(stream: TextIO, cells: list[str], tsv: bool) -> None:
    """One row as :func:`write_scored` writes it (the same characters as the csv module's ``writerow``), each cell in
    slices of :data:`BIG_CELL` characters: the csv module would hold four bytes a character of a huge cell at once."""
    for k, cell in enumerate(cells):
        if k:
            stream.write("\t" if tsv else ",")
        quote = not tsv and (any(c in cell for c in _CSV_QUOTED) or (len(cells) == 1 and cell == ""))
        stream.write('"' if quote else "")
        start = 0
        while start < len(cell):
            stop = start + BIG_CELL
            if tsv and cell[stop - 1 : stop] == "\r":  # keep a CRLF in one slice: it becomes one space
                stop += 1
            piece = cell[start:stop]
            stream.write(tsv_clean(piece) if tsv else piece.replace('"', '""') if quote else piece)
            start = stop
        stream.write('"' if quote else "")
    stream.write("\n")
