"""The seed-grid experiment: its pure summaries on hand-made scores, and one small end-to-end run."""

from __future__ import annotations

import json
import math

import pytest

from mlse.data.portable import portable_path
from mlse.experiments.seed_grid import (
    STAGE1_VARIANTS,
    STAGE2_VARIANTS,
    VARIANTS,
    markdown_table,
    rewrite_reports,
    run_seed_grid,
    stage2_contrasts,
)
from mlse.experiments.seed_grid_stats import group_means, relative_pearson, seed_summary, verdict


def _s(pearson: float, spearman: float = 0.0) -> dict:
    return {"pearson": pearson, "spearman": spearman}


# en-de, fr-de: pairs Stage 2 trains on; en-en, ru-de: held out.
SCORES = {
    "baseline": {"en-de": _s(70.0), "fr-de": _s(60.0), "en-en": _s(80.0), "ru-de": _s(50.0)},
    "s1": {"en-de": _s(72.5), "fr-de": _s(59.0), "en-en": _s(80.0), "ru-de": _s(56.0)},
    "s1+s2": {"en-de": _s(75.0), "fr-de": _s(65.0), "en-en": _s(78.0), "ru-de": _s(49.0)},
}


def test_relative_pearson_is_difference_to_baseline():
    rel = relative_pearson(SCORES)
    assert rel == {
        "s1": {"en-de": 2.5, "fr-de": -1.0, "en-en": 0.0, "ru-de": 6.0},
        "s1+s2": {"en-de": 5.0, "fr-de": 5.0, "en-en": -2.0, "ru-de": -1.0},
    }


def test_group_means_split_trained_and_held_out_pairs():
    groups = group_means(SCORES)
    assert groups == {
        "baseline": {"stage2-train": 65.0, "held-out": 65.0},
        "s1": {"stage2-train": 65.75, "held-out": 68.0},
        "s1+s2": {"stage2-train": 70.0, "held-out": 63.5},
    }
    only_trained = group_means({"baseline": {"en-de": _s(10.0), "en-it": _s(20.0)}})["baseline"]
    assert only_trained["stage2-train"] == 15.0 and math.isnan(only_trained["held-out"])


def test_markdown_table_exact():
    results = {"scores": SCORES, "relative_pearson": relative_pearson(SCORES), "groups": group_means(SCORES)}
    md = markdown_table(results)
    table, note = md.split("\n\n")[:2]
    assert table.splitlines() == [
        "| variant | en-de | fr-de | en-en | ru-de | avg trained | avg held-out |",
        "|---|---:|---:|---:|---:|---:|---:|",
        "| baseline (Pearson) | 70.0 | 60.0 | 80.0 | 50.0 | 65.0 | 65.0 |",
        "| s1 (Δ) | +2.5 | -1.0 | +0.0 | +6.0 | +0.8 | +3.0 |",
        "| s1+s2 (Δ) | +5.0 | +5.0 | -2.0 | -1.0 | +5.0 | -1.5 |",
    ]
    assert note.startswith("Columns en-de, en-es, en-fr, en-it, en-nl, fr-de are the pairs Stage 2 trains on")


