"""mlse.runs.folders: run names (one rule for the CLI and the app), what a folder is, and how runs are found."""

from __future__ import annotations

from pathlib import Path

from mlse.runs.folders import find_runs, is_finetuned_model, read_log_records, run_name, safe_name, training_run_name


def test_safe_name_keeps_folder_friendly_characters(tmp_path, monkeypatch):
    assert safe_name("minilm-en") == "minilm-en"
    assert safe_name("sentence-transformers/LaBSE") == "sentence-transformers_LaBSE"  # a hub id (no such folder)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "my model").mkdir(parents=True)
    assert safe_name("models/my model/") == "my_model"  # an existing folder: its own name


def test_run_name_is_the_model_then_the_tags():
    assert run_name("minilm-en", "s1") == "minilm-en+s1"
    assert run_name("runs/minilm-en+s1", "s2", "conv") == "minilm-en+s1+s2+conv"  # a run's "runs/" prefix goes
    assert run_name("sentence-transformers/LaBSE", "mse") == "sentence-transformers_LaBSE+mse"


def test_training_run_name_tags_heads_by_their_options_and_students_by_their_method():
    assert training_run_name("minilm-en", "stage1") == "minilm-en+s1"
    assert training_run_name("minilm-en", "stage1", prelayer=True) == "minilm-en+s1-prelayer"
    assert training_run_name("runs/minilm-en+s1", "stage2") == "minilm-en+s1+s2"
    assert training_run_name("runs/x+s1", "stage2", conv=True, nonlinearity="tanh") == "x+s1+s2+conv+tanh"
    assert training_run_name("runs/x+s1", "stage2", nonlinearity="identity") == "x+s1+s2"
    assert training_run_name("minilm-en", "ema") == "minilm-en+ema"


def _model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "modules.json").write_text("[]")
    return folder


def test_find_runs_sees_scorers_students_and_groups_but_not_hidden_folders(tmp_path):
    (tmp_path / "a+s1").mkdir()
    (tmp_path / "a+s1" / "scorer.json").write_text("{}")
    _model(tmp_path / "student" / "model")
    (tmp_path / "student" / "finetune_config.json").write_text("{}")
    _model(tmp_path / "grid" / "s1+s2" / "model")
    _model(tmp_path / ".half-written" / "model")
    (tmp_path / "empty").mkdir()
    found = {(r.name, r.kind, r.location) for r in find_runs(tmp_path)}
    assert found == {
        ("runs/a+s1", "scorer", tmp_path / "a+s1"),
        ("runs/student", "run", tmp_path / "student" / "model"),
        ("runs/grid/s1+s2", "run", tmp_path / "grid" / "s1+s2" / "model"),
    }
    assert is_finetuned_model(tmp_path / "student" / "model") and is_finetuned_model(tmp_path / "student")
    assert not is_finetuned_model(tmp_path / "grid" / "s1+s2" / "model")
    assert find_runs(tmp_path / "missing") == []


def test_the_log_reader_leaves_out_a_line_cut_short_and_says_which(tmp_path):
    log_file = tmp_path / "log.jsonl"
    log_file.write_text('{"step": 0, "dev_spearman": 70.0}\n{"step": 50, "saved": true}\n{"no_step": 1}\n{"step": 10')
    skipped = []
    records = read_log_records(log_file, lambda line, why: skipped.append(line))
    assert [r["step"] for r in records] == [0, 50]
    assert records[1]["saved"] is True
    assert skipped == [3, 4]  # the record without a step, the line the kill cut
    assert read_log_records(tmp_path / "missing.jsonl") == []
