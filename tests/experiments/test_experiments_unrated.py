"""The leave-languages-out protocol (mlse.experiments.unrated): folds, gaps with paired CIs, the summary, and one
tiny end-to-end run whose training never sees the held-out languages' rated pairs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mlse.cli.main import main
from mlse.errors import MlseError
from mlse.experiments import unrated as u
from mlse.experiments import unrated_report as ur
from mlse.experiments.distillation import unseeded


def test_folds_hold_out_their_languages_everywhere_but_the_bitext():
    folds = u.parse_folds(None)
    assert folds == [("de", "nl", "pl"), ("es", "it", "ru"), ("fr", "pt", "zh")]
    for fold in folds:
        assert not set(fold) & set(u.fold_sts_langs(fold)) and "en" in u.fold_sts_langs(fold)
        dev = u.fold_dev_pairs(fold)
        assert dev[0] == "en-en" and len(dev) == 5
        assert not {lang for pair in dev for lang in pair.split("-")} & set(fold)
        pairs = u.fold_eval_pairs(fold)
        assert all(set(p.split("-")) & set(fold) and p.split("-")[0] != p.split("-")[1] for p in pairs)
        assert [f"en-{lang}" for lang in fold] == pairs[: len(fold)]
    assert u.fold_eval_pairs(("de", "nl", "pl")) == ["en-de", "en-nl", "en-pl", "fr-de", "ru-de", "pt-pl", "de-fr"]
    assert u.parse_folds("de,nl/es") == [("de", "nl"), ("es",)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("de,xx", "unknown language code 'xx'"),
        ("de,nl/", "fold 2 is empty"),
        ("en,de", "'en' is the teacher side"),
        ("de/de", "'de' is already in another fold"),
    ],
)
def test_a_bad_fold_is_refused_naming_it(spec, message):
    with pytest.raises(MlseError, match=message):
        u.parse_folds(spec)


def _scored(rng, n=300):
    gold = rng.uniform(0, 5, n)
    return gold, gold + rng.normal(0, 0.5, n), gold + rng.normal(0, 3.0, n)


def test_the_gap_and_its_paired_ci():
    rng = np.random.default_rng(0)
    gold, good, poor = _scored(rng)
    table, mean, ci, boots = u.pair_gaps({"en-de": good}, {"en-de": poor}, {"en-de": gold}, ["en-de"], n_boot=200)
    row = table["en-de"]
    assert row["gap"] == pytest.approx(row["with"] - row["without"], abs=0.02) and row["gap"] > 20
    assert row["ci95"][0] > 0 and mean == row["gap"] and ci[0] > 0 and boots.shape == (200,)
    same, mean0, ci0, _ = u.pair_gaps({"en-de": good}, {"en-de": good}, {"en-de": gold}, ["en-de"], n_boot=200)
    assert mean0 == 0 and ci0 == [0.0, 0.0]


def _fake_study(rng, quality: dict[str, float], incomplete: set[str] = frozenset()):
    """train/predict stand-ins: a run's predictions are gold plus noise of its recipe's and fold's quality."""
    gold = {p: rng.uniform(0, 5, 200) for p in {p for f in u.DEFAULT_FOLDS for p in u.fold_eval_pairs(f)}}
    trained: list[tuple[str, dict]] = []

    def train(run_name, recipe, overrides):
        trained.append((run_name, overrides))
        return {"run": run_name, "complete": run_name not in incomplete}

    def predict(run, pairs):
        q = quality[run.split("/")[0]]  # one noise scale (three times it without), or (with, without)
        noise = q[1 if "/without-" in run else 0] if isinstance(q, tuple) else q * (3.0 if "/without-" in run else 1.0)
        return {"gold": {p: gold[p] for p in pairs}, "pred": {p: gold[p] + rng.normal(0, noise, 200) for p in pairs}}

    return train, predict, trained


