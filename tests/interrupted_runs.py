"""Run folders and job locks as a killed app leaves them (tests/runs/test_runs_job_lock.py,
tests/serving/test_app_state.py, tests/ui/test_ui_results.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mlse.runs.job_lock import LOCK_DIR

ROOT = Path(__file__).resolve().parents[1]


def stale_lock(root: Path, run: str) -> Path:
    """A lock file nobody holds: what a child that died unanswered leaves."""
    path = root / LOCK_DIR / f"{run}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"run": run, "app": "an-earlier-start-of-the-app", "started": time.time() - 60, "pid": 999999}
    path.write_text(json.dumps(info))
    return path


def fine_tune_run(root: Path, name: str, tiny_bert: Path | None, log: list[dict]) -> Path:
    """A fine-tune's folder as a kill leaves it: config and log, a checkpoint when ``tiny_bert`` is given."""
    run = root / name
    run.mkdir(parents=True)
    (run / "finetune_config.json").write_text("{}")
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log) + '{"step": 9, "lo')  # cut short
    if tiny_bert is not None:
        shutil.copytree(tiny_bert, run / "model")
    return run


HOLDER = """
import sys, time
from mlse.runs.job_lock import LockRequest, hold
held = hold(LockRequest(sys.argv[1], sys.argv[2], "an-earlier-start-of-the-app", time.time()))
print("HELD", flush=True)
time.sleep(120)
"""


def hold_in_another_process(root: Path, run: str) -> subprocess.Popen:
    """A live process holding run ``run``'s lock, as a child left by a killed app does."""
    path = root / LOCK_DIR / f"{run}.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), run], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "HELD"
    return holder
