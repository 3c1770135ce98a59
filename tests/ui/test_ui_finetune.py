"""Fine-tune tab: form contents, validation messages, a real tiny run driven through the handlers, and the layout."""

from __future__ import annotations

import threading
import time

import pytest

from mlse.dirs import runs_dir
from mlse.serving.app_state import AppState
from mlse.train.config import STS_LOSSES
from mlse.train.jobs import encoding_record, training_record
from mlse.train.runner import Job, JobRunner
from mlse.ui import finetune_tab as ft
from mlse.ui.finetune_methods import STS_LOSS_LABELS, method_settings
from mlse.ui.finetune_progress import job_fraction, progress_html


def tiny_form(tiny_bert, run_name: str, **overrides) -> dict:
    """A hard-contrastive run on 32 en-de pairs, batch 8, dev every 2 steps on 64 rows per dev pair."""
    form = dict(
        method="hard",
        model=str(tiny_bert),
        teacher=None,
        pairs=["en-de"],
        max_pairs=32,
        budget_minutes=2.0,
        name=run_name,
        overwrite=False,
        batch_size=8,
        eval_every=2,
        dev_max_pairs=64,
        lr=1e-3,
    )
    form.update(overrides)
    return form


def wait_for(predicate, timeout: float = 600.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_method_settings_follow_the_method():
    state = AppState()
    mse, hard, stage1, stage2 = (method_settings(state, m) for m in ("mse", "hard", "stage1", "stage2"))
    assert mse["teacher_visible"] and not hard["teacher_visible"] and not stage1["teacher_visible"]
    assert "en-de" in mse["pairs"] and "eng-deu" in stage1["pairs"] and "en-de" in stage2["pairs_value"]
    assert not stage2["max_pairs_visible"] and mse["max_pairs_visible"]
    assert "minilm-en" in mse["models"] and "minilm-en" not in stage2["models"]  # stage 2 needs a Stage-1 scorer
    # the form opens on the app's preferred model (the first default that loads here: me5-small)
    assert mse["name"] == f"{state.preferred_model()}+mse" and "saves the best epoch so far" in stage1["note"]


def test_the_scored_pairs_fields_follow_the_method():
    state = AppState()
    alone, ema, stage1 = (method_settings(state, m) for m in ("sts", "ema", "stage1"))
    assert alone["sts_visible"] and alone["sts_loss"] == "cosent"  # the term alone needs a loss: CoSENT unless chosen
    assert not alone["sts_weight_visible"] and not alone["pairs_visible"]  # no weight, no translation pairs
    assert ema["sts_visible"] and ema["sts_weight_visible"] and ema["sts_loss"] == "none" and ema["pairs_visible"]
    assert not stage1["sts_visible"] and "Scored pairs" not in stage1["note"] and "Scored pairs" in ema["note"]
    assert method_settings(state, "sts", "angle")["sts_loss"] == "angle"  # a chosen loss is kept
    assert method_settings(state, "mse", "angle")["sts_loss"] == "angle"
    assert set(STS_LOSS_LABELS) == set(STS_LOSSES)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"method": "sts", "sts_loss": "none"}, "choose an STS loss"),
        ({"sts_loss": "cosent", "sts_weight": 0}, "STS term weight: must be &gt; 0"),
        ({"sts_loss": "hinge"}, "STS loss: 'hinge' is not offered"),
        ({"sts_loss": "cosent", "sts_weight": "lots"}, "STS term weight"),
        # refused by the training configuration's own validation before queueing, in the form's words
        ({"extend_vocab": 50}, "Extend vocabulary: must be 0 or &gt; 100"),
        ({"precision": "fp8"}, "Precision: 'fp8' is not offered"),
        ({"name": "../escape"}, "not a safe folder name"),
        ({"name": "<b>x</b>"}, "&lt;b&gt;"),  # echoed escaped, never as HTML
        ({"pairs": []}, "at least one language pair"),
        ({"method": "mse", "teacher": None}, "needs a teacher"),
        ({"budget_minutes": 0}, "Time budget (minutes): must be &gt; 0"),
        ({"model": ""}, "choose a model"),
    ],
)
def test_bad_input_gives_a_message_not_an_exception(tiny_bert, overrides, expected):
    state = AppState()
    message = ft.start_run(state, **tiny_form(tiny_bert, "ok-name", **overrides))
    assert expected in message
    assert ft.runner(state).latest() is None  # nothing was queued


def test_an_existing_run_is_not_overwritten_without_the_checkbox(tiny_bert):
    state = AppState()
    (runs_dir() / "exists").mkdir(parents=True)
    assert "already exists" in ft.start_run(state, **tiny_form(tiny_bert, "exists"))


def test_start_while_a_run_is_in_progress_names_it(tiny_bert):
    state = AppState()
    state.jobs = JobRunner(max_queued=0)
    release = threading.Event()
    state.jobs.submit("someone-elses-run", lambda report, stop: release.wait(10), "mse on minilm-en, 5 min")
    try:
        message = ft.start_run(state, **tiny_form(tiny_bert, "mine"))
        assert "someone-elses-run" in message and "in progress" in message
        text, *_ = ft.poll(state)
        assert "someone-elses-run" in text  # every session sees it
    finally:
        release.set()
        assert state.jobs.wait(10)


