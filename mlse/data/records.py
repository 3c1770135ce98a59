"""A user's input as records: bytes from a path, an upload or pasted text, decoded, its format guessed, split into
rows (TSV, CSV, JSONL or one sentence per line). :mod:`mlse.data.user_files` turns the records into a table.

Lines split on ``"\\n"`` only: U+0085 and U+2028 occur inside real sentences.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from mlse.errors import DataError

FORMATS = ("tsv", "csv", "jsonl", "lines")
PASTED = "pasted text"


def raw_input(source, text, name) -> tuple[bytes, str, str]:
    """(bytes, display name, file suffix)."""
    if (source is None) == (text is None):
        raise DataError("give either a file or pasted text")
    if text is not None:
        return text.encode("utf-8", "surrogatepass"), name or PASTED, ""
    if isinstance(source, bytes | bytearray):
        return bytes(source), name or "uploaded file", Path(name or "").suffix.lower()
    path = Path(source)
    label = name or path.name
    try:
        return path.read_bytes(), label, path.suffix.lower()
    except FileNotFoundError:
        raise DataError(f"{label}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{label}: is a folder, expected a file") from None
    except OSError as exc:
        raise DataError(f"{label}: cannot read ({exc.strerror or type(exc).__name__})") from None


def decode(raw: bytes, label: str) -> str:
    if b"\x00" in raw[:65536]:
        raise DataError(f"{label}: not a text file (it holds NUL bytes); expected UTF-8 text: TSV, CSV or JSONL")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{label}:{line}: not valid UTF-8 (byte offset {exc.start}); save the file as UTF-8") from None
    return content.removeprefix("\ufeff")


def guess_format(content: str, suffix: str, kinds: tuple[str, ...]) -> str:
    by_suffix = {".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
    if suffix in by_suffix:
        return by_suffix[suffix]
    head = content.lstrip()[:1]
    first_lines = [line for line in content.split("\n")[:20] if line.strip()]
    if head == "{":
        return "jsonl"
    if any("\t" in line for line in first_lines):
        return "tsv"
    if "sentences" in kinds:
        return "lines" if kinds == ("sentences",) or not any("," in line for line in first_lines) else "csv"
    return "csv"


def _split_lines(content: str) -> list[str]:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def delimited_records(content: str, fmt: str, label: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank record."""
    if fmt in ("tsv", "lines"):
        return [(i, line.split("\t") if fmt == "tsv" else [line])
                for i, line in enumerate(_split_lines(content), start=1) if line.strip()]  # fmt: skip
    records = []
    reader = csv.reader(io.StringIO(content, newline=""), strict=True)
    start = 1
    try:
        for fields in reader:
            if any(f.strip() for f in fields):
                records.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{label}:{start}: not valid CSV ({exc}); quote fields that hold commas with \"...\"") from None
    return records


def jsonl_records(content: str, label: str) -> list[tuple[int, dict | str]]:
    """(line number, object) of every non-blank line; a line that is not an object is kept as its error text."""
    records = []
    for i, line in enumerate(_split_lines(content), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            records.append((i, f"not valid JSON ({exc.msg}, character {exc.colno})"))
            continue
        records.append((i, value if isinstance(value, dict) else f"expected a JSON object, got {type(value).__name__}"))
    return records


def cell_text(value) -> str:
    """A JSON value as the text of a cell (numbers as written, null as empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
