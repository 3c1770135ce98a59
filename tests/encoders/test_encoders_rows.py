"""Embedding rows read from their file on demand (mlse.encoders.rows): the same values as the array, from a .npy or a
safetensors tensor, a bounded cache, no resident mapping; and the torch runtime's word-embedding layer swapped for it
at inference only, with bit-identical vectors."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.encoders.load import load_encoder
from mlse.encoders.rows import RowFile
from mlse.encoders.torch import load_sentence_transformer, rows_from_file


@pytest.fixture()
def table(tmp_path):
    values = np.random.default_rng(0).standard_normal((1000, 48)).astype(np.float32)  # [V, H]
    np.save(tmp_path / "table.npy", values)
    return values, tmp_path / "table.npy"


def test_rows_equal_the_array_for_any_id_shape(table):
    values, path = table
    rows = RowFile.from_npy(path)
    ids = np.array([[3, 999, 3, 0], [5, 5, 5, 5]])
    np.testing.assert_array_equal(rows[ids], values[ids])
    assert rows[np.array([], dtype=np.int64)].shape == (0, 48) and rows.shape[0] == 1000
    with pytest.raises(IndexError):
        rows[np.array([1000])]


def test_safetensors_tensor_by_name(tmp_path):
    from safetensors.numpy import save_file

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_file({"small": np.ones(2, dtype=np.float32), "emb.weight": a}, str(tmp_path / "m.safetensors"))
    rows = RowFile.from_safetensors(tmp_path / "m.safetensors", "emb.weight")
    np.testing.assert_array_equal(rows[np.array([2, 0])], a[[2, 0]])
    assert RowFile.from_safetensors(tmp_path / "m.safetensors", "small") is None  # not 2-D
    assert RowFile.from_safetensors(tmp_path / "m.safetensors", "missing") is None


def test_cache_is_bounded_and_least_recently_used_goes(table):
    values, path = table
    rows = RowFile(path, RowFile.from_npy(path).offset, (1000, 48), np.float32, cache_bytes=3 * 48 * 4)
    rows[np.array([1, 2, 3])]
    rows[np.array([1])]  # 1 is now the most recent
    rows[np.array([4])]  # 2 goes
    assert sorted(rows._cache) == [1, 3, 4]  # 2, not 1, went: recency counts
    np.testing.assert_array_equal(rows[np.array([2, 4])], values[[2, 4]])


def test_reading_rows_maps_nothing(tmp_path):
    """A memory-mapped table gets resident pages around every row read; read rows do not."""
    big = tmp_path / "big.npy"
    np.lib.format.open_memmap(big, mode="w+", dtype=np.float32, shape=(100_000, 256))[:] = 1.0  # 100 MB
    rows = RowFile.from_npy(big)
    before = _rss_file_mb()
    rows[np.random.default_rng(0).integers(0, 100_000, 5000)]
    assert _rss_file_mb() - before < 5


def _rss_file_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile"):
            return int(line.split()[1]) / 1024
    pytest.skip("no /proc")


@pytest.mark.parametrize("which", ["tiny_bert", "tiny_xlmr"])
def test_inference_model_reads_word_embeddings_from_the_file_bit_identically(request, which, data_dir):
    from mlse.data import load_flores

    folder = request.getfixturevalue(which)
    texts = [s for sents in load_flores(["eng_Latn", "deu_Latn", "zho_Hans"], data_dir).values() for s in sents[:10]]
    ordinary = load_sentence_transformer(folder, device="cpu").encode(texts, convert_to_numpy=True)
    encoder = load_encoder(str(folder), cache=False)
    emb = encoder.model[0].auto_model.get_input_embeddings()
    assert type(emb).__name__ == "FileEmbedding"
    assert np.array_equal(encoder.model.encode(texts, convert_to_numpy=True), ordinary)


def test_training_keeps_an_ordinary_embedding(tiny_bert):
    st = load_sentence_transformer(tiny_bert, device="cpu")
    assert type(st[0].auto_model.get_input_embeddings()).__name__ == "Embedding"
    assert rows_from_file(st, tiny_bert)  # the inference swap is a separate, explicit step
    assert type(st[0].auto_model.get_input_embeddings()).__name__ == "FileEmbedding"
