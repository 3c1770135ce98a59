"""Dropping training pairs that overlap evaluation sentences."""

# ruff: noqa: F811  (pytest fixtures imported from tests/conftest_data.py are re-bound as arguments)

from __future__ import annotations

import logging

from mlse.data import (
    ParallelCorpus,
    evaluation_sentences,
    filter_contaminated,
    load_parallel,
    load_sts,
    load_tatoeba,
    normalize_sentence,
)
from tests.conftest_data import data_dir  # noqa: F401  (fixture; its use as an argument is F811 below)


def test_normalize_sentence():
    assert normalize_sentence("  Cafe\u0301 \t au\u00a0 lait\n") == "Café au lait"  # NFC + whitespace
    assert normalize_sentence("Tom") != normalize_sentence("tom")  # case-sensitive
    assert normalize_sentence("a\u3000b") == "a b"


def test_hand_made_corpus_exact_count(caplog):
    corpus = ParallelCorpus(
        src=["Hallo Welt", "Guten  Morgen", "Danke", "Bitte", "Tschüss", "Ja"],
        tgt=["Hello world", "Good morning", "Thanks", "Please", "Bye", "Yes"],
        src_lang="deu",
        tgt_lang="eng",
        name="toy",
    )
    # src hit (after whitespace normalisation), tgt hit, both sides of one pair: 3 pairs, not 4.
    eval_set = {"Guten Morgen", "Thanks", "Bitte", "Please", "unrelated"}
    with caplog.at_level(logging.INFO, logger="mlse.data.contamination"):
        clean, dropped = filter_contaminated(corpus, eval_set)
    assert dropped == 3
    assert clean.src == ["Hallo Welt", "Tschüss", "Ja"]
    assert clean.tgt == ["Hello world", "Bye", "Yes"]
    assert (clean.src_lang, clean.tgt_lang, clean.name) == ("deu", "eng", "toy")
    assert len(corpus) == 6  # the input is left alone
    assert any("dropped 3 of 6" in r.getMessage() for r in caplog.records)
    assert filter_contaminated(corpus, set())[1] == 0


def test_real_deu_eng_overlap_with_laser_tatoeba(data_dir):
    corpus = load_parallel("deu-eng", data_dir)
    laser = load_tatoeba("deu", data_dir)
    laser_pairs = {(normalize_sentence(s), normalize_sentence(t)) for s, t in zip(laser.src, laser.tgt)}
    identical = {
        p
        for p in ((normalize_sentence(s), normalize_sentence(t)) for s, t in zip(corpus.src, corpus.tgt))
        if p in laser_pairs
    }
    assert len(identical) >= 35  # OVERLAP_WITH_LASER_TATOEBA_V1.md: 35 identical pairs

    eval_set = evaluation_sentences(data_dir, tatoeba=["de"], sts_splits=())
    assert len(eval_set) > 1000  # both sides of 1,000 pairs, minus duplicates
    clean, dropped = filter_contaminated(corpus, eval_set)
    assert dropped >= 35
    assert dropped == len(corpus) - len(clean)
    remaining = {(normalize_sentence(s), normalize_sentence(t)) for s, t in zip(clean.src, clean.tgt)}
    assert not remaining & laser_pairs
    assert not any(
        normalize_sentence(s) in eval_set or normalize_sentence(t) in eval_set for s, t in zip(clean.src, clean.tgt)
    )


def test_evaluation_sentences_scope_and_memo(data_dir):
    sts_only = evaluation_sentences(data_dir, tatoeba=False, sts_splits=("test",))
    sts_test = load_sts("ja", "test", data_dir)
    assert normalize_sentence(sts_test.s1[0]) in sts_only
    assert normalize_sentence(sts_test.s2[-1]) in sts_only
    deu = load_tatoeba("deu", data_dir)
    assert normalize_sentence(deu.src[0]) not in sts_only
    everything = evaluation_sentences(data_dir)
    assert sts_only < everything
    assert normalize_sentence(deu.src[0]) in everything and normalize_sentence(deu.tgt[0]) in everything
    dev = load_sts("de", "dev", data_dir)
    assert normalize_sentence(dev.s2[0]) in everything
    again = evaluation_sentences(data_dir)
    assert again == everything and again is not everything  # memoised, but callers get their own set
    again.clear()
    assert evaluation_sentences(data_dir) == everything
