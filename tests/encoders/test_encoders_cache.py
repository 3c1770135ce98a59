"""The on-disk embedding cache: hits and misses, exactness, corruption recovery and concurrent writers."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mlse.dirs import cache_root, file_safe
from mlse.encoders.cache import CachedEncoder, EmbeddingStore, text_key
from mlse.encoders.load import load_encoder
from tests.fake_encoder import DIM, FakeEncoder, fake_vector, worker_texts
from tests.paths import REPO_ROOT as REPO

TEXTS = [f"text {i}: the quick brown fox" for i in range(40)] + ["", "Кошка спит.", "猫在睡觉。", "  padded  "]
SENTS = ["A man is playing a flute.", "Ein Mann spielt Flöte.", "Кошка спит.", "猫在睡觉。", "", "A man plays music."]


def expected(texts, *, identity="fake:v1", normalize=True) -> np.ndarray:
    return np.stack([fake_vector(t, identity=identity, normalize=normalize) for t in texts])


def store_files(root: Path) -> list[Path]:
    return sorted((root / "embeddings").glob("*.sqlite"))


def stored_keys(path: Path) -> dict[bytes, bytes]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, vec FROM emb").fetchall())


def close_all(enc: CachedEncoder) -> None:
    """Close the wrapper's connections and fold the WAL into the main file, so the .sqlite file alone is the cache."""
    paths = [s.path for s in enc._stores.values()]
    for store in enc._stores.values():
        store.close()
    for path in paths:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


# -- cache_root and text_key -----------------------------------------------------------------------------------------
def test_cache_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "elsewhere"))
    assert cache_root() == tmp_path / "elsewhere"
    enc = CachedEncoder(FakeEncoder())
    enc.encode(["hello"])
    files = store_files(tmp_path / "elsewhere")
    assert len(files) == 1 and files[0].stat().st_size > 0


def test_a_model_name_becomes_a_safe_file_name(tmp_path):
    name = "../runs/x y:ckpt/" + "z" * 60
    assert file_safe(name) == ".._runs_x_y_ckpt_" + "z" * 23 and len(file_safe(name)) == 40
    store = EmbeddingStore(
        "../evil/名前 model:v1", True, root=tmp_path
    )  # the part before ":" names the file, inside root
    assert store.path.parent == tmp_path / "embeddings" and store.path.name.startswith(".._evil_名前_model-")


def test_cache_root_without_env_is_user_cache_dir(monkeypatch):
    monkeypatch.delenv("MLSE_CACHE")
    from platformdirs import user_cache_dir

    assert cache_root() == Path(user_cache_dir("mlse"))


def test_text_key_does_not_normalise_text():
    variants = [
        "Hello world",
        "hello world",
        "Hello  world",
        "Hello world ",
        " Hello world",
        "Hello\tworld",
        "HELLO WORLD",
    ]
    keys = [text_key(v) for v in variants]
    assert all(len(k) == 32 for k in keys)
    assert len(set(keys)) == len(variants)
    # the same in every process and release (sha256 of the UTF-8 text): vectors cached earlier are found again
    assert text_key("Hello world").hex() == "64ec88ca00b268e5ba1a35678a1b5316d212f4f366b2477232534a8aeca37f3c"
    # NFC vs NFD forms of "é" are different strings, and the key says so
    assert text_key("caf\u00e9") != text_key("cafe\u0301")
    lone = text_key("lone surrogate \ud800")  # not valid UTF-8, yet a key of its own rather than an error
    assert len(lone) == 32 and lone != text_key("lone surrogate ") and lone != text_key("lone surrogate \ufffd")


def test_whitespace_and_case_variants_are_cached_separately():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    variants = ["Hello world", "hello world", "Hello world "]
    np.testing.assert_array_equal(enc.encode(variants), expected(variants))
    assert fake.texts_encoded == 3 and enc.stats == {"encoded": 3, "served": 0}


