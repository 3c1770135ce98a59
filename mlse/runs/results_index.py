"""Every result file under ``results/`` and ``runs/`` as one flat table (one row per number), for the app's
Results tab and for quick pandas analysis.

Columns: ``model, task, split, key, metric, value, kind, experiment, source, date``. ``key``: the STS pair, Tatoeba
language or mining pair, ``avg:<group>`` for an average, empty for a run-level number; ``kind``: the file's schema;
``experiment``: the file's folder (tells two seed grids of one backbone apart).

Schemas are recognised by their keys (:func:`schema_of`), each read by its entry in :data:`READERS`. Other JSON is
passed over quietly; an unparseable file or a known schema with a broken shape is skipped with a warning. ``model``
folders and dot-folders are not searched.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mlse.data.json_safe import finite_or_none
from mlse.dirs import runs_dir
from mlse.memo import MB, BytesMemo
from mlse.runs.folders import LOG_FILE, read_log_records

log = logging.getLogger(__name__)

COLUMNS = ["model", "task", "split", "key", "metric", "value", "kind", "experiment", "source", "date"]
# count-like fields: useful in a file, noise in a table of scores
_SKIP_METRICS = {"n", "n_gold", "n_src", "n_tgt", "n_pairs", "n_langs", "missing", "chance"}
_SKIP_FOLDERS = {"model", "__pycache__"}
# (path, size, mtime) -> (rows, warnings): a results folder of thousands of files must not grow the app without end
_memo = BytesMemo("results_index.files", 32 * MB)
# (path, size, mtime) -> curve rows of a run log or result file: the Results tab's Refresh redraws the curves too
_curves_memo = BytesMemo("results_index.curves", 16 * MB)


def default_roots() -> list[Path]:
    """``$MLSE_RESULTS`` (default ``./results``) and the runs directory."""
    return [Path(os.environ.get("MLSE_RESULTS", "results")), runs_dir()]


def result_files(roots: Iterable[str | Path]) -> list[Path]:
    """Every ``*.json`` under the roots, outside model folders and dot-folders, sorted."""
    found: set[Path] = set()
    for root in map(Path, roots):
        if root.is_file() and root.suffix == ".json":
            found.add(root)
            continue
        if not root.is_dir():
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _SKIP_FOLDERS and not d.startswith(".")]
            found.update(Path(folder) / f for f in files if f.endswith(".json") and not f.startswith("."))
    return sorted(found)


def build_index(roots: Iterable[str | Path] | None = None):
    """The flat table (a pandas DataFrame with :data:`COLUMNS`) and the list of warnings for skipped files."""
    import pandas as pd  # lazy: pandas costs ~0.5 s to import; only tables need it

    roots = [Path(r) for r in (roots if roots is not None else default_roots())]
    rows: list[dict] = []
    warnings: list[str] = []
    for path in result_files(roots):
        file_rows, file_warnings = _rows_of_file(path, _display_path(path, roots))
        rows += file_rows
        warnings += file_warnings
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    return frame.sort_values(["kind", "model", "task", "key", "metric"], kind="stable").reset_index(drop=True), warnings


def _display_path(path: Path, roots: list[Path]) -> str:
    """The file relative to its root's parent (``results/baseline/sts.json``), else as given."""
    return next((str(path.relative_to(r.parent)) for r in roots if path.is_relative_to(r.parent)), str(path))


def _rows_of_file(path: Path, source: str) -> tuple[list[dict], list[str]]:
    """Parse one file (memoised on path, size and mtime: the Results tab re-reads on every refresh)."""
    return _memoised(
        _memo, path, lambda stat: _parse_file(path, source, stat.st_mtime), lambda exc: ([], [f"{path}: {exc}"])
    )


def _memoised(memo: BytesMemo, path: Path, compute, unreadable):
    """``compute(stat)`` of the file at ``path``, kept in ``memo`` under its path, size and mtime; ``unreadable(exc)``
    when it cannot be stat'ed."""
    try:
        stat = path.stat()
    except OSError as exc:
        return unreadable(exc)
    return memo.get_or_compute((str(path), stat.st_size, stat.st_mtime_ns), lambda: compute(stat))


def _parse_file(path: Path, source: str, mtime: float) -> tuple[list[dict], list[str]]:
    rows: list[dict] = []
    warnings: list[str] = []
    obj, error = _load_quietly(path)
    if error is not None:
        warnings.append(f"skipped {source}: not readable JSON ({error})")
    elif (kind := schema_of(obj)) is not None:
        base = {"kind": kind, "experiment": str(Path(source).parent), "source": source}
        base["date"] = _date(obj.get("created"), mtime)
        try:
            rows = [base | row for row in READERS[kind](obj, path)]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            warnings.append(f"skipped {source}: looks like a {kind} file but {type(exc).__name__}: {exc}")
    for warning in warnings:
        log.warning("%s", warning)
    return rows, warnings