def test_a_tiny_run_shows_progress_stops_and_joins_the_model_lists(tiny_bert):
    state = AppState()
    # a budget the run cannot reach however busy the machine: Stop ends it, not the clock
    message = ft.start_run(state, **tiny_form(tiny_bert, "tiny-ui", budget_minutes=60.0))
    assert "Started" in message and "runs/tiny-ui" in message
    jobs = ft.runner(state)
    job = jobs.latest()
    evals = lambda: [r for r in jobs.records(job) if r.get("event") == "eval"]  # noqa: E731
    assert wait_for(lambda: len(evals()) >= 2 or job.done), job.message
    assert "Stop requested" in ft.stop_run(state)
    assert jobs.wait(600)
    assert job.state == "stopped", job.message
    text, bar, loss, dev, version = ft.poll(state)
    assert "stopped" in text and "runs/tiny-ui" in text and "100%" in bar
    n = len(evals())
    assert n >= 2 and len(loss.data[0].x) == n and len(dev.data[0].y) == n
    assert all(y is not None for y in dev.data[0].y)  # dev Spearman at every evaluation
    assert (runs_dir() / "tiny-ui" / "model" / "modules.json").is_file()  # the last good checkpoint
    assert "runs/tiny-ui" in state.model_names()  # without a restart
    _, _, loss_m, _, version_m = ft.poll(state, "minutes")
    minutes = [r["minutes"] for r in evals()]
    assert version_m != version and list(loss_m.data[0].x) == minutes  # the same points against the job's minutes
    assert minutes == sorted(minutes) and minutes != list(loss.data[0].x)  # not the steps
    assert ft.stop_run(state) == "No job is running."


def test_progress_fraction_uses_the_budget_clock():
    req = ft.TrainRequest(method="hard", model="m", name="x", pairs=["en-de"], budget_minutes=10, max_steps=100)
    job = Job(1, "x", lambda r, s: None, meta={"request": req})
    job.state, job.started = "running", 1000.0
    assert job_fraction(job, [], now=1001.0) == (0.02, "preparing")
    records = [{"event": "eval", "x": 10, "minutes": 2.0, "t": 60.0}]
    fraction, label = job_fraction(job, records, now=1000.0 + 60.0 + 60.0)  # one more minute since the record
    assert fraction == pytest.approx(0.3) and label == "3.0 of 10 min"
    records = [{"event": "eval", "x": 80, "minutes": 1.0, "t": 60.0}]
    assert job_fraction(job, records, now=1060.0)[0] == pytest.approx(0.8)  # step cap is further along
    job.state = "finished"
    assert job_fraction(job, records) == (1.0, "finished")


def test_progress_counts_the_encoding_then_the_budget_from_the_start_of_training():
    """Hand-made records of a job that encodes 4,000 texts before training: the bar shows n of N texts and the rate
    (the budget has not started), then the budget's minutes from the ``training`` record on."""
    req = ft.TrainRequest(method="stage1", model="m", name="x", budget_minutes=0.5)
    job = Job(1, "x", lambda r, s: None, meta={"request": req})
    job.state, job.started = "running", 1000.0
    records = [
        {"event": "phase", "message": "preparing: loading data and models", "t": 0.5},
        encoding_record(0, 4000, None, 0.5) | {"t": 2.0},
        encoding_record(1200, 4000, 85.4, 0.5) | {"t": 16.0},
    ]
    fraction, label = job_fraction(job, records, now=1020.0)
    assert fraction == pytest.approx(0.3) and label == (
        "preparing — encoding: 1,200 / 4,000 texts (30%), 85 texts/s, ETA 33s (budget not started)"
    )
    assert "1,200 / 4,000" in progress_html(fraction, label) and "30%" in progress_html(fraction, label)
    assert job_fraction(job, records[:2], now=1003.0) == (
        0.02,
        "preparing — encoding: 0 / 4,000 texts (0%), measuring the rate (budget not started)",
    )
    assert job_fraction(job, records[:1], now=1001.0) == (0.02, "preparing: loading data and models")
    assert "encoding 1,200 of 4,000 texts, 85 texts/s" in records[-1]["message"]  # the status line says it too
    # a rerun finds texts in the embedding cache: the bar says how many, as the status line does
    cached = encoding_record(2000, 4000, 40.0, 0.5, cached=1500) | {"t": 20.0}
    assert job_fraction(job, [*records, cached], now=1021.0)[1] == (
        "preparing — encoding: 2,000 / 4,000 texts (50%), 1,500 from the cache, 40 texts/s, ETA 50s "
        "(budget not started)"
    )
    assert "(1,500 cached)" in cached["message"]
    records += [encoding_record(4000, 4000, 90.0, 0.5) | {"t": 46.0}, training_record(46.0, 0.5) | {"t": 46.5}]
    fraction, label = job_fraction(job, records, now=1000.0 + 46.5 + 15.0)  # 15 s of the 30-second budget
    assert fraction == pytest.approx(0.5) and label == "0.2 of 0.5 min"
    assert "0.5-minute budget starts now" in records[-1]["message"]
    records.append({"event": "eval", "x": 1, "minutes": 0.25, "t": 62.0})
    assert job_fraction(job, records, now=1062.0)[0] == pytest.approx(0.5)


def test_tabs_build_inside_blocks():
    import gradio as gr

    from mlse.ui import results_tab

    state = AppState()
    with gr.Blocks() as demo:
        ft.build_tab(state)
        results_tab.build_tab(state)
    names = {d.api_name for d in demo.fns.values()}
    assert {"finetune_start", "finetune_stop", "results_refresh"} <= names


def test_the_apps_backend_reaches_the_job(tiny_bert, monkeypatch):
    state = AppState(backend="onnx")
    requests = []

    def capture(req, child_process=False):
        requests.append(req)
        return lambda report, stop: None

    monkeypatch.setattr(ft, "training_job", capture)
    message = ft.start_run(state, **tiny_form(tiny_bert, "on-onnx", method="stage1", pairs=["eng-deu"]))
    assert message.startswith("Started") and requests[0].backend == "onnx"
    assert ft.runner(state).wait(30)