# -- hits, misses and exactness with a fake encoder ------------------------------------------------------------------
def test_second_call_encodes_nothing_and_returns_identical_arrays():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    first = enc.encode(TEXTS)
    assert first.dtype == np.float32 and first.shape == (len(TEXTS), DIM)
    np.testing.assert_array_equal(first, expected(TEXTS))
    assert enc.stats == {"encoded": len(TEXTS), "served": 0}
    assert fake.calls == 1 and fake.texts_encoded == len(TEXTS)

    second = enc.encode(TEXTS)
    assert enc.stats == {"encoded": len(TEXTS), "served": len(TEXTS)}
    assert fake.calls == 1 and fake.texts_encoded == len(TEXTS)
    assert second.dtype == np.float32
    np.testing.assert_array_equal(second, first)

    # a brand-new wrapper (new process, in effect) is served from disk too
    fake2 = FakeEncoder()
    enc2 = CachedEncoder(fake2)
    np.testing.assert_array_equal(enc2.encode(TEXTS), first)
    assert fake2.calls == 0 and enc2.stats == {"encoded": 0, "served": len(TEXTS)}
    assert len(enc2.store(True)) == len(TEXTS)


def test_partial_hit_encodes_only_new_texts_and_keeps_order():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    enc.encode(TEXTS[:10])
    fake.seen.clear()
    mixed = [TEXTS[12], TEXTS[3], TEXTS[11], TEXTS[0], TEXTS[12]]
    out = enc.encode(mixed)
    np.testing.assert_array_equal(out, expected(mixed))
    assert sorted(fake.seen) == sorted([TEXTS[11], TEXTS[12]])
    assert enc.stats == {"encoded": 12, "served": 2}


def test_duplicates_within_one_call_are_encoded_once_and_rows_follow_input_order():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    texts = ["b", "a", "b", "c", "a", "a", "", "b", ""]
    out = enc.encode(texts)
    assert fake.calls == 1 and sorted(fake.seen) == ["", "a", "b", "c"]
    assert enc.stats == {"encoded": 4, "served": 0}
    assert out.shape == (len(texts), DIM)
    np.testing.assert_array_equal(out, expected(texts))
    np.testing.assert_array_equal(out[0], out[2])
    assert not np.array_equal(out[0], out[1])
    # reversed order from the cache: rows follow the new order
    rev = texts[::-1]
    np.testing.assert_array_equal(enc.encode(rev), expected(rev))
    assert fake.calls == 1 and enc.stats == {"encoded": 4, "served": 4}


def test_empty_input():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    out = enc.encode([])
    assert out.shape[0] == 0 and fake.texts_encoded == 0


def test_normalize_true_and_false_are_stored_separately():
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    root = cache_root()
    normed = enc.encode(TEXTS, normalize=True)
    assert len(store_files(root)) == 1
    raw = enc.encode(TEXTS, normalize=False)
    assert fake.texts_encoded == 2 * len(TEXTS)  # the normalised entries were not reused for normalize=False
    files = store_files(root)
    assert len(files) == 2
    np.testing.assert_array_equal(normed, expected(TEXTS, normalize=True))
    np.testing.assert_array_equal(raw, expected(TEXTS, normalize=False))
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    assert enc.store(True).path != enc.store(False).path
    # each file holds its own vectors, served back exactly
    enc2 = CachedEncoder(FakeEncoder())
    np.testing.assert_array_equal(enc2.encode(TEXTS, normalize=False), raw)
    np.testing.assert_array_equal(enc2.encode(TEXTS, normalize=True), normed)
    assert enc2.stats == {"encoded": 0, "served": 2 * len(TEXTS)}


def test_different_identity_does_not_reuse_entries():
    enc_v1 = CachedEncoder(FakeEncoder("fake:v1"))
    out_v1 = enc_v1.encode(TEXTS)
    fake_v2 = FakeEncoder("fake:v2")  # same name, changed weights
    enc_v2 = CachedEncoder(fake_v2)
    out_v2 = enc_v2.encode(TEXTS)
    assert fake_v2.texts_encoded == len(TEXTS) and enc_v2.stats == {"encoded": len(TEXTS), "served": 0}
    np.testing.assert_array_equal(out_v2, expected(TEXTS, identity="fake:v2"))
    assert not np.array_equal(out_v1, out_v2)
    assert len(store_files(cache_root())) == 2
    # and v1 is still served intact afterwards
    fake_v1 = FakeEncoder("fake:v1")
    np.testing.assert_array_equal(CachedEncoder(fake_v1).encode(TEXTS), out_v1)
    assert fake_v1.calls == 0


