"""The single-slot job runner (mlse.train.runner): refusal, queue, stop, progress records, failures; and the training
jobs (mlse.train.jobs): requests, stops, restoring the run a job replaced."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from mlse.data import load_flores
from mlse.data.pairs import PROBE_LANGS
from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.heads.scorer import Scorer
from mlse.runs.folders import is_scorer_folder
from mlse.runs.health import partial_reason
from mlse.stop_signal import Stopped, StopSignal
from mlse.train.head_training import probe_texts
from mlse.train.jobs import training_job
from mlse.train.request import TrainRequest, run_name
from mlse.train.runner import JobBusyError, JobRunner
from tests.job_helpers import on_first_eval


def blocking_job(release: threading.Event, started: threading.Event | None = None):
    """A job that reports once, then waits for ``release`` (or its Stop)."""

    def fn(report, stop):
        report({"event": "eval", "x": 1, "message": "working"})
        if started is not None:
            started.set()
        while not (release.is_set() or stop.is_set()):
            stop.event.wait(0.01)
        return {"done": True}

    return fn


def test_second_start_is_refused_with_the_running_jobs_name():
    runner, release, started = JobRunner(max_queued=0), threading.Event(), threading.Event()
    first = runner.submit("first-run", blocking_job(release, started), "mse on x")
    assert started.wait(5)
    with pytest.raises(JobBusyError, match="first-run"):
        runner.submit("second-run", blocking_job(release))
    assert "first-run" in runner.status_text() and "mse on x" in runner.status_text()
    release.set()
    assert runner.wait(5)
    assert first.state == "finished" and first.result == {"done": True}
    assert runner.status_text() == "No training run in progress."
    again = runner.submit("second-run", lambda report, stop: 42)  # free again once the first ended
    assert runner.wait(5) and again.state == "finished" and again.result == 42


def test_bounded_queue_runs_in_order_and_refuses_beyond_it():
    runner, release, order = JobRunner(max_queued=1), threading.Event(), []

    def record(name):
        def fn(report, stop):
            order.append(name)
            release.wait(5)

        return fn

    runner.submit("a", record("a"))
    b = runner.submit("b", record("b"))
    assert b.state == "queued"
    with pytest.raises(JobBusyError, match="queue is full"):
        runner.submit("c", record("c"))
    release.set()
    assert runner.wait(5)
    assert order == ["a", "b"] and runner.latest().name == "b"


def test_a_name_cannot_run_twice_at_once():
    runner, release = JobRunner(max_queued=3), threading.Event()
    runner.submit("same", blocking_job(release))
    with pytest.raises(JobBusyError, match="already running or queued"):
        runner.submit("same", blocking_job(release))
    release.set()
    assert runner.wait(5)


def test_stop_is_honoured_and_records_are_collected():
    runner, never, started = JobRunner(), threading.Event(), threading.Event()
    job = runner.submit("long", blocking_job(never, started))
    assert started.wait(5)
    assert "Stop requested" in runner.stop()
    assert runner.wait(5)
    assert job.state == "stopped" and job.result == {"done": True}  # the job returned what it had
    records = runner.records(job)
    assert len(records) == 1 and records[0]["x"] == 1 and records[0]["t"] >= 0
    assert runner.stop() == "No job is running."


def test_a_queued_job_can_be_cancelled():
    runner, release, started = JobRunner(max_queued=1), threading.Event(), threading.Event()
    runner.submit("a", blocking_job(release, started))
    assert started.wait(5)
    queued = runner.submit("b", blocking_job(release))
    assert "Cancelled" in runner.stop("b")
    release.set()
    assert runner.wait(5)
    assert queued.state == "cancelled" and queued.started is None


@pytest.mark.parametrize(
    ("exc", "state", "text"),
    [
        (RuntimeError("boom"), "failed", "RuntimeError: boom"),
        (MlseError("unknown model 'x'"), "failed", "unknown model 'x'"),
        (Stopped("budget ran out"), "stopped", "budget ran out"),
    ],
)
def test_an_exception_in_a_job_becomes_its_status_not_a_crash(exc, state, text):
    runner = JobRunner()

    def fn(report, stop):
        report({"event": "phase", "message": "about to fail"})
        raise exc

    job = runner.submit("bad", fn)
    assert runner.wait(5)
    assert job.state == state and text in job.message and job.done
    assert runner.latest() is job
    ok = runner.submit("good", lambda report, stop: "fine")  # the runner survives
    assert runner.wait(5) and ok.state == "finished"


@pytest.mark.parametrize("name", ["", "  ", "../evil", "a/b", ".hidden", "x" * 81, "a b", "a..b"])
def test_unsafe_run_names_are_refused(name):
    with pytest.raises(MlseError):
        run_name(name)


def test_a_request_refuses_overwriting_and_self_input(tiny_bert):
    (runs_dir() / "taken").mkdir(parents=True)
    base = dict(method="hard", model=str(tiny_bert), budget_minutes=1, pairs=["en-de"])
    with pytest.raises(MlseError, match="already exists"):
        TrainRequest(name="taken", **base)
    assert TrainRequest(name="taken", overwrite=True, **base).out == runs_dir() / "taken"
    with pytest.raises(MlseError, match="input of this run"):
        TrainRequest(name="taken", overwrite=True, **{**base, "model": "runs/taken"})
    with pytest.raises(MlseError, match="needs a teacher"):
        TrainRequest(name="new", **{**base, "method": "mse"})
    with pytest.raises(MlseError, match="^Method: 'sgd' is not offered; choose from stage1, stage2, mse"):
        TrainRequest(name="new", **{**base, "method": "sgd"})


def previous_run(name: str):
    """A run folder that a new run with ``overwrite=True`` replaces (its marker says whether it is still there)."""
    old = runs_dir() / name
    old.mkdir(parents=True)
    (old / "marker.txt").write_text("previous run")
    return old


def stage1_request(tiny_bert, name: str, **overrides) -> TrainRequest:
    """Stage 1 on the tiny BERT, 40 eng-deu pairs, no language probe (the heads train in about a second)."""
    fields = dict(
        method="stage1",
        model=str(tiny_bert),
        name=name,
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=50,
        budget_minutes=5,
        probe=False,
    )
    return TrainRequest(**{**fields, **overrides})


def test_stopping_a_head_run_keeps_the_best_epoch_so_far(tiny_bert):
    """A stop after the first epoch: that epoch is saved as the run, replacing the old folder."""
    old = previous_run("s1-run")
    req = stage1_request(tiny_bert, "s1-run", overwrite=True)
    runner = JobRunner()
    job_fn = training_job(req)

    pressed_after_first_epoch = on_first_eval(job_fn, lambda stop: stop.set())

    job = runner.submit("s1-run", pressed_after_first_epoch)
    assert runner.wait(600)
    assert job.state == "stopped" and "checkpoint is kept" in job.message, job.message
    assert not (old / "marker.txt").exists() and is_scorer_folder(old)  # the stopped run replaced the old one
    metrics = Scorer.load(old).metadata["metrics"]
    assert metrics["stage1_stopped"] is True and metrics["stage1_epochs"] == 1 and metrics["stage1_best_epoch"] == 1
    assert not [p for p in runs_dir().iterdir() if p.name.startswith(".")]  # no folder left aside
    evals = [r for r in runner.records(job) if r.get("event") == "eval"]
    assert len(evals) == 1 and evals[0]["x"] == 1 and evals[0]["dev_loss"] is not None


def test_a_stop_before_training_saves_nothing_and_keeps_the_old_run(tiny_bert):
    old = previous_run("s1-early")
    req = stage1_request(tiny_bert, "s1-early", overwrite=True)
    runner = JobRunner()
    job_fn = training_job(req)

    def pressed_at_once(report, stop):
        stop.set()
        return job_fn(report, stop)

    job = runner.submit("s1-early", pressed_at_once)
    assert runner.wait(600)
    assert job.state == "stopped" and "nothing was saved" in job.message, job.message
    assert (old / "marker.txt").read_text() == "previous run"
    assert not [p for p in runs_dir().iterdir() if p.name.startswith(".")]


def test_a_head_run_with_a_tiny_budget_still_trains_an_epoch_and_saves_it(tiny_bert):
    """The budget starts when training does (loading and encoding come first): a budget that is gone at once still
    lets the first epoch run, and that epoch is saved, marked partial."""
    req = stage1_request(tiny_bert, "s1-budget", budget_minutes=1e-6)
    runner = JobRunner()
    job = runner.submit("s1-budget", training_job(req))
    assert runner.wait(600)
    assert job.state == "finished", job.message
    assert any("budget ran out; the best epoch so far is saved" in r.get("message", "") for r in runner.records(job))
    assert Scorer.load(runs_dir() / "s1-budget").metadata["partial"] == {
        "phase": "training",
        "reason": "budget",
        "epochs": 1,
    }


def test_the_language_probe_is_encoded_before_the_budget_and_runs_when_the_budget_ended_training(tiny_bert):
    """The probe's FLORES texts are one-off encoding: encoded with the data, before the budget's clock starts, so a
    budget that is gone at once still gets its probe (it used to be skipped on a fresh cache, the run marked
    "language probe (skipped)"). The run is partial because the budget ended training, and says so."""
    req = stage1_request(tiny_bert, "s1-probe", budget_minutes=1e-6, probe=True)
    runner = JobRunner()
    job = runner.submit("s1-probe", training_job(req))
    assert runner.wait(600)
    assert job.state == "finished", job.message
    records = runner.records(job)
    events = [r.get("event") for r in records]
    flores = len(probe_texts(load_flores(list(PROBE_LANGS))))
    encoded = [i for i, r in enumerate(records) if r.get("event") == "encoding" and r["total"] == flores]
    assert encoded and encoded[-1] < events.index("training"), events  # the probe's texts, before the budget
    meta = Scorer.load(runs_dir() / "s1-probe").metadata
    assert meta["partial"] == {"phase": "training", "reason": "budget", "epochs": 1}
    probe = meta["metrics"]["language_probe"]
    assert {"backbone", "meaning", "language"} <= set(probe) and probe["n_langs"] == len(PROBE_LANGS), probe
    assert partial_reason(runs_dir() / "s1-probe") == "the time budget ended training after 1 epoch(s)"


def test_a_failed_run_puts_back_the_run_it_was_replacing(tiny_bert):
    old = previous_run("s1-fail")
    req = stage1_request(tiny_bert, "s1-fail", overwrite=True, pairs=["eng-zzz"], max_epochs=2)
    runner = JobRunner()
    job = runner.submit("s1-fail", training_job(req))
    assert runner.wait(600)
    assert job.state == "failed" and "zzz" in job.message, job.message
    assert (old / "marker.txt").read_text() == "previous run"
    assert not [p for p in runs_dir().iterdir() if p.name.startswith(".")]  # no folder left aside


def test_the_requests_backend_reaches_head_training(tiny_bert, monkeypatch):
    """The app's --backend travels in the request to the backbone of a head job (it used to stop at the tab)."""
    import mlse.train.head_training

    seen = {}

    def fake_stage1(backbone, **kwargs):
        seen.update(kwargs, backbone=backbone)
        return SimpleNamespace(metadata={"metrics": {}})

    monkeypatch.setattr(mlse.train.head_training, "train_stage1", fake_stage1)
    result = training_job(stage1_request(tiny_bert, "s1-onnx", backend="onnx-int8"))(lambda record: None, StopSignal())
    assert result["run"] == "runs/s1-onnx" and seen["backbone"] == str(tiny_bert)
    assert (seen["backend"], seen["max_pairs"], seen["probe"], seen["max_epochs"]) == ("onnx-int8", 40, False, 50)
    assert seen["out"] == str(runs_dir() / "s1-onnx")


def test_stop_right_after_submit_cancels_a_job_the_worker_has_not_picked_up():
    """Stop pressed before the worker thread takes the job off the queue (a busy machine) must not be lost."""
    gate = threading.Event()

    class SlowToStart(JobRunner):
        def _work(self):
            gate.wait(5)
            super()._work()

    runner, ran = SlowToStart(), threading.Event()
    job = runner.submit("just-started", lambda report, stop: ran.set())
    assert "Cancelled" in runner.stop() and job.state == "cancelled"
    gate.set()
    assert runner.wait(5) and not ran.is_set()