def schema_of(obj: Any) -> str | None:
    """Which result schema a parsed JSON value follows, or None for a file that is not a result."""
    if not isinstance(obj, dict):
        return None
    if obj.get("experiment") == "seed-grid":
        return "seed-grid"
    if "recipe" in obj and "sts" in obj and "tatoeba" in obj and "train" in obj:
        return "student"
    if "scores" in obj and "curves" in obj:
        return "finetune-compare"
    if "scores" in obj and "task" in obj and "model" in obj:
        return "eval"
    if "stop_reason" in obj and "method" in obj:
        return "finetune-run"
    if str(obj.get("format", "")).startswith("mlse-scorer"):
        return "scorer-run"
    if str(obj.get("format", "")).startswith("mlse-interrupted"):
        return "interrupted-run"
    if "recipe" in obj and "folds" in obj and "mean_gap" in obj:
        return "unrated"
    return None


def _date(created: Any, mtime: float) -> str:
    """``created`` of the file (ISO, any offset) as UTC ``YYYY-MM-DD HH:MM``, else the file's modification time."""
    try:
        parsed = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        parsed = datetime.fromtimestamp(mtime, timezone.utc)
    return (parsed if parsed.tzinfo is None else parsed.astimezone(timezone.utc)).strftime("%Y-%m-%d %H:%M")


def _number(value: Any) -> float | None:
    """A finite float, or None for anything else (bools, strings, lists, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return finite_or_none(value)


def _metric_rows(values: dict, **fields) -> Iterator[dict]:
    """One row per numeric entry of ``values`` (nested dicts flattened as ``outer.inner``)."""
    for metric, value in values.items():
        if str(metric).rsplit(".", 1)[-1] in _SKIP_METRICS:
            continue
        if isinstance(value, dict):
            yield from _metric_rows({f"{metric}.{k}": v for k, v in value.items()}, **fields)
            continue
        number = _number(value)
        if number is not None:
            yield {**fields, "metric": metric, "value": number}


def _read_eval(obj: dict, path: Path) -> Iterator[dict]:
    common = {"model": str(obj["model"]), "task": str(obj["task"]), "split": str(obj.get("split") or "")}
    for key, values in obj["scores"].items():
        yield from _metric_rows(values, **common, key=str(key))
    for group, values in (obj.get("averages") or {}).items():
        yield from _metric_rows(values, **common, key=f"avg:{group}")


def _read_student(obj: dict, path: Path) -> Iterator[dict]:
    """A study result: its STS and Tatoeba results under the recipe's name, and its training numbers."""
    name = f"student:{obj['recipe']}"
    for part in ("sts", "tatoeba"):
        for row in _read_eval(obj[part], path):
            yield row | {"model": name}
    yield from _finetune_metrics(obj["train"], name)


def _read_seed_grid(obj: dict, path: Path) -> Iterator[dict]:
    backbone = str(obj["backbone"])

    def model(variant: str) -> str:
        return backbone if variant == "baseline" else f"{backbone}+{variant}"

    for variant, pairs in obj["scores"].items():
        for pair, values in pairs.items():
            yield from _metric_rows(values, model=model(variant), task="sts", split="test", key=pair)
    for field, metric, prefix in (("relative_pearson", "relative_pearson", ""), ("groups", "pearson", "avg:")):
        for variant, values in (obj.get(field) or {}).items():
            for key, value in values.items():
                yield from _metric_rows(
                    {metric: value}, model=model(variant), task="sts", split="test", key=prefix + key
                )
    for variant, metrics in (obj.get("metrics") or {}).items():
        yield from _metric_rows(metrics, model=model(variant), task="training", split="", key="")


def _read_finetune_compare(obj: dict, path: Path) -> Iterator[dict]:
    for model, pairs in obj["scores"].items():
        for pair, value in pairs.items():
            yield from _metric_rows({"spearman": value}, model=str(model), task="sts", split="test", key=pair)
    for model, metrics in (obj.get("metrics") or {}).items():
        yield from _finetune_metrics(metrics, str(model))


def _finetune_metrics(metrics: dict, model: str) -> Iterator[dict]:
    """Run-level numbers of a fine-tuning run, plus its final dev score per pair."""
    level = {k: v for k, v in metrics.items() if k not in ("final_dev", "data", "dropped")}
    yield from _metric_rows(level, model=model, task="finetune", split="dev", key="")
    for pair, value in (metrics.get("final_dev") or {}).items():
        yield from _metric_rows({"spearman": value}, model=model, task="finetune", split="dev", key=pair)


def _run_name(path: Path) -> str:
    """``.../runs/compare/mse/metrics.json`` -> ``runs/compare/mse`` (the part from the last ``runs`` folder on)."""
    parts = path.parent.parts
    if "runs" in parts:
        start = len(parts) - 1 - parts[::-1].index("runs")
        return "/".join(parts[start:])
    return path.parent.name


