"""The supervised STS term: its training pairs (train split only, every pairing, contamination filtered) and runs
that use it alone or beside a distillation loss, on tiny local models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.data.contamination import evaluation_sentences, normalize_sentence
from mlse.data.layout import STS_LANGS
from mlse.data.sts_train import load_sts_train
from mlse.data.stsb import read_sts_file, sts_file
from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.runs.folders import FINETUNE_CONFIG_FILE
from mlse.train.finetune import finetune
from tests.train.test_train_finetune import read_run, tiny_config


def test_the_training_pairs_come_from_the_train_split_filtered_and_aligned(data_dir):
    rows = load_sts_train(["en", "de", "zh"], data_dir)
    _, _, y = read_sts_file(sts_file("en", "train", data_dir))
    assert rows.info["rows"] + rows.info["rows_dropped_contamination"] == len(y)
    assert 0 < rows.info["rows_dropped_contamination"] < 0.3 * len(y) and rows.info["pairings"] == 9
    banned = evaluation_sentences(data_dir, tatoeba=True, sts_splits=("test", "dev"))
    for lang in rows.langs:  # no evaluation sentence, in any of the languages, is left
        assert not {normalize_sentence(s) for s in rows.s1[lang] + rows.s2[lang]} & banned
    # the rows stay aligned: row i is the same pair with the same score in every language
    en1, _, en_y = read_sts_file(sts_file("en", "train", data_dir))
    de1, _, _ = read_sts_file(sts_file("de", "train", data_dir))
    i = en1.index(rows.s1["en"][10])
    assert rows.s1["de"][10] == de1[i] and rows.scores[10] == en_y[i]
    dev_test = set()
    for split in ("dev", "test"):
        s1, s2, _ = read_sts_file(sts_file("en", split, data_dir))
        dev_test |= set(s1) | set(s2)
    assert not dev_test & set(rows.s1["en"] + rows.s2["en"])


def test_batches_mix_every_pairing_and_are_seeded(data_dir):
    rows = load_sts_train(["en", "de", "fr"], data_dir)
    batch = rows.sample(np.random.default_rng(1), 400)
    assert set(batch.pairings) == {f"{a}-{b}" for a in ("en", "de", "fr") for b in ("en", "de", "fr")}
    assert len(batch.texts1) == len(batch.texts2) == len(batch.scores) == 400
    assert batch.scores.min() >= 0 and batch.scores.max() <= 5
    k = batch.pairings.index("de-fr")  # a cross-lingual pair: sentence 1 German, sentence 2 French, one row's score
    row = rows.s1["de"].index(batch.texts1[k])
    assert rows.s2["fr"][row] == batch.texts2[k] and rows.scores[row] == batch.scores[k]
    again = rows.sample(np.random.default_rng(1), 400)
    assert again.texts1 == batch.texts1 and again.pairings == batch.pairings
    with pytest.raises(MlseError, match="among"):
        load_sts_train(["en", "xx"], data_dir)
    assert set(load_sts_train(data_dir=data_dir).langs) == set(STS_LANGS)


@pytest.mark.parametrize(("method", "extra"), [("sts", {}), ("ema", {"tau_base": 1.0}), ("mse", {})])
@pytest.mark.parametrize("loss", ["cosent", "angle"])
def test_runs_with_the_sts_term_alone_or_beside_distillation(method, extra, loss, tiny_bert):
    name = f"tiny-sts-{method}-{loss}"
    teacher = tiny_bert if method == "mse" else None
    config = tiny_config(name, teacher, tiny_bert, method=method, sts_loss=loss, sts_batch_size=8, **extra)
    metrics = finetune(config)
    saved, record, log = read_run(runs_dir() / name)
    assert metrics["steps"] == 4 and saved == metrics
    assert all(np.isfinite(r["sts_loss"]) and r["sts_loss"] > 0 for r in log if r["step"] > 0)
    assert record["sts_training"]["rows"] > 4000 and record["sts_loss"] == loss
    assert metrics["sts_rows"] == record["sts_training"]["rows"]
    assert json.loads((runs_dir() / name / FINETUNE_CONFIG_FILE).read_text())["method"] == method


def test_the_sts_term_lowers_its_loss_on_a_fixed_batch(tiny_bert, data_dir):
    import torch

    from mlse.train.config import FinetuneConfig
    from mlse.train.sts_term import StsTerm, build_sts_loss
    from mlse.train.student_model import load_student

    student = load_student(str(tiny_bert), "cpu", 64)
    rows = load_sts_train(["en", "de"], data_dir)
    cfg = FinetuneConfig(method="sts", student=str(tiny_bert), sts_loss="cosent")
    term = StsTerm(build_sts_loss(cfg, student), student, rows, 16, "cpu", seed=0)
    state = term.rng.bit_generator.state
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    losses = []
    for _ in range(15):
        term.rng.bit_generator.state = state  # the same 16 pairs every step
        loss = term.loss()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_bad_sts_settings_are_refused(tiny_bert):
    for overrides, message in [
        (dict(method="sts"), "choose an STS loss"),
        (dict(method="ema", sts_loss="cosent", sts_weight=0.0), "sts_weight"),
        (dict(method="ema", sts_loss="cosent", sts_batch_size=1), "sts_batch_size"),
        (dict(method="ema", sts_loss="ranknet"), "sts_loss: 'ranknet' is not offered"),
    ]:
        with pytest.raises(MlseError, match=message):
            finetune(tiny_config("tiny-sts-bad", None, tiny_bert, **overrides))
