"""The job lock (mlse.runs.job_lock) and the sweep of interrupted runs (mlse.runs.health.sweep_interrupted): a job
left running by an earlier start of the app refuses new jobs while it lives; once it is dead its run is marked
interrupted (keeping its checkpoint) or removed (no model at all), its lock is swept, and new jobs run again."""

from __future__ import annotations

import json
import time

import pytest

from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.runs.health import INTERRUPTED_FILE, partial_reason, sweep_interrupted
from mlse.runs.job_lock import APP, LOCK_DIR, LockRequest, hold, live_orphans, lock_files, lock_request
from mlse.train.jobs import training_job
from mlse.train.request import TrainRequest
from tests.interrupted_runs import fine_tune_run, hold_in_another_process, stale_lock


def request(tiny_bert, name: str = "new-run") -> TrainRequest:
    return TrainRequest(method="hard", model=str(tiny_bert), name=name, pairs=["en-de"], budget_minutes=1)


def test_a_live_orphan_refuses_new_jobs_until_it_ends(tiny_bert):
    root = runs_dir()
    holder = hold_in_another_process(root, "orphan")
    try:
        assert [o["run"] for o in live_orphans(root)] == ["orphan"]
        with pytest.raises(MlseError) as refused:
            training_job(request(tiny_bert), child_process=True)
        message = str(refused.value)
        assert "left by an earlier start of the app (orphan) is still running" in message
        assert str(root) not in message and "/" not in message  # no server path
        with pytest.raises(MlseError, match="being trained by another process"):
            hold(lock_request(root, "orphan"))
        assert sweep_interrupted(root) == [] and len(lock_files(root)) == 1  # alive: not swept
    finally:
        holder.kill()
        holder.wait()
    assert live_orphans(root) == []
    assert callable(training_job(request(tiny_bert), child_process=True))  # accepted (and the lock swept)
    assert lock_files(root) == []


def test_a_job_of_this_app_is_no_orphan():
    held = hold(lock_request(runs_dir(), "mine"))
    try:
        assert live_orphans(runs_dir()) == []
        assert json.loads((runs_dir() / LOCK_DIR / "mine.lock").read_text())["app"] == APP
    finally:
        held.release(remove=True)
    assert lock_files(runs_dir()) == []


def test_the_sweep_marks_keeps_and_removes(tiny_bert):
    root = runs_dir()
    log = [{"step": 0, "saved": True}, {"step": 2, "saved": True}, {"step": 4, "saved": False}]
    kept = fine_tune_run(root, "with-checkpoint", tiny_bert, log)
    half = fine_tune_run(root, "no-model", None, [])
    done = fine_tune_run(root, "finished", tiny_bert, log)
    (done / "metrics.json").write_text('{"steps": 4}')  # finished; only its answer was lost
    for name in ("with-checkpoint", "no-model", "finished", "never-made-a-folder"):
        stale_lock(root, name)

    assert sorted(sweep_interrupted(root)) == ["finished", "never-made-a-folder", "no-model", "with-checkpoint"]
    assert lock_files(root) == [] and not half.exists()
    marker = json.loads((kept / INTERRUPTED_FILE).read_text())
    assert marker["checkpoint_step"] == 2 and marker["last_step"] == 4 and "app ended" in marker["why"]
    assert (kept / "model" / "modules.json").is_file()  # the checkpoint is kept
    assert partial_reason(kept / "model") == "interrupted; its checkpoint of step 2 is kept"
    assert not (done / INTERRUPTED_FILE).exists() and partial_reason(done / "model") is None
    assert callable(training_job(request(tiny_bert), child_process=True))  # a new job is accepted afterwards


def test_a_stopped_run_whose_app_died_says_interrupted(tiny_bert):
    """The child stopped gracefully when its app died: its metrics say partial, the sweep says why."""
    root = runs_dir()
    run = fine_tune_run(root, "stopped-orphan", tiny_bert, [{"step": 0, "saved": True}])
    (run / "metrics.json").write_text(json.dumps({"partial": {"reason": "stopped", "steps": 3}}))
    assert partial_reason(run / "model") == "stopped after 3 steps"
    stale_lock(root, "stopped-orphan")
    sweep_interrupted(root)
    assert partial_reason(run / "model") == "interrupted; its checkpoint of step 0 is kept"


def test_a_lock_naming_a_path_never_touches_it(tmp_path):
    victim = tmp_path / "victim"
    (victim / "keep").mkdir(parents=True)
    root = tmp_path / "runs"
    path = stale_lock(root, "x")
    path.write_text(json.dumps({"run": "../victim", "pid": 1}))
    sweep_interrupted(root)
    assert (victim / "keep").is_dir() and lock_files(root) == []


def test_without_fcntl_there_is_no_lock(monkeypatch, tmp_path):
    monkeypatch.setattr("mlse.runs.job_lock.fcntl", None)
    assert hold(LockRequest(str(tmp_path / "x.lock"), "x", APP, time.time())) is None
    stale_lock(tmp_path, "y")
    assert live_orphans(tmp_path) == [] and sweep_interrupted(tmp_path) == []
