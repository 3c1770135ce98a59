"""Run folders: what a folder under the runs directory is, how runs are found, and how a new run is named.

A *run* is a folder under :func:`mlse.dirs.runs_dir`: a **scorer** (``scorer.json`` beside the head files), a
**fine-tuned student** (``model/`` beside ``finetune_config.json``, ``metrics.json``, ``log.jsonl``), or any other
sentence-transformers / transformers folder. Runs may sit one level down in a group folder, named by their path;
hidden folders are skipped. The CLI and the app name new runs with :func:`training_run_name`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from mlse.errors import ModelNotFoundError

SCORER_FILE = "scorer.json"
# not ``config.json``: a ``config.json`` at the top of a folder would make it look like a plain transformers model
FINETUNE_CONFIG_FILE = "finetune_config.json"
LOG_FILE = "log.jsonl"  # a fine-tune's evaluations, one JSON record a line


def safe_name(model: str) -> str:
    """A folder-friendly name for a model given as a registry name, hub id or path."""
    name = Path(model.rstrip("/")).name if ("/" in model and Path(model).exists()) else model
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)


def run_name(model: str, *tags: str) -> str:
    """The default name of a run trained from ``model``: ``runs/x`` + ``("s2", "conv")`` -> ``x+s2+conv``."""
    return "+".join([safe_name(model).removeprefix("runs_"), *tags])


def training_run_name(
    model: str, method: str, *, prelayer: bool = False, conv: bool = False, nonlinearity: str = "identity"
) -> str:
    """The default name of a run that trains ``model`` by ``method``: ``stage1`` -> ``x+s1`` (``x+s1-prelayer``),
    ``stage2`` -> ``x+s2`` (then ``+conv`` and ``+sigmoid`` / ``+tanh``), a fine-tuning method -> ``x+mse`` ..."""
    if method == "stage1":
        return run_name(model, "s1-prelayer" if prelayer else "s1")
    if method == "stage2":
        tags = ["s2", *(["conv"] if conv else []), *([] if nonlinearity == "identity" else [nonlinearity])]
        return run_name(model, *tags)
    return run_name(model, method)


def is_model_folder(path: Path) -> bool:
    """A sentence-transformers folder (modules.json) or a plain transformers folder (config.json)."""
    return path.is_dir() and ((path / "modules.json").is_file() or (path / "config.json").is_file())


def is_scorer_folder(path: Path) -> bool:
    return (path / SCORER_FILE).is_file()


def is_finetuned_model(path: Path) -> bool:
    """A model folder written by fine-tuning (``out/model`` beside ``out/finetune_config.json``), or its run folder."""
    return (path.parent / FINETUNE_CONFIG_FILE).is_file() or (path / FINETUNE_CONFIG_FILE).is_file()


def read_scorer_json(folder: Path) -> dict:
    """A scorer run's ``scorer.json`` (backbone, its identity, the heads); ModelNotFoundError when unreadable."""
    try:
        manifest = json.loads((folder / SCORER_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"{folder}: not a readable scorer run ({exc})") from None
    for key in ("backbone", "backbone_identity", "heads"):
        if key not in manifest:
            raise ModelNotFoundError(f"{folder / SCORER_FILE}: missing {key!r}")
    return manifest


class RunFolder(NamedTuple):
    name: str  # "runs/x" or "runs/group/x"
    kind: str  # "scorer" or "run"
    location: Path  # the scorer folder, or the model folder of a run (``x/model`` when present)


def run_folder(folder: Path, name: str) -> RunFolder | None:
    """What ``folder`` holds as a run, or None when it is not one."""
    if is_scorer_folder(folder):
        return RunFolder(name, "scorer", folder)
    model = folder / "model" if is_model_folder(folder / "model") else folder
    if is_model_folder(model):
        return RunFolder(name, "run", model)
    return None


def find_runs(root: Path) -> list[RunFolder]:
    """Every run under ``root`` and one level down in group folders, sorted by name within each level."""
    if not root.is_dir():
        return []
    found = []
    for sub in visible_dirs(root):
        if (run := run_folder(sub, f"runs/{sub.name}")) is not None:
            found.append(run)
        else:  # a group of runs
            found += filter(None, (run_folder(child, f"runs/{sub.name}/{child.name}") for child in visible_dirs(sub)))
    return found


def visible_dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
    except OSError:  # unreadable or vanished while listing: nothing to offer there
        return []


def rated_languages(location: str | Path) -> tuple[str, ...] | None:
    """The languages whose rated pairs (the STS term's, STS Multi MT train) a fine-tuned run learnt from, from its
    ``finetune_config.json`` or a scorer's ``scorer.json`` (``location``: the run or its ``model`` folder); None when
    not recorded. Leave-languages-out runs (:mod:`mlse.experiments.unrated`) name fewer: the others are *unrated*."""
    path = Path(location)
    scorer = path / SCORER_FILE
    if scorer.is_file():
        langs = read_json_dict(scorer).get("rated_languages")
        return tuple(langs) if isinstance(langs, list) and all(isinstance(x, str) for x in langs) else None
    for folder in (path, path.parent):
        config_file = folder / FINETUNE_CONFIG_FILE
        if config_file.is_file():
            config = read_json_dict(config_file)
            uses_term = config.get("method") == "sts" or config.get("sts_loss") not in (None, "none")
            langs = config.get("sts_langs")
            return tuple(langs) if uses_term and isinstance(langs, list) else None
    return None


def read_json_dict(path: Path) -> dict:
    """The JSON object in the file at ``path``; {} when it is unreadable, not JSON or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_log_records(path: Path, skipped=None) -> list[dict]:
    """The records of a fine-tune's log (:data:`LOG_FILE`) that name their ``step``; [] when unreadable. A line that
    is no such record (cut short by a kill) is left out, and ``skipped(line_number, why)`` told when given."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    records = []
    for i, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            int(record["step"])
        except (ValueError, KeyError, TypeError) as exc:
            if skipped:
                skipped(i, exc)
            continue
        records.append(record)
    return records
