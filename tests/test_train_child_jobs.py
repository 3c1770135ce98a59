"""Jobs in a spawned child process (mlse.train.child_jobs): memory goes back, records and Stop cross the boundary."""

from __future__ import annotations

import threading

import pytest

from mlse.errors import MlseError
from mlse.serving.procmem import memory_mb
from mlse.train.child_jobs import run_in_child


def test_the_parent_does_not_keep_the_childs_memory():
    records: list[dict] = []
    before = memory_mb()["rss_mb"]
    child_rss = run_in_child("tests.child_targets:allocate", 400, report=records.append, stop=threading.Event())
    after = memory_mb()["rss_mb"]
    assert child_rss > 400  # the child really held it
    assert after - before < 50, f"parent grew by {after - before:.0f} MiB"
    assert records and records[0]["message"] == "holding 400 MiB"  # progress crossed the boundary


def test_stop_reaches_the_child_and_it_returns():
    stop, records = threading.Event(), []

    def report(record):
        records.append(record)
        stop.set()  # pressed as soon as the job says it is running

    # the child waits for nothing but Stop: its answer is the proof that Stop crossed the boundary
    assert run_in_child("tests.child_targets:wait_for_stop", report=report, stop=stop) == "saw stop"
    assert [r["message"] for r in records] == ["waiting"]


def test_a_user_error_and_a_dead_child_are_clear_messages():
    with pytest.raises(MlseError, match="run name 'x' is taken"):
        run_in_child("tests.child_targets:refuse", report=lambda r: None, stop=threading.Event())
    with pytest.raises(MlseError, match="ended without an answer \\(exit code 9\\)"):
        run_in_child("tests.child_targets:die", report=lambda r: None, stop=threading.Event())


@pytest.mark.slow  # ~20 s (torch imported in the child); the fine-tune tab's test covers this path in the fast run
def test_a_training_job_in_a_child_saves_its_run_and_reports_epochs(tiny_bert, data_dir):
    from mlse.dirs import runs_dir
    from mlse.heads.scorer import Scorer
    from mlse.train.config import TrainRequest
    from mlse.train.jobs import training_job
    from mlse.train.runner import JobRunner

    req = TrainRequest(
        method="stage1",
        model=str(tiny_bert),
        name="s1-child",
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=2,
        budget_minutes=5,
        probe=False,
        data_dir=str(data_dir),
    )
    runner = JobRunner()
    job = runner.submit("s1-child", training_job(req, child_process=True))
    assert runner.wait(300)
    assert job.state == "finished", job.message
    assert [r["x"] for r in runner.records(job) if r.get("event") == "eval"] == [1, 2]
    assert Scorer.load(runs_dir() / "s1-child").metadata["metrics"]["stage1_epochs"] == 2
