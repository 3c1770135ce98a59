"""Jobs in a spawned child process (mlse.train.child_jobs): memory goes back, records and Stop cross the boundary,
and a child never outlives its parent (``kill -9`` of the app)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from mlse.errors import MlseError
from mlse.runs.health import sweep_interrupted
from mlse.runs.job_lock import live_orphans, lock_files, lock_request
from mlse.serving.procmem import memory_mb
from mlse.stop_signal import StopSignal
from mlse.train import child_jobs
from mlse.train.child_jobs import EXIT_GRACE_S, ORPHAN_EXIT_CODE, run_in_child
from tests.orphan_parent import RUN
from tests.paths import REPO_ROOT as ROOT

HANG_S = 60.0  # a hang guard, not a speed target: how the child ended is read from the files it leaves


def test_the_parent_does_not_keep_the_childs_memory():
    records: list[dict] = []
    before = memory_mb()["rss_mb"]
    child_rss = run_in_child("tests.child_targets:allocate", 400, report=records.append, stop=StopSignal())
    after = memory_mb()["rss_mb"]
    assert child_rss > 400  # the child really held it
    assert after - before < 50, f"parent grew by {after - before:.0f} MiB"
    assert records and records[0]["message"] == "holding 400 MiB"  # progress crossed the boundary


def test_stop_reaches_the_child_and_it_returns():
    stop, records = StopSignal(), []

    def report(record):
        records.append(record)
        stop.set()  # pressed as soon as the job says it is running

    # the child waits for nothing but Stop: its answer is the proof that Stop crossed the boundary
    answer = run_in_child("tests.child_targets:wait_for_stop", report=report, stop=stop)
    assert answer == "saw stop (StopSignal: stopped)"  # the child's own signal, its Stop button the parent's
    assert [r["message"] for r in records] == ["waiting"]


def test_a_user_error_and_a_dead_child_are_clear_messages():
    with pytest.raises(MlseError, match="run name 'x' is taken"):
        run_in_child("tests.child_targets:refuse", report=lambda r: None, stop=StopSignal())
    with pytest.raises(MlseError, match="ended without an answer \\(exit code 9\\)"):
        run_in_child("tests.child_targets:die", report=lambda r: None, stop=StopSignal())


@pytest.mark.slow  # ~20 s (torch imported in the child); the fine-tune tab's test covers this path in the fast run
def test_a_training_job_in_a_child_saves_its_run_and_reports_epochs(tiny_bert, data_dir):
    from mlse.dirs import runs_dir
    from mlse.heads.scorer import Scorer
    from mlse.train.jobs import training_job
    from mlse.train.request import TrainRequest
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


def start_parent_and_kill_it(root: Path, mode: str) -> tuple[int, bool]:
    """Start ``tests.orphan_parent`` (an app running one job in a child), wait for its child, SIGKILL the parent;
    returns the child's pid and whether it is gone (a zombie counts as gone: it runs nothing) before the hang guard."""
    parent = subprocess.Popen(
        [sys.executable, "-m", "tests.orphan_parent", str(root), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    child_pid = None
    try:
        line = parent.stdout.readline()  # the child's first record, relayed by the parent
        assert line.startswith("CHILD "), f"the parent said {line!r}"
        child_pid = int(line.split()[1])
        assert psutil.Process(child_pid).ppid() == parent.pid
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(HANG_S)
        for _ in range(int(HANG_S / 0.05)):  # an orphan is not ours to wait for: poll until it is gone
            if not _alive(child_pid):
                return child_pid, True
            time.sleep(0.05)
        return child_pid, False
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child_pid is not None and _alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("mode", ["obedient", "stubborn"])
def test_a_child_ends_when_its_parent_is_killed(tmp_path, mode):
    """kill -9 of the app: its training child is told to stop and ends -- on its own after saving when it obeys the
    stop, by the hard exit when it does not -- and the job lock it leaves is swept (the next start of the app, or a new
    job, may then run). How it ended is read from what it wrote, in order, not from a clock."""
    child, gone = start_parent_and_kill_it(tmp_path, mode)
    assert gone, f"the {mode} child {child} still ran {HANG_S:.0f} s after its parent was killed"
    if mode == "obedient":  # it saw the stop, saved, and its interpreter ended on its own (before the hard exit)
        assert (tmp_path / "saved-on-stop").read_text() == str(child)
        assert (tmp_path / "exited-normally").read_text() == str(child)
    else:  # the stop reached it, it worked on, and only the hard exit (which skips atexit) ended it
        assert (tmp_path / "stop-seen").read_text() == str(child)
        assert not (tmp_path / "saved-on-stop").exists() and not (tmp_path / "exited-normally").exists()
    assert [p.name for p in lock_files(tmp_path)] == [f"{RUN}.lock"]  # left behind: the job died unanswered
    # a process the poll calls gone (its main thread a zombie) may hold its files until its last thread has exited;
    # the app sweeps at its next start, long after: wait (polled, a hang guard) until no live process holds the lock
    for _ in range(int(HANG_S / 0.05)):
        if not live_orphans(tmp_path):
            break
        time.sleep(0.05)
    assert sweep_interrupted(tmp_path) == [RUN] and lock_files(tmp_path) == []


def test_winding_down_stops_the_job_and_arms_one_hard_exit_after_the_grace(monkeypatch):
    """The grace an orphan gets, with the timer faked: the stop is given at once, one hard exit is armed for
    EXIT_GRACE_S later, and a second cause (SIGTERM after the watchdog) arms nothing more."""
    armed = []

    class FakeTimer:
        def __init__(self, interval, function, args=()):
            armed.append((interval, function, tuple(args)))
            self.daemon = False

        def start(self):
            armed.append("started")

    monkeypatch.setattr(child_jobs, "_winding_down", threading.Event())
    monkeypatch.setattr(child_jobs.threading, "Timer", FakeTimer)
    stop = StopSignal()
    child_jobs._wind_down(stop, "its app ended")
    child_jobs._wind_down(stop, "SIGTERM")
    assert stop.is_set()
    assert armed == [(EXIT_GRACE_S, os._exit, (ORPHAN_EXIT_CODE,)), "started"]


def test_a_child_that_answered_leaves_no_lock_and_a_dead_one_does(tmp_path):
    lock = lock_request(tmp_path, "done-run")
    assert run_in_child("tests.child_targets:allocate", 1, report=lambda r: None, stop=StopSignal(), lock=lock)
    assert lock_files(tmp_path) == []
    with pytest.raises(MlseError, match="without an answer"):
        run_in_child("tests.child_targets:die", report=lambda r: None, stop=StopSignal(), lock=lock)
    assert [p.name for p in lock_files(tmp_path)] == ["done-run.lock"]  # what the sweep then finds


def test_a_child_told_to_end_keeps_its_lock_while_its_parent_still_looks_alive(tmp_path):
    """A ``kill -9`` of the app ends its threads one by one: the kernel's SIGTERM (sent when the thread that started
    the child ends) can reach the child, and the child wind down, while the dying app still looks alive. The child
    then removed its lock as if it had answered, and the restarted app found no run to mark interrupted (a CI run of
    tests/security/test_orphan_training.py). Here the parent stays alive and the child gets that SIGTERM."""

    def report(record: dict) -> None:
        if "pid" in record:
            os.kill(record["pid"], signal.SIGTERM)

    lock = lock_request(tmp_path, RUN)
    answer = run_in_child(
        "tests.orphan_parent:busy", str(tmp_path), "obedient", report=report, stop=StopSignal(), lock=lock
    )
    assert answer == "stopped" and (tmp_path / "saved-on-stop").is_file()  # it saved and ended on its own
    assert [p.name for p in lock_files(tmp_path)] == [f"{RUN}.lock"]  # not answered: the sweep's to settle
    assert sweep_interrupted(tmp_path) == [RUN] and lock_files(tmp_path) == []
