"""Who may stop and watch a run: mlse.train.runner's owners and mlse.ui.finetune_jobs's public / local rules."""

from __future__ import annotations

import threading

import pytest

from mlse import public_mode
from mlse.dirs import package_parent
from mlse.serving.app_state import AppState
from mlse.train.runner import JobBusyError, JobRunner
from mlse.ui import finetune_jobs


def _blocking_job(release: threading.Event, started: threading.Event):
    def job(report, stop):
        started.set()
        report({"event": "phase", "message": "secret progress of the owner"})
        while not (release.is_set() or stop.is_set()):
            stop.event.wait(0.01)

    return job


@pytest.fixture()
def running():
    """A runner with one running job of owner 'alice' (released at teardown)."""
    runner, release, started = JobRunner(max_queued=0), threading.Event(), threading.Event()
    runner.submit("alice-run", _blocking_job(release, started), "stage1 on x", owner="alice")
    assert started.wait(5)
    yield runner
    release.set()
    runner.wait(5)


def test_an_owner_reaches_only_their_own_job(running):
    assert running.latest("bob") is None and running.latest("alice").name == "alice-run"
    answer = running.stop(owner="bob")
    assert "no run in progress" in answer and "alice" not in answer
    assert not running.latest("alice").signal.is_set()
    assert "Stop requested for 'alice-run'" in running.stop(owner="alice")
    assert running.wait(5) and running.latest("alice").state == "stopped"


def test_a_busy_message_for_others_names_no_run(running):
    text = running.busy_text("bob")
    assert "Another visitor's training run is in progress" in text and "alice" not in text and "stage1" not in text
    refused = pytest.raises(JobBusyError, running.submit, "bob-run", lambda r, s: None, "x", owner="bob")
    assert "alice" not in str(refused.value) and "in progress" in str(refused.value)


@pytest.fixture()
def app_state(running):
    state = AppState()
    state.jobs = running
    return state


def test_on_a_public_deployment_a_stranger_sees_only_that_a_run_is_busy(app_state, monkeypatch):
    monkeypatch.setenv(public_mode.PUBLIC_ENV, "1")
    status, _, _, _, version = finetune_jobs.poll(app_state, "step", "bob")
    assert "Another visitor's" in status and "alice" not in status and "secret progress" not in status
    assert version[0] is None  # no curves of another's run
    assert "no run in progress" in finetune_jobs.stop_run(app_state, None)  # no token: nothing stops
    assert "no run in progress" in finetune_jobs.stop_run(app_state, "bob")
    assert not app_state.jobs.latest("alice").signal.is_set()
    status, _, _, _, _ = finetune_jobs.poll(app_state, "step", "alice")
    assert "alice-run" in status and "secret progress" in status
    assert "Stop requested" in finetune_jobs.stop_run(app_state, "alice")


def test_on_ones_own_machine_a_page_without_the_token_still_sees_and_stops_the_run(app_state, monkeypatch):
    for name in (public_mode.PUBLIC_ENV, public_mode.SPACE_ENV):
        monkeypatch.delenv(name, raising=False)
    status, *_ = finetune_jobs.poll(app_state, "step", None)
    assert "alice-run" in status
    assert "Stop requested for 'alice-run'" in finetune_jobs.stop_run(app_state, None)


def test_a_message_on_a_public_deployment_names_no_server_folder(monkeypatch, tmp_path):
    from mlse.ui.text import md_code, md_escape

    runs = tmp_path / "deploy" / "runs"
    monkeypatch.setenv("MLSE_RUNS", str(runs))
    message = f"run 'x' already exists ({runs / 'x'}); data in {package_parent() / 'assets'}"
    monkeypatch.delenv(public_mode.SPACE_ENV, raising=False)
    monkeypatch.delenv(public_mode.PUBLIC_ENV, raising=False)
    assert str(runs) in md_code(message)  # one's own machine: the real folder helps
    monkeypatch.setenv(public_mode.PUBLIC_ENV, "1")
    shown = md_escape(message) + md_code(message)
    assert str(tmp_path) not in shown and str(package_parent()) not in shown
    assert "runs/x" in md_code(message) and "app/assets" in md_code(message)
