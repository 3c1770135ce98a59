"""``kill -9`` at a controlled point of a fine-tune, a head job and a cache write; then the app starts, lists only
usable runs (marking partial ones), the cache serves no corrupt vector, and rerunning the job works (faults).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mlse.dirs import runs_dir
from mlse.encoders.cache import CachedEncoder, text_key
from mlse.encoders.load import load_encoder
from mlse.heads.scorer import Scorer
from mlse.serving.app_state import AppState
from mlse.stop_signal import StopSignal
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune
from mlse.train.jobs import training_job
from mlse.train.request import TrainRequest
from tests.fake_encoder import FakeEncoder, fake_vector
from tests.kill_child import COMMITTED, TEXTS
from tests.paths import REPO_ROOT as ROOT


def run_and_kill(point: str, *args: str) -> None:
    """Start ``tests.kill_child`` at ``point``, wait until it says it is there, SIGKILL it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.kill_child", point, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        reached = threading.Event()

        def watch():
            for line in child.stdout:
                if line.strip() == point:
                    reached.set()
                    return

        threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + 300
        while not reached.is_set():
            assert child.poll() is None, f"child ended before {point}: {child.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, f"child never reached {point}"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def listed(state: AppState) -> dict[str, str]:
    """name -> label of every run the app offers."""
    return {m.name: m.label for m in state.refresh() if m.name.startswith("runs/")}


@pytest.mark.slow  # ~20 s: a child process loading torch and training; run with -m slow
def test_fine_tune_killed_after_a_checkpoint(tiny_bert, data_dir):
    out = runs_dir() / "ft-killed"
    run_and_kill("CHECKPOINT", str(tiny_bert), str(data_dir), str(out))
    runs = listed(AppState())
    assert "(interrupted" in runs["runs/ft-killed"]  # usable, and marked
    assert load_encoder("runs/ft-killed", cache=False).encode(["still loads"]).shape == (1, 32)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no half-written checkpoint left in view
    metrics = finetune(
        FinetuneConfig(
            method="hard",
            teacher=None,
            student=str(tiny_bert),
            pairs=["en-de"],
            max_pairs=48,
            batch_size=8,
            lr=1e-3,
            eval_every_steps=2,
            max_steps=2,
            dev_pairs=["en-de"],
            dev_max_pairs=32,
            device="cpu",
            data_dir=str(data_dir),
            out=str(out),
        )
    )
    assert metrics["steps"] == 2 and "(partial" not in listed(AppState())["runs/ft-killed"]


@pytest.mark.parametrize("point", [pytest.param("TRAINING", marks=pytest.mark.slow), "SAVING"])
def test_head_job_killed_puts_back_the_run_it_was_replacing(tiny_bert, data_dir, point):
    name = f"s1-{point.lower()}"
    req = TrainRequest(
        method="stage1",
        model=str(tiny_bert),
        name=name,
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=2,
        budget_minutes=5,
        probe=False,
        data_dir=str(data_dir),
    )
    training_job(req)(lambda record: None, StopSignal())  # the run the killed job replaces
    before = Scorer.load(runs_dir() / name).metadata["metrics"]
    run_and_kill(point, str(tiny_bert), str(data_dir), name)
    assert not (runs_dir() / name).exists()  # the old run was moved aside when the child was killed
    state = AppState().start()  # the app starting again
    assert f"runs/{name}" in listed(state) and Scorer.load(runs_dir() / name).metadata["metrics"] == before
    assert not [p for p in runs_dir().iterdir() if p.name.startswith(f".{name}.replaced")]
    from mlse.ui.app import build_app

    demo = build_app(state)  # every tab builds over the recovered runs folder, and its model pickers offer the run
    offered = {value for block in demo.blocks.values() for _, value in getattr(block, "choices", None) or []}
    assert f"runs/{name}" in offered, sorted(offered)
    training_job(TrainRequest(**{**vars(req), "overwrite": True, "max_epochs": 1}))(lambda r: None, StopSignal())
    assert Scorer.load(runs_dir() / name).metadata["metrics"]["stage1_epochs"] == 1  # the rerun replaced it


def test_cache_write_killed_mid_transaction_serves_no_corrupt_vector():
    run_and_kill("WRITING")
    encoder = CachedEncoder(FakeEncoder())
    store = encoder.store(True)
    found = store.get_many([text_key(t) for t in TEXTS])
    assert len(found) == COMMITTED  # the killed transaction left nothing; the committed one everything
    for text in TEXTS[:COMMITTED]:
        assert np.array_equal(found[text_key(text)], fake_vector(text))
    rows = encoder.encode(TEXTS)  # the rerun encodes what was lost, and serves the rest
    assert encoder.stats == {"encoded": len(TEXTS) - COMMITTED, "served": COMMITTED}
    assert np.array_equal(rows, np.stack([fake_vector(t) for t in TEXTS]))
