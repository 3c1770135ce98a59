"""mlse.ui.uploads: a visitor's file read within the deployment's limits, the upload deleted in public mode, bad rows
listed, and never the server's path in a message."""

from __future__ import annotations

import pytest

from mlse import public_mode
from mlse.errors import MlseError
from mlse.ui.uploads import limits_note, read_upload

ROWS = "sentence1\tsentence2\tscore\nA dog runs.\tUn chien court.\t4.5\nA cat sleeps.\tDie Katze schläft.\t4.8\n"


@pytest.fixture()
def local(monkeypatch):
    env = (public_mode.PUBLIC_ENV, public_mode.SPACE_ENV, public_mode.UPLOAD_ROWS_ENV, public_mode.UPLOAD_BYTES_ENV)
    for name in env:
        monkeypatch.delenv(name, raising=False)


def test_a_file_and_pasted_rows_read_alike(tmp_path, local):
    path = tmp_path / "mine.tsv"
    path.write_text(ROWS, encoding="utf-8")
    from_file, message = read_upload(str(path), None, kind="pairs")
    from_text, _ = read_upload(None, ROWS, kind="pairs")
    assert from_file.rows == from_text.rows and len(from_file) == 2
    assert message.startswith("Read 2 sentence pairs from mine.tsv (sentence1, sentence2, score).")
    assert path.exists()  # locally the user's file stays where it is


def test_nothing_given(local):
    assert read_upload(None, "  \n", kind="pairs") == (None, "Upload a file or paste rows first.")


def test_bad_rows_are_listed_not_dropped_silently(local):
    table, message = read_upload(None, ROWS + "A bird sings.\t\t3\n", kind="pairs")
    assert len(table) == 2 and table.n_skipped == 1
    assert "**1 row(s) skipped:**" in message and "pasted text:4: column 'sentence2': empty sentence" in message


def test_public_mode_caps_rows_deletes_the_upload_and_hides_its_path(tmp_path, monkeypatch, local):
    monkeypatch.setenv(public_mode.PUBLIC_ENV, "1")
    assert public_mode.upload_limits() == (public_mode.PUBLIC_UPLOAD_ROWS, public_mode.MAX_UPLOAD_BYTES)
    folder = tmp_path / "gradio-tmp-3f9a" / "abc123"
    folder.mkdir(parents=True)
    big = folder / "big.tsv"
    big.write_text("".join(f"s{i}\tt{i}\n" for i in range(public_mode.PUBLIC_UPLOAD_ROWS + 1)), encoding="utf-8")
    table, message = read_upload(str(big), None, kind="pairs")
    assert table is None
    assert message == f"big.tsv: more than {public_mode.PUBLIC_UPLOAD_ROWS:,} rows, the limit here"
    assert not big.exists(), "public mode deletes an upload once read"
    assert str(tmp_path) not in message and "gradio-tmp" not in message
    # a second click on the same (deleted) upload says what to do
    _, again = read_upload(str(big), None, kind="pairs")
    assert again.startswith("big.tsv: the uploaded file is gone") and "upload it again" in again
    assert "public deployment" in limits_note() and f"{public_mode.PUBLIC_UPLOAD_ROWS:,} rows" in limits_note()


def test_local_limits_come_from_the_flags(tmp_path, monkeypatch, local):
    monkeypatch.setenv(public_mode.UPLOAD_ROWS_ENV, "100000")  # so that teardown removes what set_upload_limits writes
    public_mode.set_upload_limits(rows=1)
    assert public_mode.upload_limits()[0] == 1
    table, message = read_upload(None, ROWS, kind="pairs")
    assert table is None and message == "pasted text: more than 1 row, the limit here"
    monkeypatch.setenv(public_mode.UPLOAD_BYTES_ENV, "10")
    monkeypatch.setenv(public_mode.UPLOAD_ROWS_ENV, "100")
    table, message = read_upload(None, ROWS, kind="pairs")
    assert table is None and message.startswith("pasted text: ") and "over the limit of 10 bytes" in message
    with pytest.raises(MlseError, match="expected a positive number"):
        public_mode.set_upload_limits(rows=0)
    monkeypatch.setenv(public_mode.UPLOAD_ROWS_ENV, "lots")
    with pytest.raises(MlseError, match="expected a whole number"):
        public_mode.upload_limits()
