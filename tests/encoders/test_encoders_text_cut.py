"""Texts cut to what a model reads before tokenising (:mod:`mlse.encoders.text_cut`): the function on hand-made texts,
then every encode path: the same vectors with and without the cut on long texts (thousands of words, no spaces, CJK),
and a huge text reaches the tokenizer bounded."""

from __future__ import annotations

import numpy as np
import pytest

import mlse.encoders.onnx.runtime as onnx_runtime
import mlse.encoders.torch as torch_encoder
import mlse.encoders.use as use_encoder
from mlse.encoders.load import load_encoder
from mlse.encoders.text_cut import (
    chars_per_token,
    cut_groups,
    cut_text,
    cut_texts,
    model_max_tokens,
    tokenizer_chars_per_token,
)


# -- the function -----------------------------------------------------------------------------------------------------
def test_a_short_text_is_returned_as_it_is():
    text = "a b c d"
    assert cut_text(text, 4, 32) is text  # 7 characters < 2 x 4: at most 4 words, nothing to cut
    assert cut_text("a b c d e", 4, 32) == "a b c d"


def test_the_cut_ends_after_the_max_tokens_th_word():
    words = [f"w{i}" for i in range(100)]
    assert cut_text(" ".join(words), 10, 32) == " ".join(words[:10])
    mixed = "one\ttwo\nthree\r\nfour  five six"  # tab, LF, CRLF and runs of spaces all separate words
    assert cut_text(mixed, 4, 32) == "one\ttwo\nthree\r\nfour"


def test_words_without_a_letter_or_digit_are_kept_but_not_counted():
    # "--", "." and "\x01" may give no token (normalisation deletes control characters): not counted
    assert cut_text("a -- b . c \x01 d e f g h", 4, 32) == "a -- b . c \x01 d"
    # characters other than space, tab, LF, CR do not separate words (a tokenizer may join "a\x0bb" into "ab")
    assert cut_text("a\x0bb c d e f g h i", 4, 32) == "a\x0bb c d e"


def test_the_character_bound_keeps_chars_of_the_word_it_ends_in():
    assert cut_text("x" * 1000, 10, 32) == "x" * 320
    text = "a" * 38 + " " + "b" * 100  # the bound (40) falls 1 character into the b-word: 10 of its characters kept
    assert cut_text(text, 4, 10) == "a" * 38 + " " + "b" * 10
    short_word = "a" * 38 + " " + "b" * 5 + " " + "c" * 100  # ... unless the word ends first
    assert cut_text(short_word, 4, 10) == "a" * 38 + " " + "b" * 5
    at_a_space = "a" * 39 + " " + "b" * 100
    assert cut_text(at_a_space, 4, 10) == "a" * 39 + " "  # the bound between two words: no part of the next


def test_the_word_rule_and_the_character_bound_together():
    text = " ".join(["word"] * 50)  # 50 words of 4 characters: the 10th ends at 49 < 10 x 32
    assert cut_text(text, 10, 32) == " ".join(["word"] * 10)
    long_words = " ".join(["x" * 50] * 20)  # 10 words span 509 characters > 10 x 32: the bound cuts first,
    assert cut_text(long_words, 10, 32) == long_words[: 6 * 51 + 32]  # in the 7th word, of which 32 are kept


def test_cut_texts_asks_for_c_only_when_a_text_needs_it():
    def boom():
        raise AssertionError("C was computed for short texts")

    assert cut_texts(["a b", "c"], 8, boom) == ["a b", "c"]
    assert cut_texts(["x" * 100], None, boom) == ["x" * 100]  # a model with no bound: nothing is cut
    assert cut_texts(["x" * 100], 8, lambda: 4) == ["x" * 32]


def test_chars_per_token_and_cut_groups():
    assert chars_per_token(16) == 32 and chars_per_token(18, 100) == 101 and chars_per_token(0) == 2
    texts = ["a", "b " * 50, "c"]
    assert cut_groups(texts, texts) == [[0, 1, 2]]
    assert cut_groups(texts, ["a", "b b", "c"]) == [[0, 2], [1]]


