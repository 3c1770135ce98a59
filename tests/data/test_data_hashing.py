"""mlse.data.hashing, the one file hash: data records, shipped artifacts' manifests and model fingerprints use it."""

from __future__ import annotations

import hashlib
import os

import pytest

from mlse.data.hashing import CHUNK, file_sha256, update_with_file
from mlse.data.portable import data_hashes
from mlse.errors import DataError

ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc"), FIPS 180-2 example


def test_known_digests_and_chunk_boundaries(tmp_path):
    (tmp_path / "abc").write_bytes(b"abc")
    (tmp_path / "empty").write_bytes(b"")
    assert file_sha256(tmp_path / "abc") == ABC
    assert file_sha256(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()
    for size in (CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7):
        blob = os.urandom(size)
        path = tmp_path / f"blob{size}"
        path.write_bytes(blob)
        assert file_sha256(path) == hashlib.sha256(blob).hexdigest()


def test_several_files_into_one_digest(tmp_path):
    (tmp_path / "a").write_bytes(b"ab")
    (tmp_path / "b").write_bytes(b"c")
    digest = update_with_file(update_with_file(hashlib.sha256(), tmp_path / "a"), tmp_path / "b")
    assert digest.hexdigest() == ABC


def test_a_changed_file_is_hashed_again_and_a_missing_one_is_a_data_error(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"abc")
    assert file_sha256(path) == ABC
    path.write_bytes(b"abcd")
    assert file_sha256(path) == hashlib.sha256(b"abcd").hexdigest()
    with pytest.raises(DataError, match="file not found"):
        file_sha256(tmp_path / "missing")


def test_data_hashes_name_files_portably(tmp_path):
    (tmp_path / "sts").mkdir()
    (tmp_path / "sts" / "x.csv").write_bytes(b"abc")
    out = data_hashes([tmp_path / "sts" / "x.csv"], tmp_path)
    assert out == {"data:sts/x.csv": ABC}


def test_every_old_caller_gives_the_plain_sha256(tmp_path):
    from mlse.encoders.identity import file_sha256_memo
    from mlse.runs.shipped import MANIFEST, file_hashes

    folder = tmp_path / "artifact"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "w.bin").write_bytes(b"abc")
    (folder / "big.bin").write_bytes(blob := os.urandom(CHUNK + 3))
    (folder / MANIFEST).write_text("{}")
    assert file_hashes(folder) == {"big.bin": hashlib.sha256(blob).hexdigest(), "sub/w.bin": ABC}
    assert file_sha256_memo(folder / "sub" / "w.bin") == ABC
