"""Property tests (hypothesis) of the one reader of users' files (mlse.data.user_files).

Any bytes give a table or one DataError, never another exception; a table of arbitrary unicode cells written as TSV,
CSV or JSONL reads back cell for cell, on the right lines (the writers here are the oracle); an empty sentence or a
field removed or added gives the exact message for its line.
"""

from __future__ import annotations

import csv
import io
import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mlse.data.records import cell_text
from mlse.data.user_files import read_rows, read_table
from mlse.errors import DataError

SOME = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
FEWER = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

FORMATS = ("tsv", "csv", "jsonl")
HEADER = ["sentence1", "sentence2", "score", "note"]
# Cells people write: quotes, commas, emoji, right-to-left text and marks, separators that are no line break here
SPECIAL = [
    '"quoted"',
    "a, b",
    'say ""hi""',
    "🙂👍🏽 ok",
    "שלום עולם",
    "مرحبا بك",
    "\u202eevil",
    "it's",
    ",",
    '"',
    " lead",
    "trail ",
    "x\u2028y",
    "x\u0085y",
    "tab\u000bbed",
    "{not json}",
    "[1]",
    "3,5",
    "NaN",
    "sentence1",
]
# No NUL (a binary file) and no U+FEFF (at the start of a file it is the byte-order mark the reader drops); TSV cells
# hold no tab, line feed or carriage return (TSV has no quoting)
ANY_CHAR = st.characters(blacklist_characters="\x00\ufeff", blacklist_categories=("Cs",))
TSV_CHAR = st.characters(blacklist_characters="\x00\ufeff\t\n\r", blacklist_categories=("Cs",))
BLANKS = ["", " ", "   ", "\u3000", "\u2028", "\u00a0"]


def cells(fmt: str, blank_ok: bool):
    chars = TSV_CHAR if fmt == "tsv" else ANY_CHAR
    text = st.one_of(st.text(chars, max_size=25), st.sampled_from(SPECIAL))
    return text if blank_ok else text.filter(lambda t: t.strip())


@st.composite
def tables(draw, fmt: str, header: bool = True):
    """(rows of cells as written, the score of each row)."""
    n = draw(st.integers(1, 6))
    rows = []
    for _ in range(n):
        s1, s2 = draw(cells(fmt, False)), draw(cells(fmt, False))
        score = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
        row = [s1, s2, repr(score)]
        if header:
            row.append(draw(cells(fmt, True)))
        rows.append(row)
    return rows


def write(fmt: str, rows: list[list[str]], header: bool = True, width: int | None = None) -> tuple[bytes, list[int]]:
    """(the file's bytes, the line each row starts on); ``width``: the header's columns (the first row's)."""
    names = HEADER[: width or len(rows[0])]
    lines, parts, line = [], [], 1
    if fmt == "jsonl":
        for row in rows:
            value = {k: (float(v) if k == "score" else v) for k, v in zip(names, row)}
            parts.append(json.dumps(value, ensure_ascii=line % 2 == 0) + "\n")
            lines.append(line)
            line += 1
        return "".join(parts).encode(), lines
    for i, row in enumerate(([names] if header else []) + rows):
        if fmt == "tsv":
            part = "\t".join(row) + ("\r\n" if i % 2 else "\n")
        else:
            buffer = io.StringIO()
            csv.writer(buffer).writerow(row)
            part = buffer.getvalue()
        if i or not header:
            lines.append(line)
        parts.append(part)
        line += part.count("\n")
    return "".join(parts).encode(), lines


def read(fmt: str, raw: bytes, header: bool = True):
    return read_table(raw, name=f"t.{fmt}", kind="pairs", header=None if header else False)


# -- any input: a table or one DataError ------------------------------------------------------------------------------
PIECES = [
    b"\t",
    b",",
    b'"',
    b"\n",
    b"\r\n",
    b"\r",
    b"{",
    b"}",
    b"[",
    b"]",
    b"a",
    b"1",
    b"3,5",
    b" ",
    b"sentence1",
    b"sentence2",
    b"score",
    b"text",
    b"en",
    b"de",
    b":",
    b"\xff",
    b"\xc3\xa9",
    b"\xe2\x80\xa8",
    b'"x":',
    b"null",
    b"\xef\xbb\xbf",
    b"\x00",
    b"PK\x03\x04",
]
inputs = st.one_of(st.binary(max_size=300), st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join))


@SOME
@given(
    raw=inputs,
    name=st.sampled_from([None, "x.tsv", "x.csv", "x.jsonl", "x.json", "x.txt"]),
    kind=st.sampled_from(["auto", "pairs", "sentences", "parallel", ("sentences", "parallel")]),
    header=st.sampled_from([None, True, False]),
    bad_rows=st.sampled_from(["raise", "skip"]),
)
def test_any_bytes_give_a_table_or_one_data_error(raw, name, kind, header, bad_rows):
    try:
        table = read_table(raw, name=name, kind=kind, header=header, bad_rows=bad_rows, gold_range=(0, 5))
    except DataError as exc:
        message = str(exc)
        assert message.startswith(name or "uploaded file") and "\n" not in message
        return
    assert len(table.rows) == len(table.lines) > 0
    assert all(len(row) == len(table.columns) for row in table.rows)
    assert table.kind in ("pairs", "sentences", "parallel")
    table.frame()  # every kept row converts, the gold column included