def test_run_seed_grid_end_to_end(tiny_bert, data_dir, tmp_path):
    out, runs = tmp_path / "out", tmp_path / "runs"
    messages: list[str] = []
    results = run_seed_grid(
        str(tiny_bert),
        out=out,
        runs=runs,
        max_pairs=20,
        data_dir=data_dir,
        pairs=["en-en", "en-de"],
        stage1_config={"max_epochs": 2},
        stage2_config={"max_epochs": 1, "pairs": ["en-de"]},
        probe=False,
        progress=messages.append,
    )
    assert len(VARIANTS) == 7
    trained = [*STAGE1_VARIANTS, *STAGE2_VARIANTS]

    # JSON: every variant scored on both pairs; relative Pearson consistent with the scores
    saved = json.loads((out / "seed-grid.json").read_text())
    assert saved["scores"] == results["scores"]
    assert list(saved["scores"]) == VARIANTS
    for v in VARIANTS:
        assert set(saved["scores"][v]) == {"en-en", "en-de"}
        assert all(math.isfinite(saved["scores"][v][p]["pearson"]) for p in ("en-en", "en-de"))
    assert list(saved["relative_pearson"]) == trained and list(saved["groups"]) == VARIANTS
    base = saved["scores"]["baseline"]
    for v in trained:
        for p in ("en-en", "en-de"):
            expected = saved["scores"][v][p]["pearson"] - base[p]["pearson"]
            assert saved["relative_pearson"][v][p] == pytest.approx(expected, abs=1e-9)
    assert saved["config"]["stage1"] == {"max_epochs": 2} and saved["config"]["max_pairs"] == 20
    assert set(saved["timings_s"]) == {*VARIANTS, "total"}
    # probe=False reached train_stage1: no FLORES language probe in the Stage-1 metrics
    for v in STAGE1_VARIANTS:
        assert "stage1_dev_loss" in saved["metrics"][v] and "language_probe" not in saved["metrics"][v]
    for v in STAGE2_VARIANTS:
        assert "stage2_dev_pearson" in saved["metrics"][v]

    # markdown and html name every variant
    md = (out / "seed-grid.md").read_text()
    assert "| baseline (Pearson) |" in md
    for v in trained:
        assert f"| {v} (Δ) |" in md
    html = (out / "seed-grid.html").read_text()
    for v in trained:
        assert f'"{v}"' in html

    # one run folder per trained variant, with the right heads and configuration
    assert saved["runs"] == {v: portable_path(runs / v) for v in trained}  # never an absolute path
    assert sorted(p.name for p in runs.iterdir()) == sorted(trained)
    for v in STAGE1_VARIANTS:
        manifest = json.loads((runs / v / "scorer.json").read_text())
        assert manifest["heads"] == ["stage1"]
        assert manifest["training"]["stage1"]["max_pairs"] == 20
        config = json.loads((runs / v / "stage1.json").read_text())["config"]
        assert config["prelayer"] is STAGE1_VARIANTS[v]["prelayer"] and config["max_epochs"] == 2
    for v, cfg in STAGE2_VARIANTS.items():
        manifest = json.loads((runs / v / "scorer.json").read_text())
        assert manifest["heads"] == ["stage1", "stage2"]
        assert manifest["training"]["stage2"]["pairs"] == ["en-de"]
        assert manifest["stage1_run"] == "s1"  # the in-memory Stage-1 scorer, by its run name (not its repr)
        config = json.loads((runs / v / "stage2.json").read_text())["config"]
        assert (config["conv"], config["nonlinearity"], config["max_epochs"]) == (cfg["conv"], cfg["nonlinearity"], 1)
    assert any("done" in m for m in messages) and len(messages) >= 7


def test_verdict_calls_a_change_only_beyond_twice_the_seed_deviation():
    assert verdict(3.0, 1.0) == "better" and verdict(-3.0, 1.0) == "worse"
    assert verdict(1.5, 1.0) == "within seed noise" and verdict(-2.0, 1.0) == "within seed noise"
    assert verdict(5.0, float("nan")) == "one seed"


def test_seed_summary_on_hand_made_scores():
    baseline = {"en-de": _s(70.0, 60.0), "en-en": _s(80.0, 70.0)}
    seed_scores = {
        "s1": {
            "0": {"en-de": _s(72.0, 61.0), "en-en": _s(80.0, 70.0)},
            "1": {"en-de": _s(74.0, 63.0), "en-en": _s(82.0, 72.0)},
            "2": {"en-de": _s(73.0, 62.0), "en-en": _s(81.0, 71.0)},
        }
    }
    summary = seed_summary(baseline, seed_scores)["s1"]
    trained = summary["stage2-train/pearson"]  # en-de alone: +2, +4, +3
    assert trained["deltas"] == [2.0, 4.0, 3.0] and trained["mean"] == pytest.approx(3.0)
    assert trained["sd"] == pytest.approx(1.0) and trained["verdict"] == "better"
    held = summary["held-out/pearson"]  # en-en alone: 0, +2, +1 -> mean 1, sd 1: not beyond twice the deviation
    assert held["mean"] == pytest.approx(1.0) and held["verdict"] == "within seed noise"
    everything = summary["all/spearman"]  # mean over both pairs per seed: +0.5, +2.5, +1.5
    assert everything["deltas"] == [0.5, 2.5, 1.5]


