"""mlse.data.io.read_bytes: the one "read a file or say why not" of the data readers (line files and user tables)."""

from __future__ import annotations

import pytest

from mlse.data.io import read_bytes, read_lines
from mlse.data.records import raw_input
from mlse.errors import DataError


def test_read_bytes_and_its_messages(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"x\ny\n")
    assert read_bytes(tmp_path / "a.txt") == b"x\ny\n"
    with pytest.raises(DataError, match=r"^.*missing\.txt: file not found$"):
        read_bytes(tmp_path / "missing.txt")
    with pytest.raises(DataError, match=r"^upload: is a folder, expected a file$"):
        read_bytes(tmp_path, "upload")


def test_the_line_reader_and_the_table_reader_say_the_same(tmp_path):
    for read in (read_lines, lambda path: raw_input(path, None, None)):
        with pytest.raises(DataError, match="is a folder, expected a file"):
            read(tmp_path)
        with pytest.raises(DataError, match="nope.tsv: file not found"):
            read(tmp_path / "nope.tsv")
