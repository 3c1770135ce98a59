"""Runs after a crash: put back run folders a killed job left aside, and say which runs are partial.

Run folders are written atomically, so a ``kill -9`` never leaves a half-written run where model lists look. What can
still be left: **a run moved aside** by a replacement (``.NAME.replaced-<ms>``, ``.NAME.old-<pid>``) and never put
back (:func:`recover_runs`); **a run stopped early** (a fine-tune without ``metrics.json``, or ``"partial"`` in its
record: :func:`partial_reason`); **a run whose job died unanswered** (its :mod:`mlse.runs.job_lock` held by nobody):
:func:`sweep_interrupted` marks it interrupted, or removes it when it holds no model.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import time
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.runs.folders import (
    FINETUNE_CONFIG_FILE,
    LOG_FILE,
    is_model_folder,
    is_scorer_folder,
    read_json_dict,
    read_log_records,
)
from mlse.runs.job_lock import claim_stale, lock_files

log = logging.getLogger(__name__)

_ASIDE = re.compile(r"^\.(?P<name>.+)\.(?:replaced-\d+|old-\d+)$")
INTERRUPTED_FILE = "interrupted.json"
INTERRUPTED_FORMAT = "mlse-interrupted-1"
APP_ENDED = "the app ended while it trained"
# what a fine-tune writes before its first checkpoint: a folder holding only these (and hidden temporaries) is half-made
_HALF_MADE = {LOG_FILE, FINETUNE_CONFIG_FILE, "metrics.json", INTERRUPTED_FILE}


def recover_runs(root: Path) -> list[str]:
    """Rename folders left aside by a killed replacement back to their names; returns the names recovered.

    Looks one level down too (``runs/NAME/.model.old-<pid>``); a leftover whose name is taken again is deleted."""
    recovered: list[str] = []
    if not root.is_dir():
        return recovered
    folders = [root, *(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))]
    for folder in folders:
        for leftover in sorted(folder.iterdir()):
            match = _ASIDE.match(leftover.name)
            if not match or not leftover.is_dir():
                continue
            target = folder / match["name"]
            if target.exists():
                shutil.rmtree(leftover, ignore_errors=True)
                continue
            leftover.rename(target)
            recovered.append(str(target.relative_to(root)))
            log.warning("put back %s, left aside by an interrupted job", target)
    return recovered


def sweep_interrupted(root: Path, why: str = APP_ENDED) -> list[str]:
    """Settle the runs of jobs that died without answering (their lock left, held by nobody); returns their names.

    A run with a model is marked interrupted (unless it finished); one with no model is removed, and
    :func:`recover_runs`, called after this, puts back a run it was replacing. Live processes' locks are left alone."""
    settled = []
    for path in lock_files(root):
        with claim_stale(path) as info:
            if info is not None and info["run"]:
                _settle(Path(root) / info["run"], info, why)
                settled.append(info["run"])
    return settled


def _settle(run: Path, info: dict, why: str) -> None:
    if not run.is_dir():
        return  # ended before it made its folder: nothing to mark
    if not (is_scorer_folder(run) or is_model_folder(run / "model")):
        if all(p.name in _HALF_MADE or p.name.startswith(".") for p in run.iterdir()):
            shutil.rmtree(run, ignore_errors=True)
            log.warning("removed %s: its job died before its first checkpoint", run)
        return
    if _finished(run):
        return
    # (step, checkpoint saved) of every evaluation the fine-tune logged (a line cut short by the kill left out)
    steps = [(int(record["step"]), bool(record.get("saved"))) for record in read_log_records(run / LOG_FILE)]
    marker = {
        "format": INTERRUPTED_FORMAT,
        "run": run.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "why": why,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(info["started"]))
        if isinstance(info.get("started"), (int, float))
        else None,
        "last_step": steps[-1][0] if steps else None,
        "checkpoint_step": next((step for step, saved in reversed(steps) if saved), None),
    }
    atomic_write_text(run / INTERRUPTED_FILE, json.dumps(marker, indent=1) + "\n")
    log.warning("marked %s interrupted: %s", run, why)


def _finished(run: Path) -> bool:
    """A run that wrote its final record with nothing partial in it (a scorer's manifest, a fine-tune's metrics)."""
    record = run / ("scorer.json" if is_scorer_folder(run) else "metrics.json")
    return record.is_file() and not read_json_dict(record).get("partial")


def partial_reason(location: str | Path) -> str | None:
    """Why the run at ``location`` (a scorer folder or a fine-tune's ``model`` folder) is partial; None if complete.

    Interrupted runs say ``"interrupted ..."``; the marker counts only while the run's own record is missing or
    partial (a later finished run into the same folder supersedes it)."""
    run = Path(location)
    record = run / "scorer.json"
    if not record.is_file():  # not a scorer: a fine-tune records itself in metrics.json
        run = run.parent if (run.parent / FINETUNE_CONFIG_FILE).is_file() else run
        if not (run / FINETUNE_CONFIG_FILE).is_file():
            return None  # not a run mlse wrote: nothing to judge
        record = run / "metrics.json"
        if not record.is_file():
            return interrupted_reason(run) or "interrupted; its last checkpoint is kept"
    partial = read_json_dict(record).get("partial")
    return (interrupted_reason(run) or _describe(partial)) if partial else None


def interrupted_reason(run: Path) -> str | None:
    """``"interrupted; its checkpoint of step N is kept"`` for a run :func:`sweep_interrupted` marked, else None."""
    marker = read_json_dict(Path(run) / INTERRUPTED_FILE)
    if marker.get("format") != INTERRUPTED_FORMAT:
        return None
    step = marker.get("checkpoint_step")
    return f"interrupted; its checkpoint of step {step} is kept" if isinstance(step, int) else "interrupted"


def _describe(partial) -> str:
    if not isinstance(partial, dict):
        return "partial"
    if "steps" in partial:
        return f"{partial.get('reason', 'stopped')} after {partial['steps']} steps"
    if "epochs" in partial:
        if partial.get("reason") == "budget":
            return f"the time budget ended {partial.get('phase', 'training')} after {partial['epochs']} epoch(s)"
        return f"stopped in {partial.get('phase', 'training')} after {partial['epochs']} epoch(s)"
    return "partial"
