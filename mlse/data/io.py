"""Reading line-aligned text files safely.

``str.splitlines()`` also breaks on U+0085, U+2028, form feeds...; real files (Tatoeba-Challenge ``eng-pol/*.pol``)
hold these inside sentences, which would misalign a parallel corpus. So everything here splits on ``"\\n"`` only.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlse.errors import DataError


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """Return the lines of a UTF-8 file, split on ``"\\n"`` only.

    A trailing ``"\\r"`` is removed from each line; empty lines are kept (the count matches ``wc -l``)."""
    p = Path(path)
    text = decode_utf8(read_bytes(p), p)
    return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []


def decode_utf8(raw: bytes, label: str | os.PathLike[str], hint: str = "") -> str:
    """``raw`` as UTF-8, or a DataError naming ``label``, the line and the byte offset of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{label}:{line}: not valid UTF-8 (byte offset {exc.start}){hint}") from None


def read_bytes(path: str | os.PathLike[str], label: str | None = None) -> bytes:
    """The bytes of a file, or a DataError naming it (``label``, by default the path): missing, a folder, unreadable."""
    with open_binary(path, label) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise DataError(f"{label or path}: cannot read ({exc.strerror or type(exc).__name__})") from None


def open_binary(path: str | os.PathLike[str], label: str | None = None):
    """The file opened for reading in binary (the caller closes it), or a DataError naming it (``label``, by default
    the path): missing, a folder, unreadable."""
    label = label or str(path)
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise DataError(f"{label}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{label}: is a folder, expected a file") from None
    except OSError as exc:
        raise DataError(f"{label}: cannot read ({exc.strerror or type(exc).__name__})") from None


def read_aligned(path_a: str | os.PathLike[str], path_b: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Read two line-aligned files; refuse them if their line counts differ (never truncate)."""
    a, b = read_lines(path_a), read_lines(path_b)
    if len(a) != len(b):
        raise DataError(
            f"line-aligned files differ in length: {path_a} has {len(a)} lines, {path_b} has {len(b)} lines"
        )
    return a, b
