"""Stop and the time budget reach every phase of a training job, encoding included (mlse.stop_signal,
mlse.train.jobs).

A deliberately slow fake encoder (tests/fake_encoder.py) stands in for a big backbone / teacher: encoding the
requested data would take ~20 s, so a job that only looked at Stop between epochs would encode all of it. Encoding
goes in chunks and Stop is asked between them, so a stop costs at most the chunk in flight: the tests count the encoder
calls after Stop (or after the budget ran out on a clock moved on by the test), not seconds, which on a busy machine
would measure the machine.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import mlse.stop_signal
import mlse.train.finetune_data
import mlse.train.head_training
from mlse.dirs import runs_dir
from mlse.encoders.cache import CachedEncoder
from mlse.heads.scorer import Scorer
from mlse.stop_signal import Stopped, StopSignal, encode_in_chunks
from mlse.train.config import TrainRequest
from mlse.train.jobs import training_job
from mlse.train.runner import JobRunner
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


def test_a_budget_shorter_than_the_encoding_ends_the_job(slow_encoder, monkeypatch):
    """The budget's clock jumps past the minute as soon as the first chunk is encoded: the job ends before the next."""
    real_now = mlse.stop_signal._now
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: real_now() + (61.0 if slow_encoder.calls else 0.0))
    runner = JobRunner()
    job = runner.submit("s1-budget", training_job(stage1_request("s1-budget", budget_minutes=1)))
    assert runner.wait(HANG_S)
    assert job.state == "stopped" and "1-minute budget ran out while encoding" in job.message, job.message
    assert slow_encoder.calls == 1 and slow_encoder.texts_encoded < 4000  # not one chunk after the budget ran out
    assert not (runs_dir() / "s1-budget").exists()


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
    assert meta["partial"] == {"phase": "training", "epochs": 1}


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
    rows = encode_in_chunks(FakeEncoder(), texts, should_stop=lambda: False, batch_size=16)
    assert np.array_equal(rows, np.stack([fake_vector(t) for t in texts]))
    encoder, calls = FakeEncoder(), []
    signal = StopSignal(threading.Event())

    def count(done, total):
        calls.append(done)
        if len(calls) == 2:
            signal.event.set()

    with pytest.raises(Stopped, match=r"stopped while encoding \(\d+ of 300"):
        encode_in_chunks(encoder, texts, should_stop=signal.should_stop, batch_size=16, progress=count)
    assert len(calls) == 2 and encoder.texts_encoded == calls[-1] < 300


def test_a_budget_signal_names_the_budget_and_the_phase(monkeypatch):
    signal = StopSignal(budget_s=60)
    signal.check("loading")  # within budget: nothing happens
    monkeypatch.setattr(mlse.stop_signal, "_now", lambda: signal.started + 61)
    with pytest.raises(Stopped, match="1-minute budget ran out while loading"):
        signal.check("loading")
