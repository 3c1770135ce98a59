"""``kill -9`` of the public app leaves no training behind (docs/deploy.md, threat model).

The probe that found it: a fine-tune started through the API, the app killed with SIGKILL, the app started again. The
training child used to live on unseen -- the restarted app said no run was in progress, accepted a second fine-tune
beside it (two at once on one machine), and its half-written run was later offered as a model. Now the child ends
with its app (mlse.train.child_jobs), and the restarted app lists the run as interrupted, keeping its
checkpoint (mlse.runs.health.sweep_interrupted), refuses a new fine-tune while a job left by an earlier start still
holds its lock (mlse.runs.job_lock), and takes one once none does.

About a minute on a 2-core CPU: two app starts, the child's loading and first dev evaluation, its end.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import psutil
from gradio_client import Client

from tests.interrupted_runs import hold_in_another_process
from tests.security.public_app import start_public_app, stop_app

HANG_S = 60.0  # a hang guard, not a speed target: the child must end; how fast is a benchmark's question
RUN = "orphan-probe"


def interrupted_label(label: str) -> bool:
    """A picker label of the probe's run that says it was interrupted (other notes may stand before it)."""
    return label.startswith(f"runs/{RUN} · fine-tuned student") and "(interrupted" in label


def fine_tune(url: str, name: str) -> str:
    """Start a small fine-tune through the API (public limits; it trains for minutes unless stopped): the answer."""
    form = dict(
        method="hard",
        model="minilm-en",
        teacher=None,
        language_pairs=["en-de"],
        max_pairs=200,
        budget_minutes=3,
        run_name=name,
        overwrite=False,
        batch_size=8,
        learning_rate=None,
        eval_every_steps=5,
        max_steps=None,
        max_epochs=None,
        dev_max_pairs=50,
        extend_vocab=0,
        precision="auto",
        language_probe=False,
        sts_loss="none",
        sts_weight=0.001,
    )
    return Client(url, verbose=False).predict(*form.values(), api_name="/finetune_start")


def training_child(app_pid: int, timeout: float = 180) -> int:
    """The pid of the app's training child (a spawned ``multiprocessing`` child, not its resource tracker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(app_pid).children():
            try:
                command = " ".join(child.cmdline())
            except psutil.NoSuchProcess:
                continue
            if "spawn_main" in command and "resource_tracker" not in command:
                return child.pid
        time.sleep(0.2)
    raise AssertionError("no training child appeared")


def first_checkpoint(run: Path, child: int, timeout: float = 180) -> None:
    """Wait until the run's step-0 checkpoint is on disk and logged (training then goes on for minutes)."""
    deadline = time.monotonic() + timeout
    while not (run / "log.jsonl").is_file() or not (run / "log.jsonl").read_text().strip():
        assert alive(child), "the training child ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within the timeout"
        time.sleep(0.2)
    assert (run / "model").is_dir()
    time.sleep(1.0)  # into the first training steps: a stop now keeps the checkpoint (a stop at step 0 keeps nothing)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped runs nothing)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone(pid: int) -> bool:
    """Whether ``pid`` ends before the hang guard (polled: an orphan is not ours to wait for)."""
    for _ in range(int(HANG_S / 0.05)):
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def labels(url: str) -> list[str]:
    """Every model label the page's pickers offer (from the page's configuration)."""
    config = httpx.get(f"{url}/config", timeout=30).json()
    found = []
    for component in config["components"]:
        for choice in component.get("props", {}).get("choices") or []:
            found.append(str(choice[0]) if isinstance(choice, (list, tuple)) else str(choice))
    return found


def test_a_killed_app_leaves_no_training_behind(tmp_path):
    runs = tmp_path / "runs"
    app = start_public_app(tmp_path, runs=runs)
    try:
        answer = fine_tune(app.url, RUN)
        assert answer.startswith("Started"), answer
        child = training_child(app.process.pid)
        first_checkpoint(runs / RUN, child)
        assert alive(child)

        os.kill(app.process.pid, signal.SIGKILL)
        app.process.wait(10)
        assert gone(child), f"the training child still ran {HANG_S:.0f} s after its app was killed"
    finally:
        stop_app(app)

    again = start_public_app(tmp_path, runs=runs)  # the same runs folder, as a restarted Space has
    try:
        marker = json.loads((runs / RUN / "interrupted.json").read_text())
        assert marker["checkpoint_step"] == 0 and (runs / RUN / "model").is_dir()  # marked, checkpoint kept
        assert any(interrupted_label(label) for label in labels(again.url)), labels(again.url)
        assert not list((runs / ".jobs").glob("*.lock"))  # the dead job's lock is swept
        holder = hold_in_another_process(runs, "left-running")  # a job an earlier start left, still alive
        try:
            refused = fine_tune(again.url, "while-one-runs")
        finally:
            holder.kill()
            holder.wait()
        assert "left by an earlier start of the app (left-running) is still running" in refused, refused
        assert str(tmp_path) not in refused and not (runs / "while-one-runs").exists()
        second = fine_tune(again.url, "after-restart")
        assert second.startswith("Started"), second  # a new run is accepted: nothing trains any more
        child = training_child(again.process.pid)
    finally:
        stop_app(again)
    assert gone(child), "the training child outlived its stopped app"  # an app that is stopped takes its child too
