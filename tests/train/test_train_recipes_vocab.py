"""Vocabulary extension (mlse.train.recipes.vocab) and the fine-tuning options that came with it (bucketing, bf16
autocast)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mlse.data import default_labels, load_parallel
from mlse.dirs import runs_dir
from mlse.encoders.load import load_encoder
from mlse.encoders.torch import load_sentence_transformer
from mlse.errors import MlseError
from mlse.train.config import FinetuneConfig
from mlse.train.device import resolve_precision
from mlse.train.finetune import finetune
from mlse.train.loop import epoch_batches
from mlse.train.recipes.vocab import aligned_init, extend_model_vocabulary, learn_wordpiece, merged_vocab, subword_init
from mlse.train.student_model import AutocastForward


def _ids(model, text: str) -> list[int]:
    return model.preprocess([text])["input_ids"][0].tolist()


def _parallel(data_dir, pair="en-ru", n=300):
    a, b = pair.split("-")
    corpus = load_parallel(pair, data_dir, src_labels=default_labels(a), tgt_labels=default_labels(b))
    return corpus.src[:n], corpus.tgt[:n]


def test_merged_vocab_keeps_old_ids_and_appends_only_new_pieces():
    old = {"[PAD]": 0, "[UNK]": 1, "dog": 2, "##s": 3}
    merged = merged_vocab(old, ["[PAD]", "hund", "dog", "##e", "hund"])
    assert merged == {"[PAD]": 0, "[UNK]": 1, "dog": 2, "##s": 3, "hund": 4, "##e": 5}


def test_learned_wordpiece_keeps_accents_when_asked():
    texts = ["für über schön", "für schön", "über für"] * 20
    kept = learn_wordpiece(texts, 200, strip_accents=False)
    stripped = learn_wordpiece(texts, 200, strip_accents=True)
    assert "für" in kept and "fur" not in kept
    assert "fur" in stripped and "für" not in stripped
    assert kept[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_aligned_init_follows_the_strongest_cooccurrence():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(6, 4)).astype(np.float32)  # old pieces 0..5 (0 = special)
    # new piece 6 always appears with old piece 3, new piece 7 with old piece 4 (and 3 once); piece 8 is too rare
    src = [[0, 3], [0, 3], [0, 3], [0, 4], [0, 4], [0, 4], [0, 3, 4], [5]]
    tgt = [[6], [6], [6], [7], [7], [7], [6, 7], [8]]
    out = aligned_init(src, tgt, np.array([6, 7, 8]), emb, excluded_old=[0], top_k=1, min_count=2)
    np.testing.assert_allclose(out[6], emb[3], rtol=1e-6)  # top-1: the embedding of its translation, same norm
    np.testing.assert_allclose(out[7], emb[4], rtol=1e-6)
    assert 8 not in out  # one co-occurrence < min_count: left to the fallback


def test_aligned_init_weights_by_dice_and_keeps_the_norm():
    emb = np.array([[0, 0], [2, 0], [0, 1]], dtype=np.float32)
    src = [[1, 2], [1, 2], [1], [1]]
    tgt = [[3], [3], [3], [3]]  # piece 3 co-occurs with 1 in 4 pairs (dice 1) and with 2 in 2 pairs (dice 2/3)
    out = aligned_init(src, tgt, np.array([3]), emb, top_k=2, min_count=1)
    w = np.array([1.0, 2 / 3]) / (1 + 2 / 3)
    direction = w[0] * emb[1] + w[1] * emb[2]
    expected_norm = w[0] * 2 + w[1] * 1
    np.testing.assert_allclose(out[3], direction / np.linalg.norm(direction) * expected_norm, rtol=1e-5)


def test_subword_init_is_the_mean_of_the_old_pieces(tiny_bert):
    model = load_sentence_transformer(tiny_bert, device="cpu")
    tok = model[0].tokenizer
    emb = model[0].auto_model.get_input_embeddings().weight.detach().numpy()
    pieces = tok.tokenize("the house")
    out = subword_init(["##the", "the"], tok, emb)
    ids = tok.convert_tokens_to_ids(tok.tokenize("the"))
    np.testing.assert_allclose(out[0], emb[ids].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(out[1], out[0])
    assert pieces  # the tiny vocabulary covers plain English


def test_extension_shortens_foreign_text_and_leaves_english_alone(tiny_bert, data_dir, tmp_path):
    model = load_sentence_transformer(tiny_bert, device="cpu")
    model.eval()
    english, russian = _parallel(data_dir)
    probe_en = "The dog is sleeping in the garden."
    before_ids, before_emb = _ids(model, probe_en), model.encode([probe_en])
    before_ru = np.mean([len(_ids(model, t)) for t in russian[:50]])
    old_size = len(model[0].tokenizer.get_vocab())

    report = extend_model_vocabulary(model, russian, vocab_size=2000, parallel=(english, russian))

    assert report.added > 100 and report.new_size == old_size + report.added
    assert report.init_aligned + report.init_subword + report.init_mean == report.added
    assert report.init_aligned > 0
    assert _ids(model, probe_en) == before_ids
    np.testing.assert_allclose(model.encode([probe_en]), before_emb, atol=1e-6)
    after_ru = np.mean([len(_ids(model, t)) for t in russian[:50]])
    assert after_ru < 0.8 * before_ru
    assert model[0].auto_model.get_input_embeddings().weight.shape[0] == report.new_size

    out = tmp_path / "extended"
    model.save(str(out), create_model_card=False)
    reloaded = load_encoder(str(out), device="cpu", cache=False)  # the registry's own loader
    np.testing.assert_allclose(reloaded.encode(russian[:3], normalize=False), model.encode(russian[:3]), atol=1e-5)


def test_extension_refuses_sentencepiece_and_empty_text(tiny_xlmr, tiny_bert):
    xlmr = load_sentence_transformer(tiny_xlmr, device="cpu")
    with pytest.raises(MlseError, match="WordPiece"):
        extend_model_vocabulary(xlmr, ["привет мир"], vocab_size=500, init="subword")
    bert = load_sentence_transformer(tiny_bert, device="cpu")
    with pytest.raises(MlseError, match="needs text"):
        extend_model_vocabulary(bert, ["  ", ""], vocab_size=500, init="subword")
    with pytest.raises(MlseError, match="parallel"):
        extend_model_vocabulary(bert, ["привет мир"], vocab_size=500)


def test_finetune_with_extended_vocabulary_saves_a_model_with_it(tiny_bert):
    out = runs_dir() / "ext"
    cfg = FinetuneConfig(
        method="mse",
        teacher=str(tiny_bert),
        student=str(tiny_bert),
        pairs=["en-ru"],
        max_pairs=64,
        budget_minutes=2.0,
        max_steps=2,
        batch_size=8,
        lr=1e-3,
        eval_every_steps=2,
        dev_pairs=["en-ru"],
        dev_max_pairs=32,
        out=str(out),
        extend_vocab=1000,
    )
    finetune(cfg)
    config = json.loads((out / "finetune_config.json").read_text())
    added = config["vocab_extension"]["added"]
    assert added > 0
    saved = load_sentence_transformer(out / "model", device="cpu")
    base = load_sentence_transformer(tiny_bert, device="cpu")
    assert len(saved[0].tokenizer.get_vocab()) == len(base[0].tokenizer.get_vocab()) + added


def test_finetune_refuses_bad_precision_and_vocab_options(tiny_bert):
    for bad, match in [
        ({"precision": "fp8"}, "precision"),
        ({"vocab_init": "random"}, "vocab_init"),
        ({"extend_vocab": 5}, "extend_vocab"),
    ]:
        with pytest.raises(MlseError, match=match):
            finetune(FinetuneConfig(student=str(tiny_bert), teacher=str(tiny_bert), **bad))


def test_epoch_batches_cover_every_index_once_and_bucket_by_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, size=1000)
    plain = epoch_batches(1000, 16, np.random.default_rng(1))
    bucketed = epoch_batches(1000, 16, np.random.default_rng(1), lengths, chunk_batches=10)
    for batches in (plain, bucketed):
        flat = np.concatenate(batches)
        assert sorted(flat.tolist()) == list(range(1000))
        assert all(len(b) == 16 for b in batches[:-1]) or len(batches[-1]) <= 16

    def padding(batches):  # padded positions if each batch pads to its longest member
        return sum(lengths[b].max() * len(b) - lengths[b].sum() for b in batches)

    assert padding(bucketed) < 0.3 * padding(plain)
    # the batch order is shuffled: batch lengths are not monotone over the epoch
    means = [lengths[b].mean() for b in bucketed]
    assert not (np.all(np.diff(means) >= 0) or np.all(np.diff(means) <= 0))


def test_autocast_forward_returns_float32_close_to_fp32(tiny_bert):
    model = load_sentence_transformer(tiny_bert, device="cpu")
    model.eval()
    features = model.preprocess(["a man plays the flute", "der Hund schläft"])
    with torch.no_grad():
        full = AutocastForward(model, "cpu")(features)["sentence_embedding"]
        mixed = AutocastForward(model, "cpu", torch.bfloat16)(features)["sentence_embedding"]
    assert mixed.dtype == torch.float32
    assert torch.allclose(full, mixed, atol=5e-2)
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("auto", "cpu") in ("fp32", "bf16")
