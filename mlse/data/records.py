"""A user's input as records: bytes from a path, an upload or pasted text, decoded, its format guessed, split into
rows (TSV, CSV, JSONL or one sentence per line); cells as text and as numbers. :mod:`mlse.data.user_files` turns the
records into a table.

Lines split on ``"\\n"`` only: U+0085 and U+2028 occur inside real sentences.
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from mlse.data.io import decode_utf8, read_bytes
from mlse.data.json_safe import finite_or_none
from mlse.errors import DataError

FORMATS = ("tsv", "csv", "jsonl", "lines")
PASTED = "pasted text"
# The csv module refuses fields over 131,072 characters; a user's sentence may be longer (encoders cut it). A quote
# never closed is still caught (the field runs to the end of the file). Process-wide; raising it harms no reader.
CSV_FIELD_LIMIT = 2**31 - 1


def raw_input(source, text, name, max_bytes: int | None = None) -> tuple[bytes, str, str]:
    """(bytes, display name, file suffix); a file over ``max_bytes`` is refused before it is read."""
    if (source is None) == (text is None):
        raise DataError("give either a file or pasted text")
    if text is not None:
        raw, label, suffix = text.encode("utf-8", "surrogatepass"), name or PASTED, ""
    elif isinstance(source, bytes | bytearray):
        raw, label, suffix = bytes(source), name or "uploaded file", Path(name or "").suffix.lower()
    else:
        path = Path(source)
        label, suffix = name or path.name, path.suffix.lower()
        if max_bytes is not None and path.is_file():  # refused before it is read
            check_size(path.stat().st_size, label, max_bytes)
        raw = read_bytes(path, label)
    check_size(len(raw), label, max_bytes)
    return raw, label, suffix


def check_size(size: int, label: str, max_bytes: int | None) -> None:
    """Refuse an input of ``size`` bytes over ``max_bytes`` (None: no limit)."""
    if max_bytes is not None and size > max_bytes:
        raise DataError(f"{label}: {size:,} bytes is over the limit of {max_bytes:,} bytes")


# the first bytes of files people mistake for a table's text
_NOT_TEXT = {
    b"PK\x03\x04": "a zip archive or a spreadsheet (.xlsx, .ods); save it as CSV or TSV",
    b"\xd0\xcf\x11\xe0": "an old Office file (.xls); save it as CSV or TSV",
    b"\x1f\x8b": "a gzip archive; unpack it first",
    b"%PDF": "a PDF",
    b"\xff\xfe": "UTF-16 text; save it as UTF-8",
    b"\xfe\xff": "UTF-16 text; save it as UTF-8",
}


def refuse_binary(head: bytes, label: str) -> None:
    """Refuse an input whose first bytes say it is no text table (an archive, a PDF, UTF-16)."""
    for magic, what in _NOT_TEXT.items():
        if head.startswith(magic):
            raise DataError(f"{label}: not a text table: {what}")


def refuse_nul(raw: bytes, label: str) -> None:
    if b"\x00" in raw:
        raise DataError(f"{label}: not a text file (it holds NUL bytes); expected UTF-8 text: TSV, CSV or JSONL")


def decode(raw: bytes, label: str) -> str:
    """UTF-8 text (a byte-order mark dropped); a binary or non-UTF-8 input is refused with one message."""
    refuse_binary(raw, label)
    refuse_nul(raw, label)
    return decode_utf8(raw, label, "; save the file as UTF-8").removeprefix("\ufeff")


def guess_format(content: str, suffix: str, kinds: tuple[str, ...]) -> str:
    by_suffix = {".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
    if suffix in by_suffix:
        return by_suffix[suffix]
    first_lines = [line for line in content.split("\n")[:20] if line.strip()]
    if content.lstrip().startswith("{"):
        return "jsonl"
    if any("\t" in line for line in first_lines):
        return "tsv"
    if "sentences" in kinds:
        return "lines" if kinds == ("sentences",) or not any("," in line for line in first_lines) else "csv"
    return "csv"


def text_records(content: str, fmt: str, label: str) -> list[tuple[int, object]]:
    """The records of a whole text (:func:`line_records` over its lines split on "\\n" only). For JSONL, a JSON array
    (a ``.json`` file of objects) is refused with one message."""
    if fmt == "jsonl":
        refuse_json_array(content, label)
    lines = [line + "\n" for line in content.removesuffix("\n").split("\n")] if content else []
    return list(line_records(lines, fmt, label))


def line_records(lines: Iterable[str], fmt: str, label: str, first_line: int = 1) -> Iterator[tuple[int, object]]:
    """The records of ``lines`` (each ending in "\\n"; the first is line ``first_line``), one at a time as the lines
    are read: (line number, fields) of every non-blank line, for JSONL (line number, the object or why it is none).
    Shared by the whole-file and streamed (:mod:`mlse.data.table_stream`) readers."""
    if fmt == "csv":
        yield from _csv_lines(lines, label, first_line)
        return
    parse = {"jsonl": _json_object, "tsv": lambda line: line.split("\t")}.get(fmt, lambda line: [line])
    for i, raw in enumerate(lines, start=first_line):
        line = raw.removesuffix("\n").removesuffix("\r")
        if line.strip():
            yield i, parse(line)


def _csv_lines(lines: Iterable[str], label: str, first_line: int) -> Iterator[tuple[int, list[str]]]:
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    # lines split on "\n" only, so that line numbers count what an editor shows (a quoted field may span lines)
    reader = csv.reader(lines, strict=True)
    start = first_line
    try:
        for fields in reader:
            if any(f.strip() for f in fields):
                yield start, fields
            start = first_line + reader.line_num
    except csv.Error as exc:
        raise DataError(f"{label}:{start}: not valid CSV: {_csv_problem(str(exc))}") from None


def _csv_problem(error: str) -> str:
    if "unexpected end of data" in error:
        return 'a quoted field opened on this line is never closed (a missing ")'
    if "field larger than field limit" in error:
        return f'a field longer than {csv.field_size_limit():,} characters (a missing " that closes a quote?)'
    if "new-line character" in error:
        return "a carriage return (\\r) inside an unquoted field; quote the field"
    return f'{error}; quote fields that hold commas or quotes with "..." and double a quote inside one ("")'


def refuse_json_array(content: str, label: str) -> None:
    """Refuse a pretty-printed JSON array (JSON Lines expected); one on one line is one bad line."""
    whole = content.strip()
    if whole.startswith("[") and "\n" in whole:
        try:
            value = json.loads(whole)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, list):
            raise DataError(f"{label}: a JSON array; expected JSON Lines: one {{...}} object per line, no [ ]")


def _json_object(line: str) -> dict | str:
    """The object on one JSONL line, or why the line is none (kept as the record's error text)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg}, character {exc.colno})"
    except (ValueError, RecursionError) as exc:  # an integer of over 4,300 digits; nesting deeper than the stack
        why = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long to read"
        return f"not valid JSON ({why})"
    return value if isinstance(value, dict) else f"expected a JSON object, got {type(value).__name__}"


def cell_text(value) -> str:
    """A JSON value or a DataFrame's cell as the text of a cell (numbers as written, null / NaN / NA as empty)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return "" if math.isnan(number) else repr(number)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# -- numbers in cells --------------------------------------------------------------------------------------------------
def reads_as_number(text: str) -> bool:
    """Reads as a number (with a decimal point or comma; "nan" too): no header's name."""
    try:
        float(text.replace(",", "."))  # float() takes no comma: the text itself is tried too
    except ValueError:
        return False
    return True


def parse_range(text: str | None) -> tuple[float, float] | None:
    """ "0:5" or "0-5" or "0,5" -> (0.0, 5.0); "" or None -> None. DataError for anything else."""
    if text is None or not str(text).strip():
        return None
    parts = [p for p in re.split(r"\s*(?::|,|\.\.|\s-\s|(?<=\d)-(?=[\d.]))\s*", str(text).strip()) if p]
    values = [finite_or_none(p) for p in parts]
    if len(values) != 2 or any(v is None for v in values) or values[0] >= values[1]:
        raise DataError(f"score range {text!r}: expected LOW:HIGH with LOW < HIGH, e.g. 0:5")
    return float(values[0]), float(values[1])