def test_explicit_root_argument(tmp_path):
    enc = CachedEncoder(FakeEncoder(), root=tmp_path / "r")
    enc.encode(["x", "y"])
    assert len(store_files(tmp_path / "r")) == 1
    assert not (cache_root() / "embeddings").exists()


# -- the real tiny model ---------------------------------------------------------------------------------------------
def test_tiny_model_cached_equals_uncached_and_cached_run_never_loads_model(tiny_bert):
    plain = load_encoder(str(tiny_bert), cache=False)
    ref = plain.encode(SENTS)
    ref_raw = plain.encode(SENTS, normalize=False)

    enc = load_encoder(str(tiny_bert))
    assert isinstance(enc, CachedEncoder)
    np.testing.assert_allclose(enc.encode(SENTS), ref, atol=1e-6, rtol=0)
    np.testing.assert_allclose(enc.encode(SENTS, normalize=False), ref_raw, atol=1e-6, rtol=0)
    assert enc.stats == {"encoded": 2 * len(SENTS), "served": 0}

    fresh = load_encoder(str(tiny_bert))
    assert isinstance(fresh, CachedEncoder)
    out = fresh.encode(SENTS[::-1] + SENTS)
    assert fresh.inner._model is None, "a fully cached encode must not load the model"
    np.testing.assert_allclose(out, np.concatenate([ref[::-1], ref]), atol=1e-6, rtol=0)
    np.testing.assert_allclose(fresh.encode(SENTS, normalize=False), ref_raw, atol=1e-6, rtol=0)
    assert fresh.inner._model is None
    assert fresh.stats == {"encoded": 0, "served": 2 * len(SENTS)}

    # one new text loads the model and encodes exactly that text
    extra = fresh.encode(SENTS + ["A brand new sentence."])
    assert fresh.inner._model is not None
    assert fresh.stats["encoded"] == 1
    np.testing.assert_allclose(extra[:-1], ref, atol=1e-6, rtol=0)
    np.testing.assert_allclose(extra[-1], plain.encode(["A brand new sentence."])[0], atol=1e-6, rtol=0)


def test_tiny_model_changed_weights_miss_the_cache(tmp_path, tiny_bert):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    enc = load_encoder(str(copy))
    enc.encode(SENTS)
    assert enc.stats["encoded"] == len(SENTS)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # a tiny change to the last weight: still loadable, different identity
    weights.write_bytes(bytes(data))
    changed = load_encoder(str(copy))
    assert changed.identity != enc.identity
    changed.encode(SENTS)
    assert changed.stats == {"encoded": len(SENTS), "served": 0}


# -- corruption ------------------------------------------------------------------------------------------------------
def _populated(texts=TEXTS) -> tuple[CachedEncoder, Path]:
    enc = CachedEncoder(FakeEncoder())
    enc.encode(texts)
    path = enc.store(True).path
    close_all(enc)
    assert path.stat().st_size > 0
    return enc, path


def test_garbage_file_is_moved_aside_and_rebuilt(caplog):
    _, path = _populated()
    size = path.stat().st_size
    path.write_bytes(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())

    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc.encode(TEXTS)
    np.testing.assert_array_equal(out, expected(TEXTS))
    assert fake.texts_encoded == len(TEXTS) and enc.stats == {"encoded": len(TEXTS), "served": 0}
    assert any("damaged" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    aside = list(path.parent.glob(path.name + ".corrupt-*"))
    assert len(aside) == 1 and aside[0].stat().st_size == size
    # rebuilt file is a sound database holding everything
    assert path.exists()
    enc.store(True).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    again = FakeEncoder()
    np.testing.assert_array_equal(CachedEncoder(again).encode(TEXTS), out)
    assert again.calls == 0


def test_truncated_file_is_detected_and_rebuilt(caplog):
    many = [f"a somewhat longer sentence to fill several pages, number {i}" for i in range(600)]
    _, path = _populated(many)
    size = path.stat().st_size
    assert size >= 4 * 4096  # several pages, so that half of it is a real truncation
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)

    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc.encode(many)
    np.testing.assert_array_equal(out, expected(many))
    assert enc.stats == {"encoded": len(many), "served": 0}
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    assert list(path.parent.glob(path.name + ".corrupt-*"))
    enc.store(True).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == len(many)


