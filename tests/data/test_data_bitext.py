"""mlse.data.bitext: the one filtered bitext loader. Stage 1 and fine-tuning still select exactly the sentence pairs
they selected before they shared it (the expected selections below are computed with each caller's old formula)."""

from __future__ import annotations

import numpy as np

from mlse.data.bitext import load_filtered_bitext, same_seed, seed_per_pair
from mlse.data.contamination import evaluation_sentences, filter_contaminated
from mlse.data.parallel import default_labels, load_parallel
from mlse.train.config import FinetuneConfig
from mlse.train.finetune_data import english_first, prepare_data
from mlse.train.head_training import stage1_data
from tests.fake_encoder import FakeEncoder, fake_vector


def _clean(pair: str, data_dir):
    a, _, b = pair.partition("-")
    corpus = load_parallel(pair, data_dir, src_labels=default_labels(a), tgt_labels=default_labels(b))
    return filter_contaminated(corpus, evaluation_sentences(data_dir))[0]


def test_stage1_selects_what_it_selected_before(data_dir):
    pairs, max_pairs, seed = ["eng-deu", "eng-fra"], 30, 3
    src, tgt = [], []
    for pair in pairs:  # the old formula: every pair sampled with default_rng(seed)
        clean = _clean(pair, data_dir)
        keep = np.sort(np.random.default_rng(seed).choice(len(clean), max_pairs, replace=False))
        src += [clean.src[i] for i in keep]
        tgt += [clean.tgt[i] for i in keep]
    data = stage1_data(FakeEncoder(), pairs=pairs, max_pairs=max_pairs, data_dir=data_dir, seed=seed)
    np.testing.assert_array_equal(data.X_a, np.stack([fake_vector(t) for t in src]))
    np.testing.assert_array_equal(data.X_b, np.stack([fake_vector(t) for t in tgt]))
    assert data.lang_a == ["eng"] * 60 and data.lang_b == ["deu"] * 30 + ["fra"] * 30
    assert data.info["n_pairs"] == 60
    assert {p: info["used"] for p, info in data.info["pairs"].items()} == dict.fromkeys(pairs, 30)


def test_finetuning_selects_and_shuffles_what_it_did_before(data_dir):
    cfg = FinetuneConfig(pairs=["de-en", "en-fr"], max_pairs=25, seed=5, data_dir=str(data_dir))
    src, tgt = [], []
    for i, pair in enumerate(cfg.pairs):  # the old formula: pair i sampled with default_rng([seed, i]), then shuffled
        a, b = english_first(pair)
        clean = _clean(f"{a}-{b}", data_dir)
        keep = np.sort(np.random.default_rng([cfg.seed, i]).choice(len(clean), cfg.max_pairs, replace=False))
        src += [clean.src[j] for j in keep]
        tgt += [clean.tgt[j] for j in keep]
    order = np.random.default_rng(cfg.seed).permutation(len(src))
    data = prepare_data(cfg)
    assert data.src == [src[j] for j in order] and data.tgt == [tgt[j] for j in order]
    assert list(data.info["pairs"]) == ["en-de", "en-fr"] and data.info["n_pairs"] == 50


def test_no_cap_keeps_every_clean_pair_in_file_order(data_dir):
    clean = _clean("eng-deu", data_dir)
    bitext = load_filtered_bitext(["eng-deu"], max_pairs=None, sample_seed=same_seed(0), data_dir=data_dir)
    assert bitext.src == clean.src and bitext.tgt == clean.tgt
    info = bitext.info["pairs"]["eng-deu"]
    assert info["used"] == len(clean) and info["used"] + info["contaminated_dropped"] == info["available"]
    assert all(len(sha) == 64 for sha in bitext.info["data"].values())


def test_the_two_seedings():
    assert same_seed(7)(0) == same_seed(7)(3) == 7
    assert seed_per_pair(7)(3) == [7, 3]


def test_non_english_pairs_keep_their_sides_and_leave_the_english_pairs_selection_alone(data_dir):
    # the X-Y recipe appends NON_ENGLISH_PAIRS after the English ones: pair i keeps its seed [seed, i], so the
    # English pairs train on the same sentences as without them, and an X-Y pair is not turned round
    english = load_filtered_bitext(["en-de"], max_pairs=20, sample_seed=seed_per_pair(1), data_dir=data_dir)
    both = load_filtered_bitext(["en-de", "fr-es"], max_pairs=20, sample_seed=seed_per_pair(1), data_dir=data_dir)
    assert both.src[:20] == english.src and both.tgt[:20] == english.tgt
    assert both.src_lang[20:] == ["fr"] * 20 and both.tgt_lang[20:] == ["es"] * 20
    assert english_first("fr-es") == ("fr", "es")
    clean = _clean("fr-es", data_dir)
    assert set(zip(both.src[20:], both.tgt[20:], strict=True)) <= set(zip(clean.src, clean.tgt, strict=True))
