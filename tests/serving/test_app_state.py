"""mlse.serving.app_state.AppState: constructing it touches neither disk nor network; start() does what an app does."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from mlse.data import hub_probe
from mlse.dirs import runs_dir
from mlse.encoders.catalogue import STAGE1, ModelInfo
from mlse.serving.app_state import AppState
from mlse.serving.model_pool import ModelPool
from tests.interrupted_runs import fine_tune_run, stale_lock


def tree(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its modification time: any rename, write or new file changes it."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in [root, *root.rglob("*")]}


@pytest.fixture()
def runs_with_a_run_left_aside(monkeypatch, tmp_path) -> Path:
    """A runs folder where a killed job left a run aside (what start() puts back), read-only."""
    runs = tmp_path / "runs"
    aside = runs / ".my-run.replaced-123"
    aside.mkdir(parents=True)
    (aside / "scorer.json").write_text("{}")
    monkeypatch.setenv("MLSE_RUNS", str(runs))
    return runs


@pytest.fixture()
def no_network(monkeypatch) -> list[str]:
    """Record (and refuse) every socket, name lookup and hub probe."""
    attempts: list[str] = []

    def refuse(what):
        def call(*args, **kwargs):
            attempts.append(what)
            raise OSError(f"{what}: no network in this test")

        return call

    monkeypatch.setattr(socket, "socket", refuse("socket"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(hub_probe, "probe_in_background", lambda: attempts.append("hub probe"))
    hub_probe.remember(None)
    yield attempts
    hub_probe.remember(None)


def test_constructing_touches_no_disk_and_no_network(runs_with_a_run_left_aside, no_network):
    runs = runs_with_a_run_left_aside
    before = tree(runs)
    os.chmod(runs, 0o555)  # read-only as well (root ignores it: the tree comparison is the check that holds)
    try:
        state = AppState(default_models=("minilm-en",), max_memory="800MB")
    finally:
        os.chmod(runs, 0o755)
    assert tree(runs) == before  # nothing renamed, written or created
    assert no_network == []  # no socket, no lookup, no probe started
    assert isinstance(state.pool, ModelPool) and state.pool.loaded() == [] and state.pool.loaded_bytes == 0


def test_constructing_on_a_missing_runs_folder_creates_nothing(monkeypatch, tmp_path, no_network):
    missing = tmp_path / "nowhere" / "runs"
    monkeypatch.setenv("MLSE_RUNS", str(missing))
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "nowhere" / "cache"))
    AppState(backend="onnx")
    assert not (tmp_path / "nowhere").exists() and no_network == []


def test_start_puts_back_runs_left_aside_and_starts_the_probe(runs_with_a_run_left_aside, no_network):
    runs = runs_with_a_run_left_aside
    state = AppState(default_models=())
    assert state.start() is state
    assert (runs / "my-run" / "scorer.json").is_file() and not (runs / ".my-run.replaced-123").exists()
    assert no_network == ["hub probe"]  # started in the background; the answer is read at the next rescan


def test_a_bad_setting_is_refused_at_construction():
    from mlse.errors import MlseError

    with pytest.raises(MlseError, match="--max-memory"):
        AppState(max_memory="plenty")
    with pytest.raises(MlseError):
        AppState(backend="tensorrt")


def test_the_pool_is_a_library_object_the_state_delegates_to(tiny_bert):
    pool = ModelPool(max_memory="1GB")
    first = pool.get(str(tiny_bert))
    assert pool.get(str(tiny_bert)) is first and first.encode(["a sentence"]).shape == (1, 32)
    assert pool.loaded() == [("local", str(Path(tiny_bert).resolve()))] and pool.loaded_bytes > 0
    state = AppState(default_models=(), pool=pool)
    assert state.encoder(str(tiny_bert)) is first and state.pool is pool


def test_app_start_sweeps_and_labels_interrupted_runs(tiny_bert, monkeypatch):
    monkeypatch.setattr("mlse.serving.app_state.hub_reachable", lambda: None)
    root = runs_dir()
    fine_tune_run(root, "killed", tiny_bert, [{"step": 0, "saved": True}])
    finished = fine_tune_run(root, "finished", tiny_bert, [{"step": 0, "saved": True}])
    (finished / "metrics.json").write_text("{}")
    stale_lock(root, "killed")
    state = AppState(default_models=()).start()  # no default backbone: trained runs are ticked instead
    labels = {m.name: m.label for m in state.models() if m.name.startswith("runs/")}
    assert labels["runs/killed"].endswith("(trained here) (interrupted; its checkpoint of step 0 is kept)")
    assert "interrupted" not in labels["runs/finished"] and "partial" not in labels["runs/finished"]
    assert labels["runs/finished"].endswith("(trained here)")
    chosen, _ = state.default_selection(limit=50)
    assert "runs/finished" in chosen and "runs/killed" not in chosen  # never offered as a finished model


def test_a_run_trained_here_and_a_shipped_one_of_the_same_name_read_apart():
    shipped = ModelInfo("shipped/me5-small+s1", STAGE1, "scorer", "assets", backbone="me5-small")
    trained = ModelInfo("runs/me5-small+s1", STAGE1, "scorer", "runs", backbone="me5-small")
    assert shipped.label == "shipped/me5-small+s1 · +Stage 1 (shipped)"
    assert trained.label == "runs/me5-small+s1 · +Stage 1 (trained here)"
    stopped = ModelInfo("runs/s", STAGE1, "scorer", "runs", partial="stopped after 40 steps")
    assert stopped.label == "runs/s · +Stage 1 (trained here) (partial: stopped after 40 steps)"
    assert "trained here" not in ModelInfo("me5-small", "backbone", "package", "x").label
