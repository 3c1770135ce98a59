"""Runs after a crash: put back run folders a killed job left aside, and say which runs are partial.

Every writer of a run folder is atomic (a hidden temporary sibling renamed into place), so a ``kill -9`` never leaves
a half-written run where the model lists look. Two things can still be left behind, and this module handles both:

* **A run moved aside and not put back.** Replacing a run renames the old folder to a hidden sibling first
  (``.NAME.replaced-<ms>`` in :mod:`mlse.train.jobs`, ``.NAME.old-<pid>`` in :func:`mlse.atomic.replace_dir`); a job
  killed before it saved its own run never renames it back, and the old run vanishes from every list.
  :func:`recover_runs` (called when the app starts) renames such a folder back when nothing has taken its name since.
* **A run that stopped early.** A fine-tune killed after its first checkpoint has a usable ``model/`` but no
  ``metrics.json``; a stopped job writes ``"partial"`` into its metrics (fine-tuning) or manifest (heads).
  :func:`partial_reason` says so in one phrase, for the model lists to show.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

_ASIDE = re.compile(r"^\.(?P<name>.+)\.(?:replaced-\d+|old-\d+)$")


def recover_runs(root: Path) -> list[str]:
    """Rename folders left aside by a killed replacement back to their names; returns the names recovered.

    Looks one level down too (``runs/NAME/.model.old-<pid>``, a fine-tune's checkpoint mid-replacement). When the name
    is taken again (the replacement finished), the leftover copy is deleted instead.
    """
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


def partial_reason(location: str | Path) -> str | None:
    """Why the run at ``location`` (a scorer folder or a fine-tune's ``model`` folder) is partial; None if complete."""
    path = Path(location)
    manifest = path / "scorer.json"
    if manifest.is_file():
        partial = _read_json(manifest).get("partial")
        return _describe(partial) if partial else None
    run = path.parent if (path.parent / "finetune_config.json").is_file() else path
    if not (run / "finetune_config.json").is_file():
        return None  # not a run mlse wrote: nothing to judge
    metrics_file = run / "metrics.json"
    if not metrics_file.is_file():
        return "interrupted; its last checkpoint is kept"
    partial = _read_json(metrics_file).get("partial")
    return _describe(partial) if partial else None


def _describe(partial) -> str:
    if not isinstance(partial, dict):
        return "partial"
    if "steps" in partial:
        return f"{partial.get('reason', 'stopped')} after {partial['steps']} steps"
    if "epochs" in partial:
        return f"stopped in {partial.get('phase', 'training')} after {partial['epochs']} epoch(s)"
    return "partial"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