def test_a_recipe_runs_once_with_and_once_per_fold_without_and_the_summary_compares(tmp_path):
    rng = np.random.default_rng(1)
    train, predict, trained = _fake_study(rng, {"shipped": 0.8, "better": 0.3, "stopped": 0.1}, {"stopped/all"})
    folds = u.parse_folds(None)
    for name in ("shipped", "better", "stopped"):
        u.run_unrated(name, {}, folds=folds, train=train, predict=predict, out=tmp_path)
    assert [name for name, _ in trained[:4]] == [
        "shipped/all",
        "shipped/without-de-nl-pl",
        "shipped/without-es-it-ru",
        "shipped/without-fr-pt-zh",
    ]
    assert trained[0][1] == {} and trained[1][1]["sts_langs"] == u.fold_sts_langs(("de", "nl", "pl"))
    shipped = json.loads((tmp_path / "shipped.json").read_text())
    assert shipped["complete"] and len(shipped["folds"]) == 3 and shipped["mean_gap"] > 0
    summary = ur.write_summary(tmp_path, "shipped")
    assert summary["best_recipe"] == "better" and summary["best_gap"] < summary["shipped_gap"]
    assert summary["gap_reduction_ci"][0] > 0  # the reduction is measured on the same resamples
    # what a language with bitext only gets, against the shipped recipe's, on the same resamples
    gain = summary["without_vs_shipped"]["better"]
    recipes = summary["recipes"]
    assert gain["difference"] == pytest.approx(recipes["better"]["without"] - recipes["shipped"]["without"], abs=0.02)
    assert gain["difference"] > 0 and 0 < gain["ci95"][0] < gain["difference"] < gain["ci95"][1]
    assert set(summary["without_vs_shipped"]) == {"better"}  # neither the shipped recipe nor an incomplete one
    assert summary["incomplete"] == ["stopped"] and "stopped" not in summary["recipes"]
    table = (tmp_path / "unrated.md").read_text()
    assert "stopped (incomplete: not compared)" in table and "| **better** | all | **mean** |" in table


def test_the_summary_names_apart_the_best_gap_closed_by_the_language_without_ratings_gaining(tmp_path):
    rng = np.random.default_rng(4)
    # "flat" has no gap because its run with rated pairs is as bad as its run without them
    train, predict, _ = _fake_study(rng, {"shipped": 0.8, "better": 0.3, "flat": (3.0, 3.0)})
    for name in ("shipped", "better", "flat"):
        u.run_unrated(name, {}, folds=u.parse_folds(None), train=train, predict=predict, out=tmp_path)
    summary = ur.write_summary(tmp_path, "shipped")
    assert summary["best_recipe"] == "flat" and summary["without_vs_shipped"]["flat"]["ci95"][1] < 0
    raising = summary["best_raising_without"]
    assert raising["recipe"] == "better" and raising["gap"] == summary["recipes"]["better"]["mean_gap"]
    assert 0 < raising["gap_reduction_ci"][0] < raising["gap_reduction_ci"][1]
    assert raising["share_of_shipped_gap"] == pytest.approx(raising["gap"] / summary["shipped_gap"], abs=0.01)
    # no recipe beats the shipped recipe's *without*: nothing to name
    assert ur.write_summary(tmp_path, "better")["best_raising_without"] is None


def test_a_tiny_run_never_trains_on_the_held_out_languages_rated_pairs(tiny_bert, tmp_path, data_dir):
    settings = dict(
        student=str(tiny_bert),
        pairs=["en-de"],
        max_pairs=32,
        max_steps=2,
        batch_size=8,
        eval_every_steps=2,
        dev_max_pairs=32,
        sts_batch_size=8,
        freeze_embeddings=False,
    )
    train = u.study_trainer(tmp_path / "runs", **settings)
    recipe = {"method": "sts", "teacher": None, "sts_loss": "cosent"}
    result = u.run_unrated(
        "sts-cosent", recipe, folds=[("nl",)], train=train, predict=u.study_predictor(), out=tmp_path / "out"
    )
    without = json.loads((tmp_path / "runs" / "sts-cosent" / "without-nl" / "finetune_config.json").read_text())
    assert "nl" not in without["sts_langs"] and "nl" not in " ".join(without["dev_pairs"])
    with_all = json.loads((tmp_path / "runs" / "sts-cosent" / "all" / "finetune_config.json").read_text())
    assert "nl" in with_all["sts_langs"]
    fold = result["folds"][0]
    assert list(fold["pairs"]) == ["en-nl"] and result["complete"] and np.isfinite(fold["pairs"]["en-nl"]["gap"])
    assert fold["steps"] == {"with": 2, "without": 2}  # both runs' step counts are recorded beside the gap
    cpu = [u.run_cpu_s(tmp_path / "runs" / "sts-cosent" / name) for name in ("all", "without-nl")]
    assert all(s > 0 for s in cpu) and result["cpu_minutes"] == round(sum(cpu) / 60, 1)  # the recipe's CPU cost
    assert u.run_complete(tmp_path / "runs" / "sts-cosent" / "all")
    assert not u.run_complete(tmp_path / "runs" / "nothing-here")


def test_the_results_table_shows_rated_unrated_and_the_gap(tmp_path):
    from mlse.runs.results_index import build_index

    rng = np.random.default_rng(2)
    train, predict, _ = _fake_study(rng, {"shipped": 0.8, "stopped": 0.1}, {"stopped/all"})
    for name in ("shipped", "stopped"):
        u.run_unrated(name, {}, folds=[("de", "nl", "pl")], train=train, predict=predict, out=tmp_path / "unrated")
    frame, warnings = build_index([tmp_path])
    rows = frame[frame["kind"] == "unrated"]
    assert not warnings and set(rows["metric"]) == {"rated", "unrated", "gap", "incomplete"}
    en_de = rows[(rows["model"] == "unrated:shipped") & (rows["key"] == "en-de")].set_index("metric")["value"]
    assert en_de["gap"] == pytest.approx(en_de["rated"] - en_de["unrated"], abs=0.02)
    assert set(rows[rows["metric"] == "incomplete"]["model"]) == {"unrated:stopped"}


