"""Results tab: the results index on the repository's real result files (read-only) and on hand-made JSON."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from mlse.runs.health import sweep_interrupted
from mlse.runs.results_index import build_index, finetune_curves, schema_of
from mlse.ui.results_tab import (
    ALL,
    choices,
    curves_plot,
    filter_table,
    load_index,
    metric_plot,
    refresh,
    seed_grid_plot,
    table_view,
    tatoeba_languages_plot,
)
from tests.interrupted_runs import fine_tune_run, stale_lock
from tests.paths import REPO_ROOT as REPO


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


@pytest.fixture()
def hand_made(tmp_path) -> Path:
    """A results/ and runs/ pair holding each schema once, variations, a corrupt file and non-result JSON."""
    results, runs = tmp_path / "results", tmp_path / "runs"
    write(
        results / "a" / "sts.json",
        {
            "model": "m1",
            "task": "sts",
            "split": "test",
            "created": "2026-01-02T03:04:05+02:00",
            "scores": {"en-de": {"pearson": 50.0, "spearman": 40.0, "spearman_ci95": [30, 50], "n": 10}},
            "averages": {"all": {"spearman": 40.0, "n_pairs": 1, "missing": []}},
        },
    )
    write(
        results / "b" / "tatoeba.json",
        {  # no averages, no created, a NaN-turned-null value
            "model": "m2",
            "task": "tatoeba",
            "scores": {"deu": {"acc_mean": 90.5, "xsim_error": None}},
        },
    )
    write(
        results / "grid" / "seed-grid.json",
        {
            "experiment": "seed-grid",
            "backbone": "bb",
            "created": "2026-01-01T00:00:00+0000",
            "scores": {
                "baseline": {"en-de": {"pearson": 10.0, "spearman": 9.0}},
                "s1": {"en-de": {"pearson": 12.0, "spearman": 11.0}},
            },
            "relative_pearson": {"s1": {"en-de": 2.0}},
            "groups": {"s1": {"held-out": 3.0}},
            "metrics": {"s1": {"stage1_dev_loss": 1.5, "language_probe": {"meaning": 40.0, "chance": 8.3}}},
        },
    )
    write(
        results / "ft" / "compare.json",
        {
            "scores": {"soft": {"en-de": 33.0}},
            "curves": {"soft": [[0.5, 30.0], [1.0, 31.0]]},
            "metrics": {
                "soft": {
                    "method": "soft",
                    "stop_reason": "budget",
                    "best_dev_spearman": 31.0,
                    "final_dev": {"en-de": 31.0},
                    "data": {"en-de": {"used": 5}},
                }
            },
        },
    )
    write(results / "broken.json", '{"model": "m3", "task": "sts", "scores": {')  # truncated: corrupt
    write(results / "odd.json", {"model": "m4", "task": "sts", "scores": ["not", "a", "dict"]})  # known, bad shape
    write(results / "errors.json", [{"src": "a", "tgt": "b"}])  # a list: not a result
    run = runs / "my-run"
    write(
        run / "metrics.json",
        {
            "method": "mse",
            "stop_reason": "stopped",
            "best_dev_spearman": 20.0,
            "steps": 4,
            "final_dev": {"en-de": 19.0},
            "device": "cpu",
        },
    )
    write(run / "finetune_config.json", {"method": "mse", "student": "x"})
    write(run / "model" / "config.json", {"hidden_size": 8})  # inside a model folder: never read
    (run / "log.jsonl").write_text(
        '{"step": 0, "elapsed_s": 6.0, "dev_spearman": 18.0, "loss": null}\n'
        'not json\n{"step": 2, "elapsed_s": 12.0, "dev_spearman": 20.0, "loss": 0.5}\n'
    )
    write(runs / "heads" / "scorer.json", {"format": "mlse-scorer/1", "metrics": {"stage2_dev_pearson": 35.0}})
    return tmp_path


def test_every_schema_is_read_and_bad_files_are_skipped_with_a_warning(hand_made, caplog):
    with caplog.at_level(logging.WARNING):
        frame, warnings = build_index([hand_made / "results", hand_made / "runs"])
    assert len(warnings) == 2 and any("broken.json" in w for w in warnings) and any("odd.json" in w for w in warnings)
    assert "broken.json" in caplog.text
    assert set(frame["kind"]) == {"eval", "seed-grid", "finetune-compare", "finetune-run", "scorer-run"}

    def value(**where):
        rows = frame
        for column, v in where.items():
            rows = rows[rows[column] == v]
        assert len(rows) == 1, (where, rows)
        return rows.iloc[0]

    sts = value(model="m1", key="en-de", metric="spearman")
    assert sts["value"] == 40.0 and sts["source"] == "results/a/sts.json" and sts["date"] == "2026-01-02 01:04"
    assert value(model="m1", key="avg:all", metric="spearman")["value"] == 40.0
    assert frame[(frame["model"] == "m1") & frame["metric"].isin(["n", "spearman_ci95", "n_pairs"])].empty
    assert value(model="m2", metric="acc_mean")["date"]  # falls back to the file's time
    assert frame[frame["metric"] == "xsim_error"].empty  # null is not a number
    assert value(model="bb", metric="pearson", key="en-de")["value"] == 10.0  # the baseline is the backbone
    assert value(model="bb+s1", metric="relative_pearson")["value"] == 2.0
    assert value(model="bb+s1", key="avg:held-out")["value"] == 3.0
    assert value(model="bb+s1", metric="language_probe.meaning")["value"] == 40.0
    assert frame[frame["metric"] == "language_probe.chance"].empty
    assert value(model="soft", task="sts", key="en-de")["value"] == 33.0
    assert value(model="soft", task="finetune", metric="best_dev_spearman")["value"] == 31.0
    run = value(model="runs/my-run", task="finetune", key="en-de")
    assert run["value"] == 19.0 and run["split"] == "dev" and run["source"] == "runs/my-run/metrics.json"
    assert value(model="runs/heads", metric="stage2_dev_pearson")["value"] == 35.0
    assert not frame["source"].str.contains("model/").any() and not frame["source"].str.contains("config").any()


def test_schema_recognition():
    assert schema_of([1, 2]) is None and schema_of({"hidden_size": 8}) is None
    assert schema_of({"experiment": "seed-grid"}) == "seed-grid"
    assert schema_of({"model": "m", "task": "sts", "scores": {}}) == "eval"


def test_curves_from_run_logs_and_comparison_files(hand_made):
    curves = finetune_curves([hand_made / "results", hand_made / "runs"])
    mine = curves[curves["run"] == "runs/my-run"]
    assert list(mine["step"]) == [0, 2] and list(mine["minutes"]) == [0.1, 0.2]  # the bad line is skipped
    assert len(curves[curves["run"] == "soft (compare)"]) == 2
    assert len(curves_plot([hand_made / "results", hand_made / "runs"]).data) == 2


def test_handlers_filter_and_plot(hand_made):
    roots = [hand_made / "results", hand_made / "runs"]
    (table, label), found, note, frame = refresh(roots=roots)
    assert "Skipped 2 file(s)" in note and "broken.json" in note
    assert found["tasks"][0] == ALL and "sts" in found["tasks"] and "runs/my-run" in found["models"]
    assert len(table) == len(frame) and label == f"Results ({len(frame)} rows)"
    only = filter_table(frame, task="sts", model="m1", metric="spearman")
    assert sorted(only["key"]) == ["avg:all", "en-de"]
    assert filter_table(frame, text="GRID")["kind"].eq("seed-grid").all()
    assert filter_table(frame, task="no-such-task").empty
    bar = metric_plot(frame, "sts", "en-de", "spearman")
    labels = list(bar.data[0].x)
    assert "m1" in labels and "soft" in labels and "bb+s1" in labels
    assert list(bar.data[0].y) == sorted(bar.data[0].y, reverse=True)  # best first
    assert not metric_plot(frame, "mining", "", "f1").data  # nothing to show: an empty figure, not an error
    grid = seed_grid_plot(frame)
    assert [t.name for t in grid.data] == ["bb+s1"] and list(grid.data[0].y) == [2.0]


def test_the_table_shows_averages_first_and_at_most_its_cap(hand_made):
    """The browser draws every row it is sent: past the cap the table shows the first rows and says how many match."""
    frame, _ = load_index([hand_made / "results", hand_made / "runs"])
    rows, label = table_view(frame, limit=4)
    assert len(rows) == 4 and label == f"Results: the first 4 of {len(frame)} rows (narrow them with the filters above)"
    everything, _ = table_view(frame, limit=len(frame))
    summary = everything["key"].str.startswith("avg:") | (everything["key"] == "")
    assert summary.any() and not summary.all()
    assert list(summary) == sorted(summary, reverse=True)  # averages and run-level numbers before per-pair rows
    assert set(map(tuple, everything.to_numpy().tolist())) == set(map(tuple, filter_table(frame).to_numpy().tolist()))
    sts, sts_label = table_view(frame, task="sts", limit=1000)
    assert sts_label == f"Results ({len(sts)} rows)" and set(sts["task"]) == {"sts"}


def test_empty_folders_give_an_empty_table(tmp_path):
    frame, note = load_index([tmp_path / "nothing-here"])
    assert frame.empty and note.startswith("0 numbers")
    assert choices(frame)["tasks"] == [ALL]
    assert not seed_grid_plot(frame).data


def test_the_repositorys_real_results_are_indexed():
    """Read-only: the committed result files of this repository parse without a warning."""
    roots = [REPO / "results", REPO / "runs"]
    assert (REPO / "results").is_dir()  # committed: every checkout has it
    frame, warnings = build_index(roots)
    assert warnings == []
    assert {"eval", "seed-grid"} <= set(frame["kind"])
    sts = frame[(frame["source"] == "results/baseline/minilm-en/sts.json") & (frame["key"] == "en-de")]
    assert set(sts["metric"]) >= {"pearson", "spearman"} and (sts["model"] == "minilm-en").all()
    grid = frame[frame["kind"] == "seed-grid"]
    assert {"minilm-en", "minilm-en+s1", "minilm-en+s1+s2"} <= set(grid["model"])
    assert frame["value"].notna().all()


def test_tatoeba_over_many_languages_gets_one_plot(tmp_path):
    """Files with >= 30 Tatoeba languages are drawn per language, one trace each; a 14-language file is not."""
    from mlse.runs.results import EvalResult

    langs = [f"l{i:02d}" for i in range(40)]
    for model, shift in (("good", 50.0), ("bad", 0.0)):
        scores = {lang: {"acc_mean": shift + i, "acc_to_en": 1.0} for i, lang in enumerate(langs)}
        EvalResult(model=model, task="tatoeba", split="test", scores=scores).write_json(
            tmp_path / "results" / "tatoeba-all" / f"{model}.json"
        )
    few = {lang: {"acc_mean": 99.0} for lang in langs[:14]}
    EvalResult(model="few", task="tatoeba", split="test", scores=few).write_json(tmp_path / "results" / "few.json")
    frame, _ = load_index([tmp_path / "results"])
    fig = tatoeba_languages_plot(frame)
    assert sorted(t.name.split(" ")[0] for t in fig.data) == ["bad", "good"]
    assert list(fig.data[0].x) == langs[::-1]  # sorted by the mean over files: l39 first
    assert "40 languages" in fig.layout.title.text
    assert not tatoeba_languages_plot(frame[frame["model"] == "few"]).data  # too few languages: a message instead


def test_student_study_results_are_rows_and_curves(tmp_path):
    sts = {
        "model": "/runs/students/ema",
        "task": "sts",
        "split": "test",
        "scores": {"en-de": {"pearson": 70.0, "spearman": 68.5}},
        "averages": {"cross-12": {"spearman": 66.0}},
    }
    tatoeba = {
        "model": "/runs/students/ema",
        "task": "tatoeba",
        "split": "test",
        "scores": {"deu": {"acc_mean": 97.0}},
        "averages": {"all": {"acc_mean": 91.0}},
    }
    write(
        tmp_path / "students" / "ema.json",
        {
            "recipe": "ema-frozen",
            "config": {"method": "ema"},
            "sts": sts,
            "tatoeba": tatoeba,
            "train": {"method": "ema", "stop_reason": "budget", "best_dev_spearman": 80.9, "steps": 410},
            "curve": [
                {"step": 0, "elapsed_s": 60.0, "dev_spearman": 75.3},
                {"step": 50, "elapsed_s": 282.0, "dev_spearman": 80.8},
            ],
        },
    )
    frame, warnings = build_index([tmp_path])
    assert not warnings and set(frame["kind"]) == {"student"}
    rows = frame[(frame["model"] == "student:ema-frozen")]
    assert rows[(rows["key"] == "en-de") & (rows["metric"] == "spearman")]["value"].tolist() == [68.5]
    assert rows[(rows["key"] == "avg:cross-12")]["value"].tolist() == [66.0]
    assert rows[(rows["key"] == "deu")]["value"].tolist() == [97.0]
    assert rows[(rows["metric"] == "best_dev_spearman")]["value"].tolist() == [80.9]
    curves = finetune_curves([tmp_path])
    mine = curves[curves["run"] == "student:ema-frozen"]
    assert list(mine["minutes"]) == [1.0, 4.7] and list(mine["dev_spearman"]) == [75.3, 80.8]


def test_an_interrupted_run_is_shown_as_such(tmp_path, tiny_bert):
    """A run whose job died with the app: after the sweep the table has a row ``interrupted`` and the note names it."""
    runs = tmp_path / "runs"
    log = [
        {"step": 0, "elapsed_s": 1, "dev_spearman": 10.0, "saved": True},
        {"step": 2, "elapsed_s": 2, "saved": False},
    ]
    fine_tune_run(runs, "killed", tiny_bert, log)
    stale_lock(runs, "killed")
    sweep_interrupted(runs)
    frame, note = load_index([runs])
    row = frame[frame["model"] == "runs/killed"]
    assert list(row["metric"]) == ["interrupted"] and list(row["kind"]) == ["interrupted-run"]
    assert row["value"].iloc[0] == 0 and row["task"].iloc[0] == "finetune"  # the step of the checkpoint it keeps
    assert "Interrupted" in note and "runs/killed" in note
    assert "runs/killed" in set(finetune_curves([runs])["run"])  # its curve up to the kill is still drawn