def test_run_seed_grid_with_three_seeds(tiny_bert, data_dir, tmp_path):
    out, runs = tmp_path / "out", tmp_path / "runs"
    results = run_seed_grid(
        str(tiny_bert),
        out=out,
        runs=runs,
        max_pairs=20,
        data_dir=data_dir,
        pairs=["en-en", "en-de"],
        stage1_config={"max_epochs": 1},
        stage2_config={"max_epochs": 1, "pairs": ["en-de"]},
        probe=False,
        seeds=[0, 1, 2],
    )
    trained = [*STAGE1_VARIANTS, *STAGE2_VARIANTS]
    repeated = [v for v in trained if v != "s1+prelayer"]  # the extra seeds leave the prelayer out
    assert results["config"]["seeds"] == [0, 1, 2]
    assert {v: sorted(results["seed_scores"][v]) for v in repeated} == {v: ["0", "1", "2"] for v in repeated}
    assert list(results["seed_scores"]["s1+prelayer"]) == ["0"]
    assert all(results["scores"][v] == results["seed_scores"][v]["0"] for v in trained)
    lo, hi = results["scores"]["s1"]["en-de"]["pearson_ci95"]
    assert lo <= results["scores"]["s1"]["en-de"]["pearson"] <= hi
    assert "spearman_ci95" in results["scores"]["baseline"]["en-en"]
    assert "pearson_ci95" not in results["seed_scores"]["s1"]["1"]["en-de"]  # CIs for the first seed only
    expected_runs = [*trained, *(f"{v}-seed{s}" for v in repeated for s in (1, 2))]
    assert sorted(p.name for p in runs.iterdir()) == sorted(expected_runs)
    summary = results["seed_summary"]["s1+s2"]["all/pearson"]
    assert len(summary["deltas"]) == 3 and summary["verdict"] in ("better", "worse", "within seed noise")
    md = (out / "seed-grid.md").read_text()
    assert "Mean change over 3 seeds" in md and "against plain s1+s2 of the same seed" in md
    assert set(results["stage2_contrasts"]) == {"s1+s2+conv", "s1+s2+sigmoid", "s1+s2+tanh"}
    assert results["seed_summary"]["s1+prelayer"]["all/pearson"]["verdict"] == "one seed"


def test_seed_summary_reports_en_en_on_its_own():
    baseline = {"en-de": _s(70.0), "en-en": _s(80.0)}
    seed_scores = {"s1": {"0": {"en-de": _s(72.0), "en-en": _s(71.0)}, "1": {"en-de": _s(73.0), "en-en": _s(72.0)}}}
    en_en = seed_summary(baseline, seed_scores)["s1"]["en-en/pearson"]
    assert en_en["deltas"] == [-9.0, -8.0] and en_en["verdict"] == "worse"


def test_rewrite_reports_recomputes_the_summaries_from_the_recorded_scores(tmp_path):
    seed_scores = {"s1": {"0": SCORES["s1"], "1": {**SCORES["s1"], "en-en": _s(76.0)}}}
    stale = {
        "experiment": "seed-grid",
        "backbone": "b",
        "config": {"seeds": [0, 1]},
        "metrics": {},
        "scores": {"baseline": SCORES["baseline"], "s1": SCORES["s1"]},
        "seed_scores": seed_scores,
        "relative_pearson": {},
        "groups": {},
        "seed_summary": {"s1": {}},
    }
    (tmp_path / "seed-grid.json").write_text(json.dumps(stale))
    results = rewrite_reports(tmp_path)
    assert results["relative_pearson"]["s1"]["ru-de"] == pytest.approx(6.0)
    assert results["seed_summary"]["s1"]["en-en/pearson"]["deltas"] == [0.0, -4.0]
    written = json.loads((tmp_path / "seed-grid.json").read_text())
    assert written["seed_summary"]["s1"]["en-en/pearson"]["mean"] == pytest.approx(-2.0)
    md = (tmp_path / "seed-grid.md").read_text()
    assert "EN-EN, Pearson" in md and "-2.0 ± 2.8 (within seed noise)" in md


def test_report_only_without_a_grid_is_a_clear_error(tmp_path, capsys):
    from mlse.cli.main import main

    assert main(["experiment", "seed-grid", "--report-only", "--out", str(tmp_path / "none")]) == 2
    assert "run the grid first" in capsys.readouterr().err


def test_stage2_contrasts_compare_each_seed_with_its_own_s1_s2():
    seed_scores = {
        "s1+s2": {"0": {"en-de": _s(70.0)}, "1": {"en-de": _s(80.0)}},
        "s1+s2+conv": {"0": {"en-de": _s(71.0)}, "1": {"en-de": _s(81.5)}},
        "s1": {"0": {"en-de": _s(10.0)}, "1": {"en-de": _s(10.0)}},
    }
    contrasts = stage2_contrasts(seed_scores)
    assert list(contrasts) == ["s1+s2+conv"]  # Stage-1 variants and the reference itself are not contrasted
    # +1.0 and +1.5 against the same seed's s1+s2; against seed 0's alone it would read +1.0 and +11.5
    assert contrasts["s1+s2+conv"]["stage2-train/pearson"]["deltas"] == [1.0, 1.5]
    assert contrasts["s1+s2+conv"]["stage2-train/pearson"]["verdict"] == "better"
