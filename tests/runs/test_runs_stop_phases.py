"""Stop and the time budget reach every phase of a training job, encoding included (mlse.stop_signal,
mlse.train.jobs).

A deliberately slow fake encoder (tests/fake_encoder.py) stands in for a big backbone / teacher: encoding the
requested data would take ~20 s, so a job that only looked at Stop between epochs would encode all of it. Encoding
goes in chunks and Stop is asked between them, so a stop costs at most the chunk in flight: the tests count the encoder
calls after Stop (or after the preparation limit ran out on a clock moved on by the test), not seconds, which on a busy
machine would measure the machine. The budget itself counts training only: a slow encoding does not spend it.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import mlse.stop_signal
import mlse.train.finetune_data
import mlse.train.head_training
from mlse.data.pairs import training_pair_choices as pair_choices
from mlse.dirs import runs_dir
from mlse.encoders.cache import CachedEncoder
from mlse.heads.scorer import Scorer
from mlse.public_mode import PUBLIC_PREPARATION_MINUTES
from mlse.stop_signal import Stopped, StopSignal, check, encode_in_chunks, should_stop
from mlse.train.jobs import preparation_limit_s, training_job
from mlse.train.request import TrainRequest
from mlse.train.runner import JobRunner
from mlse.ui import finetune_tab as ft
from tests.fake_encoder import FakeEncoder, SlowFakeEncoder, fake_vector
from tests.job_helpers import on_first_eval

HANG_S = 120  # only a guard against a hang: nothing here measures time


@pytest.fixture()
def slow_encoder(monkeypatch) -> SlowFakeEncoder:
    """Every model name loads the slow fake (through the real embedding cache): 4,000 texts take ~20 s."""
    slow = SlowFakeEncoder(seconds_per_text=0.005)

    def load(*args, **kwargs):
        return CachedEncoder(slow)

    monkeypatch.setattr(mlse.train.head_training, "load_model", load)  # Stage 1 / Stage 2 backbones
    monkeypatch.setattr(mlse.train.finetune_data, "load_model", load)  # fine-tuning teachers
    return slow


def wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def stage1_request(name: str, **overrides) -> TrainRequest:
    fields = dict(
        method="stage1",
        model="slow-backbone",
        name=name,
        pairs=["eng-deu"],
        max_pairs=2000,
        budget_minutes=5,
        probe=False,
        max_epochs=3,
    )
    return TrainRequest(**{**fields, **overrides})


def test_stop_during_encoding_ends_a_head_job_after_the_chunk_in_flight_and_keeps_the_encoded_chunks(slow_encoder):
    runner = JobRunner()
    job = runner.submit("s1-slow", training_job(stage1_request("s1-slow")))
    wait_until(lambda: slow_encoder.texts_encoded > 0)  # encoding has begun
    runner.stop()
    calls_at_stop = slow_encoder.calls  # a call in flight is counted when it returns: only it may still end
    assert runner.wait(HANG_S)
    assert slow_encoder.calls <= calls_at_stop + 1, "encoding went on after Stop"  # at most the chunk in flight
    assert job.state == "stopped" and "while encoding" in job.message and "nothing was saved" in job.message
    assert not (runs_dir() / "s1-slow").exists()  # nothing half-made is offered as a model
    assert slow_encoder.texts_encoded < 4000  # it really stopped part-way
    # every finished chunk is in the embedding cache: a rerun starts from there
    stored = CachedEncoder(FakeEncoder(identity=slow_encoder.identity)).store(True)
    assert len(stored) == slow_encoder.texts_encoded


def test_the_preparation_limit_ends_a_job_whose_encoding_takes_too_long(slow_encoder, monkeypatch):
    """The clock jumps past the preparation's own limit (ten 1-minute budgets) as soon as the first chunk is encoded:
    the job ends before the next chunk, with nothing saved."""
    real_now = mlse.stop_signal._now
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: real_now() + (601.0 if slow_encoder.calls else 0.0))
    runner = JobRunner()
    job = runner.submit("s1-budget", training_job(stage1_request("s1-budget", budget_minutes=1)))
    assert runner.wait(HANG_S)
    assert job.state == "stopped" and "10-minute limit on preparing" in job.message, job.message
    assert "ran out while encoding" in job.message and "a rerun continues" in job.message
    assert slow_encoder.calls == 1 and slow_encoder.texts_encoded < 4000  # not one chunk after the limit ran out
    assert not (runs_dir() / "s1-budget").exists()


def test_the_smallest_stage1_job_offered_saves_a_run_on_a_fresh_cache(tiny_bert, monkeypatch):
    """The smallest job the page offers (100 pairs, 0.5 minutes) on a fresh embedding cache: every chunk of the
    one-off encoding "takes" 31 s (a clock moved on by the test), longer than the whole budget. The budget's clock
    starts when training does, so the job trains and saves a run; its records count the encoding, n of N texts."""
    offset, chunks = [0.0], [0]
    real_now = mlse.stop_signal._now
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: real_now() + offset[0])
    real_load = mlse.train.head_training.load_model

    def load(*args, **kwargs):  # the tiny backbone, each of whose encoding calls moves the clock on 31 s
        encoder = real_load(*args, **kwargs)
        encode = encoder.encode

        def slow_encode(*a, **k):
            chunks[0] += 1
            offset[0] += 31.0
            return encode(*a, **k)

        encoder.encode = slow_encode
        return encoder

    monkeypatch.setattr(mlse.train.head_training, "load_model", load)
    req = TrainRequest(
        method="stage1",
        model=str(tiny_bert),
        name="s1-smallest",
        pairs=pair_choices("stage1")[1],  # the page's default selection
        max_pairs=ft.MIN_PAIRS,
        budget_minutes=ft.MIN_BUDGET_MINUTES,
        probe=False,
        max_epochs=2,
    )
    runner = JobRunner()
    job = runner.submit("s1-smallest", training_job(req), meta={"request": req})
    assert runner.wait(300)
    assert job.state == "finished", job.message
    assert chunks[0] >= 2 and offset[0] > 60 * req.budget_minutes  # the encoding outlasted the budget
    meta = Scorer.load(runs_dir() / "s1-smallest").metadata
    assert meta["metrics"]["stage1_epochs"] == 2 and "partial" not in meta
    records = runner.records(job)
    encoding = [r for r in records if r.get("event") == "encoding"]
    total = encoding[-1]["total"]
    assert encoding[0]["done"] == 0 and encoding[-1]["done"] == total > 0 and encoding[-1]["rate"] > 0
    assert any(0 < r["done"] < total for r in encoding)  # counted chunk by chunk
    assert f"encoding {total:,} of {total:,} texts" in encoding[-1]["message"]
    events = [r.get("event") for r in records]
    assert events.index("training") > max(i for i, e in enumerate(events) if e == "encoding")
    assert "0.5-minute budget starts now" in next(r["message"] for r in records if r.get("event") == "training")


def test_preparation_limit_is_ten_budgets_at_least_five_minutes_and_capped_in_public(monkeypatch):
    assert preparation_limit_s(0.5) == 300 and preparation_limit_s(1) == 600 and preparation_limit_s(60) == 36000
    monkeypatch.setenv("MLSE_PUBLIC", "1")
    assert preparation_limit_s(0.5) == 300 and preparation_limit_s(10) == PUBLIC_PREPARATION_MINUTES * 60


def test_a_signal_with_a_preparation_limit_starts_its_budget_with_training(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: clock[0])
    started = []
    signal = StopSignal(budget_s=30, preparation_s=300, on_budget_start=started.append)
    clock[0] += 299  # preparing longer than the budget is no reason to stop
    assert signal.preparing and signal.reason() is None and signal.elapsed() == 0
    signal.start_budget()
    assert started == [299] and not signal.preparing
    clock[0] += 29
    assert signal.reason() is None and signal.elapsed() == 29
    clock[0] += 1
    assert signal.reason() == "budget"
    late = StopSignal(budget_s=30, preparation_s=300)
    clock[0] += 300
    with pytest.raises(Stopped, match="5-minute limit on preparing .* ran out while encoding"):
        late.check("encoding")


def test_stop_during_teacher_targets_ends_a_fine_tune_after_the_chunk_in_flight(slow_encoder, tiny_bert):
    req = TrainRequest(
        method="soft",
        model=str(tiny_bert),
        teacher="slow-teacher",
        name="ft-slow",
        pairs=["en-de"],
        max_pairs=4000,
        budget_minutes=5,
        batch_size=16,
        dev_pairs=["en-de"],
        dev_max_pairs=32,
        device="cpu",
    )
    runner = JobRunner()
    job = runner.submit("ft-slow", training_job(req))
    wait_until(lambda: slow_encoder.texts_encoded > 1, timeout=HANG_S)  # past the one-text dimension probe
    runner.stop()
    calls_at_stop = slow_encoder.calls
    assert runner.wait(HANG_S)
    assert slow_encoder.calls <= calls_at_stop + 1, "encoding went on after Stop"
    assert slow_encoder.texts_encoded < 4000  # not all of the teacher's texts: it stopped part-way
    assert job.state == "stopped" and "encoding" in job.message, job.message
    assert not (runs_dir() / "ft-slow").exists()


def test_a_head_stopped_in_training_is_saved_marked_partial(tiny_bert, monkeypatch):
    """Stop pressed after the first epoch: that epoch is the run, and its metadata says how far it got."""
    req = TrainRequest(
        method="stage1",
        model=str(tiny_bert),
        name="s1-partial",
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=50,
        budget_minutes=5,
        probe=False,
    )
    job_fn = training_job(req)

    stop_after_first_epoch = on_first_eval(job_fn, lambda stop: stop.set())

    runner = JobRunner()
    job = runner.submit("s1-partial", stop_after_first_epoch)
    assert runner.wait(300)
    assert job.state == "stopped", job.message
    meta = Scorer.load(runs_dir() / "s1-partial").metadata
    assert meta["partial"] == {"phase": "training", "reason": "stopped", "epochs": 1}


def test_the_budget_counts_from_the_start_of_the_job(tiny_bert, monkeypatch):
    """Time spent before training (moved on by a fake clock at the first epoch) leaves no budget for a second epoch."""
    offset = [0.0]
    real_now = mlse.stop_signal._now
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: real_now() + offset[0])
    req = TrainRequest(
        method="stage1",
        model=str(tiny_bert),
        name="s1-clock",
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=50,
        budget_minutes=1,
        probe=False,
    )
    job_fn = training_job(req)

    a_minute_passes_in_the_first_epoch = on_first_eval(job_fn, lambda stop: offset.__setitem__(0, 61.0))

    runner = JobRunner()
    job = runner.submit("s1-clock", a_minute_passes_in_the_first_epoch)
    assert runner.wait(300)
    assert job.state == "finished" and any("budget ran out" in r.get("message", "") for r in runner.records(job))
    meta = Scorer.load(runs_dir() / "s1-clock").metadata
    assert meta["metrics"]["stage1_epochs"] == 1 and meta["partial"]["epochs"] == 1


def test_encode_in_chunks_returns_every_row_in_order_and_stops_between_chunks():
    texts = [f"text {i}" for i in range(300)]
    rows = encode_in_chunks(FakeEncoder(), texts, stop=StopSignal(), batch_size=16)
    assert np.array_equal(rows, np.stack([fake_vector(t) for t in texts]))
    encoder, calls = FakeEncoder(), []
    signal = StopSignal(threading.Event())

    def count(done, total):
        calls.append(done)
        if len(calls) == 2:
            signal.event.set()

    with pytest.raises(Stopped, match=r"stopped while encoding \(\d+ of 300"):
        encode_in_chunks(encoder, texts, stop=signal, batch_size=16, progress=count)
    assert len(calls) == 2 and encoder.texts_encoded == calls[-1] < 300


def test_a_condition_of_the_callers_own_stops_like_the_button():
    """``StopSignal(also=...)``: a caller's own condition (the warm start yielding to a visitor) is asked at every
    check and stops as the button does; ``check`` and ``should_stop`` of no signal stop nothing."""
    asked = []
    signal = StopSignal(also=lambda: asked.append(1) or len(asked) >= 2)
    signal.check("loading")  # the first ask: go on
    with pytest.raises(Stopped, match="^stopped while encoding$"):
        signal.check("encoding")
    assert len(asked) == 2 and not signal.is_set()  # the button itself was never pressed
    check(None, "anything")
    assert not should_stop(None)


def test_a_budget_signal_names_the_budget_and_the_phase(monkeypatch):
    signal = StopSignal(budget_s=60)
    signal.check("loading")  # within budget: nothing happens
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: signal.started + 61)
    with pytest.raises(Stopped, match="1-minute budget ran out while loading"):
        signal.check("loading")