def test_altered_row_is_re_encoded_alone(caplog):
    _, path = _populated()
    victim = TEXTS[5]
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT vec FROM emb WHERE key = ?", (text_key(victim),)).fetchone()
        bad = bytearray(blob)
        bad[0] ^= 0x40
        conn.execute("UPDATE emb SET vec = ? WHERE key = ?", (bytes(bad), text_key(victim)))
    conn.close()

    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc.encode(TEXTS)
    np.testing.assert_array_equal(out, expected(TEXTS))
    assert fake.seen == [victim]
    assert enc.stats == {"encoded": 1, "served": len(TEXTS) - 1}
    assert any("damaged rows" in r.getMessage() for r in caplog.records)
    assert not list(path.parent.glob("*.corrupt-*"))  # a bad row does not throw the file away
    # the repaired row is stored with a valid crc: next time nothing is encoded
    again = FakeEncoder()
    np.testing.assert_array_equal(CachedEncoder(again).encode(TEXTS), out)
    assert again.calls == 0


def test_row_with_truncated_blob_is_re_encoded(caplog):
    """A vector whose length is not a multiple of 4 (and whose crc was recomputed) is still refused."""
    import zlib

    _, path = _populated()
    victim = TEXTS[7]
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT vec FROM emb WHERE key = ?", (text_key(victim),)).fetchone()
        short = blob[:-1]
        conn.execute("UPDATE emb SET vec = ?, crc = ? WHERE key = ?", (short, zlib.crc32(short), text_key(victim)))
    conn.close()
    fake = FakeEncoder()
    out = CachedEncoder(fake).encode(TEXTS)
    np.testing.assert_array_equal(out, expected(TEXTS))
    assert fake.seen == [victim]


def _set_row(path: Path, text: str, vector: np.ndarray) -> None:
    """Replace the row of ``text`` by ``vector`` with a valid checksum (the damage a CRC cannot see)."""
    import zlib

    blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE emb SET vec = ?, crc = ? WHERE key = ?", (blob, zlib.crc32(blob), text_key(text)))
    conn.close()


