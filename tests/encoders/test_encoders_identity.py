"""The weight-fingerprint memo (``fingerprints.json`` under the cache root, :mod:`mlse.encoders.identity`): a memo that
is not a JSON object is moved aside and rebuilt, never a traceback on every run."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

from mlse.encoders.identity import files_fingerprint, fingerprint_memo_path, folder_fingerprint


def _weights(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    (folder / "config.json").write_text("{}")
    return folder


def _expected(folder) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        h.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return h.hexdigest()


def test_the_memo_serves_a_second_call(tmp_path, monkeypatch):
    folder = _weights(tmp_path)
    assert folder_fingerprint(folder) == _expected(folder)
    memo = json.loads(fingerprint_memo_path().read_text())
    assert list(memo.values()) == [_expected(folder)]
    monkeypatch.setattr("mlse.encoders.identity.update_with_file", lambda *a: pytest.fail("hashed again"))
    assert folder_fingerprint(folder) == _expected(folder)


@pytest.mark.parametrize("content", ["[]", "3", '"text"', "null", "{not json", b"\xff\xfe"], ids=repr)
def test_a_memo_that_is_not_a_json_object_is_moved_aside_and_rebuilt(tmp_path, caplog, content):
    folder = _weights(tmp_path)
    memo = fingerprint_memo_path()
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_bytes(content if isinstance(content, bytes) else content.encode())
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.identity"):
        assert folder_fingerprint(folder) == _expected(folder)
    aside = list(memo.parent.glob("fingerprints.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == (content if isinstance(content, bytes) else content.encode())
    assert any("moving it aside" in r.getMessage() for r in caplog.records)
    assert isinstance(json.loads(memo.read_text()), dict)  # rebuilt: the next run reads it
    assert folder_fingerprint(folder) == _expected(folder)
    assert len(list(memo.parent.glob("fingerprints.json.corrupt-*"))) == 1


def test_an_entry_that_is_not_a_digest_is_computed_again(tmp_path):
    folder = _weights(tmp_path)
    assert folder_fingerprint(folder) == _expected(folder)
    memo = fingerprint_memo_path()
    entries = json.loads(memo.read_text())
    memo.write_text(json.dumps({key: 3 for key in entries}))  # an object, but a number where a digest belongs
    assert folder_fingerprint(folder) == _expected(folder)
    assert json.loads(memo.read_text()) == entries


def test_files_fingerprint_hashes_the_files_in_the_order_given(tmp_path):
    folder = _weights(tmp_path)
    files = [folder / "model.safetensors", folder / "config.json"]
    forward, backward = files_fingerprint(folder, files), files_fingerprint(folder, files[::-1])
    assert forward != backward and backward == _expected(folder)
