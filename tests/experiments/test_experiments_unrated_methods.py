"""The seeds' methods under the leave-languages-out protocol (mlse.experiments.unrated): every recipe's run without a
fold sees none of its rated pairs (STS term, dev pick, Stage 2), translate-train builds its pseudo-rated pairs from the
bitext alone, the two-stage head trains end to end on a tiny model, and a run stopped halfway is kept but never
compared as finished."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from mlse.data.layout import STS_LANGS
from mlse.errors import MlseError
from mlse.experiments import unrated as u
from mlse.experiments import unrated_report as ur
from mlse.experiments.distillation import recipe_config
from mlse.experiments.unrated_heads import head_trainer, stage2_pairs
from mlse.stop_signal import StopSignal
from mlse.train.config_validation import validate
from mlse.train.recipes.translate_train import (
    FORMS,
    PseudoRated,
    TranslatedRows,
    pseudo_langs,
    pseudo_pairs,
    with_translated_pairs,
)

FOLD = ("de", "nl", "pl")
# one recipe per seed method, each with the STS term the protocol takes rated pairs from
METHODS = [
    "ema-frozen-cosent-w0.01-swa+lora",  # a member of the shipped soup
    "ema-0.999-cosent-w0.01",  # EMA, Ham & Kim's moving teacher
    "soft-minilm-priority-tcm-cosent",  # soft-label contrastive, priority + TCM
    "soft-muse-average-tcm-cosent",  # soft-label contrastive, average + TCM
    "mse-minilm-bridge-cosent+lora",  # MSE distillation, Reimers & Gurevych
    "sts-cosent-tt",  # translate-train
    "ema-frozen-cosent-w0.01-tt+lora",
]


@pytest.mark.parametrize("name", METHODS)
def test_every_method_trains_without_the_folds_rated_pairs_in_its_sts_term_and_dev_pick(name, tmp_path):
    _, recipe = u.parse_protocol_recipe(name)
    without = recipe_config(f"{name}/without", recipe, tmp_path, **u.fold_overrides(FOLD))
    with_all = recipe_config(f"{name}/all", recipe, tmp_path)
    validate(without)  # a valid configuration, not only a dict
    assert without.sts_loss != "none" and with_all.sts_langs == list(STS_LANGS)
    assert not set(without.sts_langs) & set(FOLD)
    assert not {lang for pair in without.dev_pairs for lang in pair.split("-")} & set(FOLD)
    assert (without.pairs, without.max_pairs, without.seed) == (with_all.pairs, with_all.max_pairs, with_all.seed)
    if recipe.get("translate_train"):  # the fold's languages become pseudo-rated, beside ar / tr / uk
        assert pseudo_langs(with_all.pairs, with_all.sts_langs) == ["ar", "tr", "uk"]
        assert set(pseudo_langs(without.pairs, without.sts_langs)) == {"ar", "tr", "uk", *FOLD}


def test_the_two_stage_head_and_unknown_names():
    name, recipe = u.parse_protocol_recipe("two-stage~s2")
    assert name == "two-stage~s2" and u.is_head_recipe(recipe) and recipe["seed"] == 2
    assert stage2_pairs(STS_LANGS)[:2] == ["en-en", "en-de"] and len(stage2_pairs(STS_LANGS)) == len(STS_LANGS)
    assert not {lang for p in stage2_pairs(u.fold_sts_langs(FOLD)) for lang in p.split("-")} & set(FOLD)
    with pytest.raises(MlseError, match=r"unknown student recipe 'nope'.*two-stage"):
        u.parse_protocol_recipe("nope")
    assert u.parse_protocol_recipe("two-stage")[1]["seed"] == 0
    assert u.parse_protocol_recipe("sts-cosent+lora~s3")[1]["seed"] == 3
    for bad, what in (("two-stage~sx", "head recipe"), ("sts-cosent~s1.5", "student recipe")):
        with pytest.raises(MlseError, match=rf"{what} '{re.escape(bad)}': .* is not a seed"):
            u.parse_protocol_recipe(bad)
    plans = u.steps_named([("two-stage", recipe), ("sts-cosent", {"method": "sts"})], 40)
    assert [n for n, _ in plans] == ["two-stage", "sts-cosent:40-steps"]  # a head trains by epochs, not steps


def test_pseudo_pairs_pair_each_sentence_with_its_nearest_and_random_others():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(50, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    i, j, scores = pseudo_pairs(emb, rng, neighbours=3, random=2)
    assert len(i) == 50 * 5 and not np.any(i == j)
    assert np.allclose(scores, np.sum(emb[i] * emb[j], axis=1), atol=1e-5)
    sims = emb @ emb.T
    np.fill_diagonal(sims, -np.inf)
    nearest = set(np.argsort(-sims[0])[:3])
    assert set(j[(i == 0)][:3]) == nearest  # the first three partners of sentence 0 are its nearest neighbours


def test_translated_rows_draw_whole_batches_of_one_kind(tmp_path):
    from mlse.data.sts_train import StsTrainRows

    rated = StsTrainRows(
        ("en", "fr"),
        {"en": [f"e{k}" for k in range(20)], "fr": [f"f{k}" for k in range(20)]},
        {"en": [f"E{k}" for k in range(20)], "fr": [f"F{k}" for k in range(20)]},
        np.linspace(0, 5, 20),
        {"source": "test"},
    )
    english, translated = [f"en {k}" for k in range(10)], [f"nl {k}" for k in range(10)]
    pseudo = PseudoRated(
        "nl", english, translated, np.arange(10), (np.arange(10) + 1) % 10, np.full(10, 0.5, np.float32)
    )
    rows = TranslatedRows(rated, [pseudo])
    assert rows.share == pytest.approx(1 / 3) and rows.info["translate_train"]["langs"] == ["nl"] and len(rows) == 20
    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(60):
        batch = rows.sample(rng, 8)
        is_pseudo = {("nl" in p) for p in batch.pairings}
        assert len(is_pseudo) == 1  # never a batch mixing 0-5 ratings with teacher cosines
        kinds |= is_pseudo
        if True in is_pseudo:
            assert set(batch.pairings) <= {f.replace("X", "nl") for f in FORMS} and np.all(batch.scores == 0.5)
            assert all(t in english + translated for t in batch.texts1 + batch.texts2)
    assert kinds == {True, False}


def test_translate_train_takes_no_sentence_of_sts_multi_mt(tiny_bert, data_dir, tmp_path):
    from mlse.data.sts_train import load_sts_train
    from mlse.data.stsb import load_sts

    _, recipe = u.parse_protocol_recipe("sts-cosent-tt")
    config = recipe_config(
        "tt/without-nl",
        recipe,
        tmp_path,
        student=str(tiny_bert),
        pairs=["en-nl", "en-de"],
        max_pairs=300,
        **u.fold_overrides(("nl",)),
    )
    rows = with_translated_pairs(config, load_sts_train(config.sts_langs), "cpu")
    assert [p.lang for p in rows.pseudo] == ["nl"] and 0 < rows.share < 1
    (nl,) = rows.pseudo
    sts = {t for split in ("train", "dev", "test") for ds in [load_sts("en-nl", split)] for t in (*ds.s1, *ds.s2)}
    assert not (set(nl.english) | set(nl.translated)) & sts
    assert len(nl.english) == len(nl.translated) > 200 and len(nl.i) == len(nl.english) * 8


def _tiny_settings(tiny_bert) -> dict:
    return dict(
        student=str(tiny_bert),
        pairs=["en-nl", "en-de"],
        max_pairs=32,
        max_steps=3,
        batch_size=8,
        eval_every_steps=1,
        dev_max_pairs=32,
        sts_batch_size=8,
        freeze_embeddings=False,
    )


def test_translate_train_runs_under_the_protocol_and_records_its_pseudo_languages(tiny_bert, tmp_path):
    train = u.protocol_trainer(tmp_path / "runs", **_tiny_settings(tiny_bert))
    recipe = {"method": "sts", "teacher": None, "sts_loss": "cosent", "translate_train": True}
    result = u.run_unrated("tt", recipe, folds=[("nl",)], train=train, predict=u.study_predictor(), out=tmp_path / "o")
    assert result["complete"] and list(result["folds"][0]["pairs"]) == ["en-nl"]
    without = json.loads((tmp_path / "runs" / "tt" / "without-nl" / "finetune_config.json").read_text())
    assert without["sts_training"]["translate_train"]["langs"] == ["nl"] and "nl" not in without["sts_langs"]
    with_all = json.loads((tmp_path / "runs" / "tt" / "all" / "finetune_config.json").read_text())
    assert with_all["sts_training"]["translate_train"]["langs"] == []  # nl and de are rated there


def test_the_protocol_trainer_sends_a_head_recipe_to_the_heads_and_the_rest_to_fine_tuning(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(u, "study_trainer", lambda runs, **kw: lambda *a: calls.append(("finetune", a[0])))
    monkeypatch.setattr(u, "head_trainer", lambda runs, **kw: lambda *a: calls.append(("heads", a[0])))
    train = u.protocol_trainer(tmp_path, max_steps=40)
    train("two-stage/all", u.parse_protocol_recipe("two-stage")[1], {})
    train("sts-cosent/all", u.parse_protocol_recipe("sts-cosent")[1], {})
    assert calls == [("heads", "two-stage/all"), ("finetune", "sts-cosent/all")]


def test_the_two_stage_head_under_the_protocol(tiny_bert, tmp_path):
    from mlse.runs.folders import rated_languages

    runs, said = tmp_path / "runs", []
    train = head_trainer(
        runs, student=str(tiny_bert), pairs=["en-nl", "en-de"], max_pairs=40, langs=("en", "de", "nl"), say=said.append
    )
    _, recipe = u.parse_protocol_recipe("two-stage")
    result = u.run_unrated(
        "two-stage", recipe, folds=[("nl",)], train=train, predict=u.study_predictor(), out=tmp_path / "o"
    )
    assert result["complete"] and np.isfinite(result["folds"][0]["pairs"]["en-nl"]["gap"])
    assert result["folds"][0]["dev_pairs"] == ["en-en", "en-de"]  # Stage 2 stops early on rated pairs left only
    without = json.loads((runs / "two-stage" / "without-nl" / "scorer.json").read_text())
    assert without["training"]["stage2"]["pairs"] == ["en-en", "en-de"]
    assert rated_languages(runs / "two-stage" / "without-nl") == ("en", "de")
    assert rated_languages(runs / "two-stage" / "all") == ("en", "de", "nl")
    stage1 = json.loads((runs / "two-stage" / "stage1" / "scorer.json").read_text())
    assert set(stage1["training"]["stage1"]["pairs"]) == {"en-nl", "en-de"}  # the held-out language's bitext stays
    # each stage's encoding is reported with its count (a 40-minute encode of the real bitext is not silent)
    encoding = [line for line in said if ": encoding: " in line]
    assert any(line.startswith("two-stage/all: Stage 1: encoding: ") and " texts (100%)" in line for line in encoding)
    assert any(line.startswith("two-stage/without-nl: Stage 2: encoding: ") for line in encoding), said


def test_a_run_stopped_halfway_keeps_its_checkpoint_and_is_never_compared(tiny_bert, tmp_path):
    from mlse.runs.results_index import build_index
    from mlse.ui.results_rated import INCOMPLETE, rated_split

    stop = StopSignal()
    settings = {**_tiny_settings(tiny_bert), "max_steps": 6, "eval_every_steps": 2}

    def say(message: str) -> None:  # the fold's run is stopped (the app's Stop) after its second step
        if "without-nl: step 2 " in message:
            stop.set()

    train = u.study_trainer(tmp_path / "runs", stop=stop, say=say, **settings)
    recipe = {"method": "sts", "teacher": None, "sts_loss": "cosent"}
    out = tmp_path / "results" / "unrated"
    result = u.run_unrated("sts", recipe, folds=[("nl",)], train=train, predict=u.study_predictor(), out=out)
    run = tmp_path / "runs" / "sts" / "without-nl"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["partial"]["reason"] == "stopped" and (run / "model").is_dir()  # its best checkpoint is kept
    assert not result["complete"] and not u.run_complete(run)
    summary = ur.write_summary(out, "sts")
    assert summary["incomplete"] == ["sts"] and summary["recipes"] == {} and summary["shipped_gap"] is None
    assert "sts (incomplete: not compared)" in (out / "unrated.md").read_text()
    frame, _ = build_index([tmp_path / "results"])
    split, _ = rated_split(frame)
    assert set(split["status"]) == {INCOMPLETE} and "mean" not in set(split["pair"])
    # the next call (no Stop) trains the stopped run again and the result is complete
    again = u.run_unrated(
        "sts",
        recipe,
        folds=[("nl",)],
        train=u.study_trainer(tmp_path / "runs", **settings),
        predict=u.study_predictor(),
        out=out,
    )
    assert again["complete"] and u.run_complete(run)
    assert ur.write_summary(out, "sts")["shipped_gap"] is not None


def test_results_are_written_after_every_fold_and_marked_incomplete_until_the_last(tmp_path):
    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 100)

    def train(run_name, recipe, overrides):
        if run_name.endswith("without-es-it-ru"):
            raise KeyboardInterrupt  # the job is killed during the second fold
        return {"run": run_name, "complete": True, "steps": 5}

    def predict(run, pairs):
        return {"gold": {p: gold for p in pairs}, "pred": {p: gold + rng.normal(0, 1, 100) for p in pairs}}

    with pytest.raises(KeyboardInterrupt):
        u.run_unrated("r", {}, folds=u.parse_folds(None), train=train, predict=predict, out=tmp_path)
    partial = json.loads((tmp_path / "r.json").read_text())
    assert (partial["complete"], partial["folds_done"], partial["folds_total"]) == (False, 1, 3)
    assert ur.write_summary(tmp_path, "r")["incomplete"] == ["r"]
    assert "r (incomplete: 1 of 3 folds; not compared)" in (tmp_path / "unrated.md").read_text()
    with pytest.raises(MlseError, match="no folds"):
        u.run_unrated("r", {}, folds=[], train=train, predict=predict, out=tmp_path)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--recipes", "sts-cosent", "--folds", "de,xx"], "unknown language code 'xx'"),
        (["--recipes", "sts-cosent", "--folds", "de/"], "fold 2 is empty"),
        (["--recipes", "nope", "--folds", "de"], "unknown student recipe 'nope'"),
        (["--folds", "de"], "name the recipes to run with --recipes"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line_before_training(argv, fragment, capsys, tmp_path):
    from mlse.cli.main import main

    code = main(["experiment", "unrated", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written


def test_translate_train_without_an_sts_term_is_refused_naming_it(tmp_path):
    config = recipe_config("x", {"method": "ema", "teacher": None, "translate_train": True}, tmp_path)
    with pytest.raises(MlseError, match="translate_train: adds pseudo-rated pairs to the STS term"):
        validate(config)


def test_a_finished_run_is_reused_though_it_records_its_bridge_as_a_dict(tmp_path):
    from dataclasses import asdict

    from mlse.experiments.distillation import config_changed, parse_recipe

    name, recipe = parse_recipe("mse-minilm-bridge-cosent+lora")
    config = recipe_config(name, recipe, tmp_path)
    saved = asdict(config) | {"bridge": {"kind": config.bridge, "sentences": 5000, "r2": 0.6, "dims": [384, 384]}}
    run = tmp_path / name
    run.mkdir()
    (run / "finetune_config.json").write_text(json.dumps(saved))
    assert not config_changed(run, config)  # was retrained every time: the saved dict never equalled "linear"
    (run / "finetune_config.json").write_text(json.dumps(saved | {"bridge": {"kind": "none"}}))
    assert config_changed(run, config)
