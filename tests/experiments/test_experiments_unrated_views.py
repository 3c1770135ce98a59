"""What the protocol's results look like outside it: the rated / unrated split in the Results tab and in the
predicted-vs-gold slices of a user's file (plain handlers), the outside-languages overview of the report, and the
no-forgetting comparison of two Tatoeba results."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.experiments import unrated as u
from mlse.experiments import unrated_report as ur
from mlse.experiments.forgetting import compare_tatoeba, forgetting_markdown, merge_tatoeba, outside_markdown


def _protocol_result(out, name="shipped", complete=True):
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 120)

    def train(run_name, recipe, overrides):
        return {"run": run_name, "complete": complete or "without" not in run_name, "steps": 7}

    def predict(run, pairs):
        noise = 2.0 if "without" in run else 0.5
        return {"gold": {p: gold for p in pairs}, "pred": {p: gold + rng.normal(0, noise, 120) for p in pairs}}

    def outside(run):
        return {
            "model": f"/tmp/runs/{run}",  # an absolute path: never recorded
            "tatoeba": {"ara": {"acc_mean": 80.0}, "tur": {"acc_mean": 90.0}},
            "flores": {"ukr_Cyrl": {"acc_mean": 99.5}},
        }

    return u.run_unrated(name, {}, folds=[("de",)], train=train, predict=predict, out=out, outside=outside)


def test_the_report_overview_shows_with_without_and_the_languages_outside(tmp_path):
    result = _protocol_result(tmp_path)
    assert "model" not in result["outside"] and "/tmp/" not in (tmp_path / "shipped.json").read_text()
    summary = ur.write_summary(tmp_path, "shipped")
    row = summary["recipes"]["shipped"]
    assert row["with"] > row["without"] and row["mean_gap"] == pytest.approx(row["with"] - row["without"], abs=0.02)
    text = (tmp_path / "unrated.md").read_text()
    assert "| Tatoeba ara | Tatoeba tur | Tatoeba ukr | FLORES en-arb | FLORES en-tur | FLORES en-ukr |" in text
    overview = next(line for line in text.splitlines() if line.startswith("| shipped | de |"))
    assert overview.endswith("| 80.0 | 90.0 | – | – | – | 99.5 |") and "| 7 steps |" in overview


def test_a_head_recipe_counts_epochs_not_steps():
    assert ur._unit("two-stage") == ur._unit("two-stage-conv~s1") == "epochs"
    assert ur._unit("sts-cosent+lora:40-steps") == ur._unit("shipped") == "steps"


def test_the_results_tab_splits_rated_and_unrated_languages(tmp_path, monkeypatch):
    from mlse.runs.results_index import build_index
    from mlse.ui.results_rated import INCOMPLETE, SPLIT_COLUMNS, rated_split

    results = tmp_path / "results"
    _protocol_result(results / "unrated")
    _protocol_result(results / "unrated", name="stopped", complete=False)
    # an STS evaluation of a protocol run (trained without de's rated pairs), named by its folder
    run = tmp_path / "runs" / "without-de"
    run.mkdir(parents=True)
    config = {"method": "sts", "sts_loss": "cosent", "sts_langs": u.fold_sts_langs(("de",))}
    (run / "finetune_config.json").write_text(json.dumps(config))
    scores = {p: {"spearman": s, "pearson": s} for p, s in (("en-de", 70.0), ("en-fr", 80.0))}
    record = {"task": "sts", "model": str(run), "split": "test", "scores": scores, "averages": {}}
    (results / "sts-without-de.json").write_text(json.dumps(record))
    frame, warnings = build_index([results])
    table, note = rated_split(frame)
    assert list(table.columns) == SPLIT_COLUMNS and "Rated / unrated" in note
    shipped = table[table["model"] == "unrated:shipped"].set_index("pair")
    assert shipped.loc["en-de", "gap"] == pytest.approx(
        shipped.loc["en-de", "rated"] - shipped.loc["en-de", "unrated"], abs=0.02
    )
    assert "mean" in shipped.index and set(shipped["status"]) == {"complete"}
    stopped = table[table["model"] == "unrated:stopped"]
    assert set(stopped["status"]) == {INCOMPLETE} and "mean" not in set(stopped["pair"])  # never read as finished
    own = table[table["model"] == str(run)].set_index("pair")
    assert own.loc["en-de", "unrated"] == 70.0 and np.isnan(own.loc["en-de", "rated"])
    assert own.loc["en-fr", "rated"] == 80.0 and np.isnan(own.loc["en-fr", "unrated"])
    empty, hint = rated_split(frame[frame["kind"] == "nothing"])
    assert empty.empty and "python -m mlse experiment unrated" in hint


def test_the_file_slices_split_rated_and_unrated_pairs_for_a_protocol_run(tmp_path):
    from mlse.data.user_files import read_pairs
    from mlse.ui.gold_file import EXAMPLE, file_slices
    from mlse.ui.gold_views import RATED_SLICE, model_rated_languages, rated_labels, sts_code

    assert [sts_code(x) for x in ("deu", "de_DE", "zho_Hans", "", "und", "ar")] == ["de", "de", "zh", "", "", "ar"]
    labels = rated_labels(["en", "de", "ar", ""], ["fr", "en", "en", "en"], ("en", "fr", "es"))
    assert list(labels) == ["rated", "unrated", "unrated", "language unknown"]
    run = tmp_path / "without-de"
    (run / "model").mkdir(parents=True)
    config = {"method": "sts", "sts_loss": "cosent", "sts_langs": u.fold_sts_langs(("de",))}
    (run / "finetune_config.json").write_text(json.dumps(config))
    state = SimpleNamespace(models=lambda: [SimpleNamespace(name="protocol-run", location=str(run / "model"))])
    rated = model_rated_languages(state, ["protocol-run", "me5-small"])
    assert rated == {"protocol-run": tuple(u.fold_sts_langs(("de",)))}
    table = read_pairs(EXAMPLE)
    gold = table.gold
    preds = {"protocol-run": gold + np.random.default_rng(0).normal(0, 1, len(gold)), "me5-small": gold}
    slices, note = file_slices(table, preds, gold, n_boot=50, rated=rated)
    split = slices[slices.iloc[:, 0] == RATED_SLICE]
    assert set(split.iloc[:, 2]) == {"protocol-run"}  # the split is the protocol run's own
    counts = dict(zip(split.iloc[:, 1], split.iloc[:, 3].astype(int)))
    assert counts == {"rated": 28, "unrated": 13}  # en-de and de-de pairs: 8 + 5 of the example's 41
    assert "rated / unrated languages" in note and "protocol-run" in note


def _tatoeba(values: dict[str, float]) -> dict:
    return {"task": "tatoeba", "scores": {lang: {"acc_mean": v} for lang, v in values.items()}}


def test_the_no_forgetting_check_counts_and_lists_every_language_more_than_two_points_below():
    reference = _tatoeba({"ara": 79.1, "tur": 89.5, "ukr": 82.7, "kab": 30.0, "deu": 97.0})
    student = _tatoeba({"ara": 84.8, "tur": 93.9, "ukr": 90.0, "kab": 25.0, "deu": 95.5})
    report = compare_tatoeba(student, reference, names=("student", "me5-small"), n_losses=2)
    assert report["n_langs"] == 5 and report["n_violations"] == 1 and report["violations"][0]["lang"] == "kab"
    assert [r["lang"] for r in report["largest_losses"]] == ["kab", "deu"]  # deu: -1.5, within the tolerance
    assert report["mean_student"] == pytest.approx(np.mean([84.8, 93.9, 90.0, 25.0, 95.5]), abs=0.01)
    text = forgetting_markdown(report, {"student": {"tatoeba": {"ara": {"acc_mean": 84.8}}}})
    assert "**fails**, 1 violation(s): kab -5.0" in text and "| student (stated target) | 84.8 | 93.9 | 90.0 |" in text
    with pytest.raises(MlseError, match="only student: none; only me5-small: kab"):
        compare_tatoeba(_tatoeba({"ara": 80.0}), _tatoeba({"ara": 80.0, "kab": 1.0}), names=("student", "me5-small"))
    with pytest.raises(MlseError, match="not a Tatoeba result"):
        compare_tatoeba({"scores": {}}, reference)
    assert "| me5-small (stated reference) | 79.1 | 89.5 | 82.7 |" in outside_markdown({})


def test_a_tatoeba_evaluation_run_in_parts_merges_into_one_result_of_the_same_model():
    first = _tatoeba({"ara": 80.0, "tur": 90.0}) | {"model_identity": "m:1", "averages": {"all": {"acc_mean": 85.0}}}
    second = _tatoeba({"ukr": 70.0}) | {"model_identity": "m:1"}
    merged = merge_tatoeba([first, second], "student")
    assert merged["scores"] == {"ara": {"acc_mean": 80.0}, "tur": {"acc_mean": 90.0}, "ukr": {"acc_mean": 70.0}}
    assert "averages" not in merged and merged["config"]["langs"] == ["ara", "tur", "ukr"]
    report = compare_tatoeba(merged, _tatoeba({"ara": 80.0, "tur": 90.0, "ukr": 73.0}))
    assert report["n_langs"] == 3 and report["n_violations"] == 1
    with pytest.raises(MlseError, match="languages in more than one part: ara"):
        merge_tatoeba([first, first | {"scores": {"ara": {"acc_mean": 1.0}}}], "student")
    with pytest.raises(MlseError, match="different models"):
        merge_tatoeba([first, second | {"model_identity": "m:2"}], "student")