@FEWER
@given(text=st.text(max_size=200), kind=st.sampled_from(["auto", "pairs", "sentences", "parallel"]))
def test_any_pasted_text_gives_a_table_or_one_data_error(text, kind):
    try:
        table = read_table(text=text, kind=kind, bad_rows="skip")
    except DataError as exc:
        assert str(exc).startswith("pasted text")
        return
    assert len(table) > 0


# -- round trips ------------------------------------------------------------------------------------------------------
@st.composite
def written_tables(draw, header: bool = True):
    fmt = draw(st.sampled_from(FORMATS if header else ("tsv", "csv")))
    return fmt, draw(tables(fmt, header))


@SOME
@given(case=written_tables())
def test_a_written_table_reads_back_cell_for_cell(case):
    fmt, rows = case
    raw, lines = write(fmt, rows)
    table = read(fmt, raw)
    assert (table.kind, table.format, table.has_header) == ("pairs", fmt, True)
    assert table.columns == HEADER
    assert table.rows == rows
    assert table.lines == lines
    assert table.gold.tolist() == [float(r[2]) for r in rows]


@FEWER
@given(case=written_tables(header=False))
def test_a_written_table_without_header_reads_back_by_position(case):
    fmt, rows = case
    raw, lines = write(fmt, rows, header=False)
    table = read(fmt, raw, header=False)
    assert table.rows == rows and table.lines == lines
    assert table.roles == {"sentence1": "column1", "sentence2": "column2", "gold": "column3"}


@SOME
@given(case=written_tables(), data=st.data())
def test_an_empty_sentence_is_refused_at_its_line_and_column(case, data):
    fmt, rows = case
    i = data.draw(st.integers(0, len(rows) - 1))
    column = data.draw(st.sampled_from([0, 1]))
    rows[i][column] = data.draw(st.sampled_from(BLANKS))
    raw, lines = write(fmt, rows)
    first = next(r for r, row in enumerate(rows) if not row[0].strip() or not row[1].strip())
    name = HEADER[0] if not rows[first][0].strip() else HEADER[1]
    try:
        read(fmt, raw)
    except DataError as exc:
        assert str(exc) == f"t.{fmt}:{lines[first]}: column '{name}': empty sentence"
    else:
        raise AssertionError("an empty sentence was read")


@SOME
@given(case=written_tables(header=True), header=st.booleans(), extra=st.booleans(), data=st.data())
def test_a_row_with_a_field_removed_or_added_gets_the_exact_ragged_message(case, header, extra, data):
    fmt, rows = case
    fmt = "csv" if fmt == "jsonl" else fmt
    rows = [row[:3] for row in rows] if not header else rows  # without a header: sentence1, sentence2, score
    n = len(rows[0])
    # without a header the first row sets the width, so the row changed is a later one
    assume(header or len(rows) > 1)
    i = data.draw(st.integers(0 if header else 1, len(rows) - 1))
    if extra:
        rows[i] = [*rows[i], data.draw(cells(fmt, True))]
    else:
        del rows[i][data.draw(st.integers(0, n - 1))]
    raw, lines = write(fmt, rows, header=header, width=n)
    counts = f"the row has {len(rows[i])} field(s), expected {n}" + (f": {', '.join(HEADER)}" if header else "")
    if extra:
        expected = f"column {n + 1}: unexpected extra field ({counts})"
    else:
        expected = f"column {repr(HEADER[n - 1]) if header else n}: missing ({counts})"
    try:
        read(fmt, raw, header=header)
    except DataError as exc:
        assert str(exc) == f"t.{fmt}:{lines[i]}: {expected}"
    else:
        raise AssertionError("a ragged row was read")


# -- rows already split (mlse.score_pairs's tuples and DataFrames) ----------------------------------------------------
cell_values = st.one_of(
    st.text(ANY_CHAR, max_size=12),
    st.none(),
    st.integers(-5, 10),
    st.floats(allow_nan=True),
    st.booleans(),
    st.sampled_from(["", " ", "3,5", "nan"]),
)


@FEWER
@given(
    rows=st.lists(st.lists(cell_values, min_size=1, max_size=4), max_size=5),
    named=st.booleans(),
    bad_rows=st.sampled_from(["raise", "skip"]),
)
def test_any_rows_give_a_table_or_one_data_error(rows, named, bad_rows):
    columns = HEADER[: len(rows[0])] if named and rows else None
    try:
        table = read_rows(rows, columns=columns, kind="pairs", name="rows", bad_rows=bad_rows)
    except DataError as exc:
        assert str(exc).startswith("rows")
        return
    kept = [rows[line - 1] for line in table.lines]
    assert table.rows == [[cell_text(v) for v in row] for row in kept]  # cells as given, nothing joined or split
    assert len(table.gold if table.gold is not None else table.rows) == len(table)