@pytest.mark.parametrize("recorded", [True, False], ids=["dim-recorded", "file-from-before-dim"])
def test_row_of_the_wrong_length_with_a_valid_checksum_is_re_encoded(caplog, recorded):
    """A row whose vector has another length than the file's (its checksum valid) is dropped and re-encoded, not
    stacked with the others (which raised on every rerun). A file written before the length was recorded gets it from
    its rows."""
    _, path = _populated()
    victim = TEXTS[3]
    _set_row(path, victim, np.ones(DIM // 2))  # 4 floats instead of 8
    if not recorded:
        with sqlite3.connect(path) as conn:
            assert conn.execute("DELETE FROM meta WHERE k = 'dim'").rowcount == 1
        conn.close()
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc.encode(TEXTS)
    np.testing.assert_array_equal(out, expected(TEXTS))
    assert fake.seen == [victim] and enc.stats == {"encoded": 1, "served": len(TEXTS) - 1}
    assert any("damaged rows" in r.getMessage() for r in caplog.records)
    again = FakeEncoder()
    np.testing.assert_array_equal(CachedEncoder(again).encode(TEXTS), out)
    assert again.calls == 0  # repaired for good


def test_a_file_whose_rows_are_all_of_another_length_is_moved_aside(caplog):
    """Every row of a file from before the length was recorded has the wrong length (so it is taken for the file's):
    the encoder's first new vector shows it; the file is moved aside and every text encoded again."""
    _, path = _populated(TEXTS[:5])
    for text in TEXTS[:5]:
        _set_row(path, text, np.ones(DIM + 4))
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE k = 'dim'")
    conn.close()
    fake = FakeEncoder()
    enc = CachedEncoder(fake)
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc.encode(TEXTS[:8])  # 5 rows served with 12 floats, 3 new texts encoded with 8
    np.testing.assert_array_equal(out, expected(TEXTS[:8]))
    assert sorted(fake.seen) == sorted(TEXTS[:8]) and enc.stats == {"encoded": 8, "served": 0}
    assert list(path.parent.glob(path.name + ".corrupt-*")) and any("damaged" in r.getMessage() for r in caplog.records)
    again = FakeEncoder()
    np.testing.assert_array_equal(CachedEncoder(again).encode(TEXTS[:8]), out)
    assert again.calls == 0


def test_a_meta_length_that_is_not_a_number_moves_the_file_aside():
    _, path = _populated()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET v = 'eight' WHERE k = 'dim'")
    conn.close()
    fake = FakeEncoder()
    np.testing.assert_array_equal(CachedEncoder(fake).encode(TEXTS), expected(TEXTS))
    assert fake.texts_encoded == len(TEXTS) and list(path.parent.glob(path.name + ".corrupt-*"))


def test_store_for_other_identity_in_same_file_is_refused(caplog):
    """A file whose meta says another model must not be trusted (e.g. a file copied under the wrong name)."""
    enc_a, path_a = _populated()
    enc_b = CachedEncoder(FakeEncoder("fake:other"))
    path_b = enc_b.store(True).path
    path_b.parent.mkdir(parents=True, exist_ok=True)
    path_b.write_bytes(path_a.read_bytes())
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.cache"):
        out = enc_b.encode(TEXTS)
    np.testing.assert_array_equal(out, expected(TEXTS, identity="fake:other"))
    assert enc_b.stats == {"encoded": len(TEXTS), "served": 0}


def test_put_many_is_all_or_nothing():
    store = EmbeddingStore("fake:atomic", True)
    keys = [text_key(t) for t in TEXTS[:5]]
    store.put_many(keys, expected(TEXTS[:5]))
    assert len(store) == 5
    conn = store._connect()
    conn.execute("CREATE TRIGGER boom BEFORE INSERT ON emb WHEN NEW.key = x'00' BEGIN SELECT RAISE(ABORT, 'x'); END")
    new_keys = [text_key(t) for t in TEXTS[5:8]] + [b"\x00"]
    with pytest.raises(sqlite3.DatabaseError):
        store._put_rows([(k, b"\0\0\0\0", 0) for k in new_keys])
    assert len(store) == 5  # none of the batch landed
    store.close()


# -- several processes writing one cache at once ---------------------------------------------------------------------
def test_concurrent_processes_share_one_cache(tmp_path):
    cache = tmp_path / "shared-cache"
    go = tmp_path / "go"
    n_workers, rounds = 3, 6
    env = {
        **os.environ,
        "MLSE_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.fake_encoder", str(cache), str(w), str(n_workers), str(rounds), str(go)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n_workers)
    ]
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert out.startswith("worker ") and " ok " in out

    union = {t for w in range(n_workers) for t in worker_texts(w, n_workers)}
    files = store_files(cache)
    assert len(files) == 1
    rows = stored_keys(files[0])
    assert set(rows) == {text_key(t) for t in union}
    for t in union:
        np.testing.assert_array_equal(np.frombuffer(rows[text_key(t)], dtype=np.float32), fake_vector(t))
    with sqlite3.connect(files[0]) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not list(cache.glob("embeddings/*.corrupt-*"))
    # every text was encoded at least once in total, and the cache now serves them all
    fake = FakeEncoder()
    enc = CachedEncoder(fake, root=cache)
    np.testing.assert_array_equal(enc.encode(sorted(union)), expected(sorted(union)))
    assert fake.calls == 0


class _ConstantEncoder:
    name = identity = "fake-threads"

    def encode(self, texts, normalize=True, batch_size=64, show_progress=None):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_one_cached_encoder_serves_several_threads(tmp_path):
    """The app shares one loaded model between Gradio's worker threads: the SQLite store must too."""
    enc = CachedEncoder(_ConstantEncoder(), root=tmp_path)
    enc.encode(["a", "b"])  # opens the SQLite connection in this thread
    errors = []

    def other_thread():
        try:
            enc.encode(["a", "b", "c"])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert not errors, errors
    assert enc.stats["served"] >= 2 and len(list((tmp_path / "embeddings").glob("*.corrupt-*"))) == 0