def test_c_of_the_tiny_tokenizers(tiny_bert, tiny_xlmr):
    from tokenizers import Tokenizer

    bert = Tokenizer.from_file(str(tiny_bert / "tokenizer.json"))
    assert tokenizer_chars_per_token(bert) == 101  # WordPiece: a word over 100 characters is one [UNK]
    xlmr = Tokenizer.from_file(str(tiny_xlmr / "tokenizer.json"))
    assert tokenizer_chars_per_token(xlmr) == 2 * max(len(p) for p in xlmr.get_vocab())


# -- every encode path: the same vectors, and a bounded tokenizer input ----------------------------------------------
def long_texts(data_dir, repeat: int = 1) -> dict[str, str]:
    """Thousands of English words, the same without spaces, Chinese without spaces, Russian joined by newlines, and
    single letters (a token each: a cut that kept a word too few would change what the model reads)."""
    flores = data_dir / "flores200_devtest"

    def lines(lang: str) -> list[str]:
        return [s for s in (flores / f"{lang}.devtest").read_text(encoding="utf-8").split("\n") if s.strip()]

    eng = lines("eng_Latn")[:200] * repeat
    return {
        "words": " ".join(eng),
        "nospace": "".join(eng).replace(" ", ""),
        "cjk": "".join(lines("zho_Hans")[:300] * repeat),
        "newlines": "\n".join(lines("rus_Cyrl")[:150] * repeat),
        "letters": " ".join("abcdefghijklmnopqrstuvwxyz" * 400 * repeat),
        "short": "A man is playing a flute.",
    }


def without_cut(monkeypatch) -> None:
    """Every encode path tokenises whole texts, as before the cut."""
    for module in (torch_encoder, onnx_runtime, use_encoder):
        monkeypatch.setattr(module, "cut_texts", lambda texts, *args: list(texts))


def same_vectors_with_and_without_the_cut(encoder, texts: dict[str, str], monkeypatch) -> None:
    cut = encoder.encode(list(texts.values()), batch_size=4)
    with monkeypatch.context() as m:
        without_cut(m)
        whole = encoder.encode(list(texts.values()), batch_size=4)
    for i, kind in enumerate(texts):
        np.testing.assert_allclose(cut[i], whole[i], atol=2e-6, err_msg=kind)


TINY_E5_TOKENS = 32


@pytest.fixture(scope="module")
def tiny_e5(tmp_path_factory):
    """A tiny model with e5's tokenizer pipeline: encoded by the compact tokenizer (mlse.encoders.torch)."""
    from mlse.encoders import e5
    from tests.e5_format_writer import build_tiny, write_e5

    source = write_e5(tmp_path_factory.mktemp("e5-file") / "tiny-q4.bin", build_tiny(seed=0))
    out = tmp_path_factory.mktemp("e5-converted") / "me5-tiny"
    out.mkdir()
    e5.convert(source, out)
    return out


@pytest.mark.parametrize(
    ("model", "backend"),
    [("tiny_bert", "torch"), ("tiny_xlmr", "torch"), ("tiny_e5", "torch"), ("tiny_bert", "onnx")],
    ids=["wordpiece", "unigram", "compact", "onnx"],
)
def test_tiny_models_read_the_same_with_and_without_the_cut(request, monkeypatch, data_dir, model, backend):
    # the tiny e5 has 40 positions but names no max_seq_length of its own
    kwargs = {"max_seq_length": TINY_E5_TOKENS} if model == "tiny_e5" else {}
    encoder = load_encoder(str(request.getfixturevalue(model)), backend=backend, cache=False, **kwargs)
    if model == "tiny_e5":
        assert encoder.compact_runner() is not None
    same_vectors_with_and_without_the_cut(encoder, long_texts(data_dir), monkeypatch)