def test_a_protocol_run_names_its_rated_languages_and_the_gold_tab_says_which_pairs_are_unrated(tmp_path):
    from types import SimpleNamespace

    from mlse.runs.folders import rated_languages
    from mlse.ui.gold_tab import rated_notes

    run = tmp_path / "without-de"
    (run / "model").mkdir(parents=True)
    config = {"method": "ema", "sts_loss": "cosent", "sts_langs": u.fold_sts_langs(("de",))}
    (run / "finetune_config.json").write_text(json.dumps(config))
    plain = tmp_path / "no-term"
    (plain / "model").mkdir(parents=True)
    (plain / "finetune_config.json").write_text(json.dumps({"method": "ema", "sts_loss": "none", "sts_langs": []}))
    assert rated_languages(run / "model") == tuple(u.fold_sts_langs(("de",))) and rated_languages(plain) is None
    models = [SimpleNamespace(name="runs/without-de", location=str(run / "model"))]
    state = SimpleNamespace(models=lambda: models)
    (unrated,) = rated_notes(state, "en-de", ["runs/without-de", "me5-small"])
    assert "**unrated**" in unrated and "without rated pairs in de" in unrated
    (rated,) = rated_notes(state, "en-fr", ["runs/without-de"])
    assert "**rated**" in rated


def test_a_recipe_run_with_several_seeds_is_compared_by_its_mean_over_the_seeds(tmp_path):
    rng = np.random.default_rng(2)
    train, predict, _ = _fake_study(rng, {"shipped": 0.8, "better": 0.3})
    names = ["shipped:40-steps", "shipped~s1:40-steps", "better:40-steps", "better~s1:40-steps", "better~s2:40-steps"]
    gaps = {}
    for name in names:

        def by_group(run, pairs):
            return predict(unseeded(run.split("/")[0]).partition(":")[0] + "/" + run.partition("/")[2], pairs)

        gaps[name] = u.run_unrated(name, {}, folds=u.parse_folds(None), train=train, predict=by_group, out=tmp_path)[
            "mean_gap"
        ]
    summary = ur.write_summary(tmp_path, "shipped:40-steps")
    assert summary["best_recipe"] == "better:40-steps"
    better = summary["seeds"]["better:40-steps"]
    assert better["gaps"] == [gaps[n] for n in better["recipes"]] and len(better["gaps"]) == 3
    assert summary["best_gap"] == pytest.approx(np.mean(better["gaps"]), abs=0.01)
    assert summary["shipped_gap"] == pytest.approx(np.mean([gaps[n] for n in names[:2]]), abs=0.01)
    assert better["gap_sd"] > 0 and better["ci95"][0] < better["mean_gap"] < better["ci95"][1]
    assert summary["gap_reduction_ci"][0] > 0
    table = (tmp_path / "unrated.md").read_text()
    assert "| better:40-steps | 3 |" in table and "| shipped:40-steps | 2 |" in table
    # the shipped recipe named by one of its seeds is compared as its group, not left out
    assert ur.write_summary(tmp_path, "shipped~s1:40-steps")["shipped_gap"] == summary["shipped_gap"]


def test_the_headline_is_the_named_studys_summary_and_the_committed_one_is_current(tmp_path, capsys):
    rng = np.random.default_rng(3)
    train, predict, _ = _fake_study(rng, {"shipped": 0.8, "better": 0.3})
    study = tmp_path / "study"
    for name in ("shipped", "better"):
        u.run_unrated(name, {}, folds=u.parse_folds(None), train=train, predict=predict, out=study)
    headline = tmp_path / "summary.json"
    argv = ["experiment", "unrated", "--report-only", "--out", str(study), "--shipped-recipe", "shipped"]
    assert main([*argv, "--headline", str(headline)]) == 0
    written = json.loads(headline.read_text())
    assert written.pop("study") == study.as_posix()
    assert written == json.loads((study / "summary.json").read_text()) and written["best_recipe"] == "better"
    # the repository's headline is the summary of the study it names, as that study's files stand now
    root = Path(__file__).resolve().parents[2]
    committed = json.loads((root / "results" / "unrated" / "summary.json").read_text())
    named = json.loads((root / committed.pop("study") / "summary.json").read_text())
    assert committed == named and committed["gap_reduction_ci"] is not None
