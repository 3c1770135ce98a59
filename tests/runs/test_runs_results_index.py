"""The results index reads a file once while it is unchanged (path, size and mtime), for the table and the curves."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from mlse.runs import results_index
from mlse.runs.results_index import build_index, finetune_curves


@pytest.fixture()
def reads(monkeypatch) -> list[str]:
    """The names of the files the index parses, in order (every JSON parse goes through ``_load_quietly``)."""
    seen: list[str] = []
    real = results_index._load_quietly

    def counting(path: Path):
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(results_index, "_load_quietly", counting)
    return seen


def write_eval(path: Path, spearman: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": "m", "task": "sts", "scores": {"en-de": {"spearman": spearman}}}))
    return path


def bump_mtime(path: Path) -> None:
    """A later modification time, as a rewrite a second later would leave (file systems may round mtimes)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def test_an_unchanged_file_is_parsed_once_and_a_changed_one_again(tmp_path, reads):
    a = write_eval(tmp_path / "a.json", 10.0)
    write_eval(tmp_path / "b.json", 20.0)
    first, _ = build_index([tmp_path])
    assert sorted(reads) == ["a.json", "b.json"]
    again, _ = build_index([tmp_path])
    assert sorted(reads) == ["a.json", "b.json"]  # nothing parsed a second time
    assert again.equals(first)
    write_eval(a, 12.5)
    bump_mtime(a)
    changed, _ = build_index([tmp_path])
    assert sorted(reads) == ["a.json", "a.json", "b.json"]  # only the changed file
    assert set(changed["value"]) == {12.5, 20.0}


def test_a_file_touched_but_not_changed_is_parsed_again(tmp_path, reads):
    """The key is (path, size, mtime): a new mtime means a new read even when the bytes are the same."""
    a = write_eval(tmp_path / "a.json", 10.0)
    build_index([tmp_path])
    bump_mtime(a)
    frame, _ = build_index([tmp_path])
    assert reads == ["a.json", "a.json"] and list(frame["value"]) == [10.0]


def test_a_file_that_becomes_corrupt_is_skipped_with_a_warning_and_its_old_rows_go(tmp_path, reads):
    a = write_eval(tmp_path / "a.json", 10.0)
    assert len(build_index([tmp_path])[0]) == 1
    a.write_text('{"model": "m", "task": "sts", "scores": {')
    bump_mtime(a)
    frame, warnings = build_index([tmp_path])
    assert frame.empty and len(warnings) == 1 and "a.json" in warnings[0]


def test_run_logs_are_read_once_until_they_grow(tmp_path, reads, monkeypatch):
    log_reads: list[str] = []
    real_log_rows = results_index._log_rows

    def counting(path: Path, run: str):
        log_reads.append(run)
        return real_log_rows(path, run)

    monkeypatch.setattr(results_index, "_log_rows", counting)
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    log_file = run / "log.jsonl"
    log_file.write_text('{"step": 0, "elapsed_s": 6.0, "dev_spearman": 18.0}\n')
    assert len(finetune_curves([tmp_path / "runs"])) == 1
    assert len(finetune_curves([tmp_path / "runs"])) == 1
    assert log_reads == ["runs/r1"]
    with log_file.open("a") as out:  # a training run appends one line per evaluation
        out.write('{"step": 5, "elapsed_s": 12.0, "dev_spearman": 21.0}\n')
    curves = finetune_curves([tmp_path / "runs"])
    assert log_reads == ["runs/r1", "runs/r1"] and list(curves["step"]) == [0, 5]


def test_a_student_result_with_a_broken_curve_is_skipped_with_a_warning(tmp_path, caplog):
    study = {"recipe": "ema", "sts": {}, "tatoeba": {}, "train": {}, "curve": [{"step": 1, "elapsed_s": None}]}
    (tmp_path / "ema.json").write_text(json.dumps(study))
    with caplog.at_level(logging.WARNING, logger="mlse.runs.results_index"):
        curves = finetune_curves([tmp_path])
    assert curves.empty and "ema.json" in caplog.text