def _read_interrupted(obj: dict, path: Path) -> Iterator[dict]:
    task = "finetune" if (path.parent / "finetune_config.json").is_file() else "training"
    step = obj.get("checkpoint_step")
    value = step if isinstance(step, int) and not isinstance(step, bool) else None
    yield {"model": _run_name(path), "task": task, "split": "", "key": "", "metric": "interrupted", "value": value}


def _read_unrated(obj: dict, path: Path) -> Iterator[dict]:
    common = {"model": f"unrated:{obj['recipe']}", "task": "sts", "split": "test"}
    for fold in obj["folds"]:
        for pair, row in fold["pairs"].items():
            for metric, field in (("rated", "with"), ("unrated", "without"), ("gap", "gap")):
                yield {**common, "key": pair, "metric": metric, "value": _number(row[field])}
    yield {**common, "key": "avg:held-out", "metric": "gap", "value": _number(obj["mean_gap"])}
    if not obj.get("complete"):
        yield {**common, "key": "", "metric": "incomplete", "value": 1.0}


READERS = {
    "eval": _read_eval,
    "seed-grid": _read_seed_grid,
    "finetune-compare": _read_finetune_compare,
    "finetune-run": lambda obj, path: _finetune_metrics(obj, _run_name(path)),
    "scorer-run": lambda obj, path: _metric_rows(
        obj.get("metrics") or {}, model=_run_name(path), task="training", split="", key=""
    ),
    "student": _read_student,
    "interrupted-run": _read_interrupted,
    "unrated": _read_unrated,
}


# ----------------------------------------------------------------------------------------------- training curves
def finetune_curves(roots: Iterable[str | Path] | None = None):
    """Dev-score curves of every fine-tuning run: a DataFrame ``run, step, minutes, dev_spearman, loss, source``.

    From run logs, finetune-compare ``curves`` (no steps) and student ``curve``s; bad lines are skipped, warned."""
    import pandas as pd  # lazy: pandas costs ~0.5 s to import; only tables need it

    roots = [Path(r) for r in (roots if roots is not None else default_roots())]
    rows: list[dict] = []
    for root in roots:
        if not root.is_dir():
            continue
        for log_file in sorted(root.rglob(LOG_FILE)):
            if any(part.startswith(".") for part in log_file.relative_to(root).parts):
                continue
            rows += _curve_rows_of_file(log_file)
    for path in result_files(roots):
        rows += _curve_rows_of_file(path)
    return pd.DataFrame(rows, columns=["run", "step", "minutes", "dev_spearman", "loss", "source"])


def _curve_rows_of_file(path: Path) -> list[dict]:
    """The curve points of one run log or result file (memoised on path, size and mtime, as the index's rows)."""
    return _memoised(_curves_memo, path, lambda _stat: _parse_curve(path), lambda _exc: [])


def _parse_curve(path: Path) -> list[dict]:
    if path.name == LOG_FILE:
        return _log_rows(path, _run_name(path))
    try:
        return list(_result_curve_rows(_load_quietly(path)[0], path))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        log.warning("skipped the curve of %s: %s: %s", path, type(exc).__name__, exc)
        return []


def _curve_row(run: str, step, minutes, dev, loss, source: Path) -> dict:
    return {"run": run, "step": step, "minutes": minutes, "dev_spearman": dev, "loss": loss, "source": str(source)}


def _record_row(run: str, step, record: dict, source: Path) -> dict:
    """A curve point of one evaluation record (a run log's line, a student study's ``curve`` entry)."""
    minutes = _number(record["elapsed_s"]) / 60
    return _curve_row(run, step, minutes, _number(record.get("dev_spearman")), _number(record.get("loss")), source)


def _result_curve_rows(obj: Any, path: Path) -> Iterator[dict]:
    """A student study's ``curve`` or a finetune-compare file's ``curves`` as curve rows (nothing for other files)."""
    kind = schema_of(obj)
    if kind == "student":
        for r in obj.get("curve") or []:
            if isinstance(r, dict):
                yield _record_row(f"student:{obj['recipe']}", r.get("step"), r, path)
    if kind == "finetune-compare" and isinstance(obj.get("curves"), dict):
        for method, points in obj["curves"].items():
            for point in points if isinstance(points, list) else []:
                if isinstance(point, list) and len(point) == 2:
                    minutes, dev = _number(point[0]), _number(point[1])
                    yield _curve_row(f"{method} ({path.stem})", None, minutes, dev, None, path)


def _log_rows(log_file: Path, run: str) -> list[dict]:
    records = read_log_records(log_file, lambda n, why: log.warning("skipped line %d of %s: %s", n, log_file, why))
    return [_record_row(run, record["step"], record, log_file) for record in records]


def _load_quietly(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, str(exc)