def test_a_huge_text_reaches_the_tokenizer_bounded(monkeypatch, tiny_bert, tiny_e5):
    huge = "word " * 1_000_000  # 5 MB
    seen: list[int] = []

    plain = load_encoder(str(tiny_bert), cache=False)
    tokenizer_type = type(plain.model[0].tokenizer)
    call = tokenizer_type.__call__

    def spy(self, text=None, *args, **kwargs):
        seen.extend(len(t) for t in (text if isinstance(text, list) else [text]) if isinstance(t, str))
        return call(self, text, *args, **kwargs)

    monkeypatch.setattr(tokenizer_type, "__call__", spy)
    plain.encode([huge, "a short one"])
    assert model_max_tokens(plain.model) == 64
    assert sorted(seen) == [len("a short one"), 64 * len("word ") - 1]  # the first 64 words, apart from the short one

    compact = load_encoder(str(tiny_e5), cache=False, max_seq_length=TINY_E5_TOKENS)
    runner = compact.compact_runner()
    encode_ids = runner.tokenizer.encode_ids
    seen.clear()
    monkeypatch.setattr(runner.tokenizer, "encode_ids", lambda texts: seen.extend(map(len, texts)) or encode_ids(texts))
    compact.encode([huge, "x" * 5_000_000])
    limit, c = model_max_tokens(runner.st), runner.tokenizer.chars_per_token()
    assert len(seen) == 2 and max(seen) <= limit * c + c + len(runner.prefix)


def test_a_huge_text_reaches_the_onnx_tokenizer_bounded(monkeypatch, tiny_bert):
    encoder = load_encoder(str(tiny_bert), backend="onnx", cache=False)
    encoder.encode(["warm up"])
    seen: list[int] = []
    encode_ids = encoder._tokenizer.encode_ids
    monkeypatch.setattr(
        encoder._tokenizer, "encode_ids", lambda texts: seen.extend(map(len, texts)) or encode_ids(texts)
    )
    encoder.encode(["word " * 1_000_000, "y" * 5_000_000])
    assert sorted(seen) == [64 * len("word ") - 1, 64 * encoder.chars_per_token()]


@pytest.fixture(scope="module")
def muse():
    encoder = use_encoder.UseEncoder()
    encoder.encode(["warm up"])
    return encoder


def test_muse_reads_at_most_max_tokens_and_the_cut_changes_none_of_them(monkeypatch, muse, data_dir):
    texts = long_texts(data_dir, repeat=3)  # cjk: 300 lines x 3 ~ 29,000 characters; words ~ 13,000 words
    texts["long_cjk"] = texts["cjk"] * 4  # over 2,048 x 32 characters: the character bound
    ids = muse.token_ids(list(texts.values()))
    assert max(map(len, ids)) == use_encoder.MAX_TOKENS and len(ids[-2]) < 100  # the short one
    with monkeypatch.context() as m:
        without_cut(m)
        assert muse.token_ids(list(texts.values())) == ids  # the first MAX_TOKENS ids of the whole text
    same_vectors_with_and_without_the_cut(muse, texts, monkeypatch)


def test_a_huge_text_reaches_the_muse_tokenizer_bounded(monkeypatch, muse):
    seen: list[int] = []
    tokenize, c = muse._tokenize, muse.chars_per_token()
    monkeypatch.setattr(muse, "_tokenize", lambda texts: seen.extend(map(len, texts)) or tokenize(texts))
    vectors = muse.encode(["word " * 2_000_000, "z" * 10_000_000, "word"])
    assert seen == [use_encoder.MAX_TOKENS * len("word ") - 1, use_encoder.MAX_TOKENS * c, len("word")]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow  # converts and loads me5-small, loads minilm-en: a minute on two busy cores
@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_packaged_models_read_the_same_with_and_without_the_cut(monkeypatch, data_dir, backend):
    texts = long_texts(data_dir, repeat=2)  # cjk ~ 20,000 characters: over me5-small's 512 x 32
    for name in ("me5-small", "minilm-en"):
        same_vectors_with_and_without_the_cut(load_encoder(name, backend=backend, cache=False), texts, monkeypatch)
