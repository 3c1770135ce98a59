"""The result file every evaluation writes, and its plain-text table.

Schema (one JSON object)::

    {"model", "model_identity", "task", "split", "config", "data": {path: sha256}, "data_identity", "versions",
     "created", "scores": {key: {...}}, "averages": {group: {...}}, "encode_stats": {"encoded", "served"}}

``data`` hashes every input file so two results can be told to share the same bytes; paths (there, in ``model`` and
``config``) are portable (:mod:`mlse.data.portable`), and ``data_identity`` is one short hash of those files.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from mlse import __version__
from mlse.atomic import atomic_write_text
from mlse.data.json_safe import nan_to_none

_VERSIONED = ("mlse", "torch", "transformers", "sentence-transformers", "numpy", "scipy", "faiss-cpu")


def library_versions() -> dict[str, str]:
    """Installed versions, read from package metadata (nothing is imported)."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name == "mlse":
                out[name] = __version__
    return out


@dataclass
class EvalResult:
    model: str
    task: str
    split: str
    scores: dict[str, dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    data: dict[str, str] = field(default_factory=dict)
    averages: dict[str, dict[str, Any]] = field(default_factory=dict)
    model_identity: str = ""
    encode_stats: dict[str, int] = field(default_factory=dict)
    # Kept in memory for callers such as the app (e.g. Tatoeba error lists); not written to the result JSON.
    extras: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The record as written: paths in their portable forms (:mod:`mlse.data.portable`), never absolute."""
        from mlse.data.portable import data_identity, portable_hashes, portable_record

        data = portable_hashes(self.data)
        return {
            "model": portable_record(self.model),
            "model_identity": portable_record(self.model_identity),
            "task": self.task,
            "split": self.split,
            "config": portable_record(self.config),
            "data": data,
            "data_identity": data_identity(data),
            "versions": library_versions(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "scores": self.scores,
            "averages": self.averages,
            "encode_stats": self.encode_stats,
        }

    def write_json(self, path: str | Path) -> Path:
        """Write atomically; NaN and +-inf become null so the file is strict JSON."""
        text = json.dumps(nan_to_none(self.to_dict()), indent=2, ensure_ascii=False)
        return atomic_write_text(path, text + "\n")


_PRECISE_COLUMNS = {"threshold": 3}  # margin thresholds sit near 1.0: one decimal would hide them


def format_table(rows: Iterable[dict[str, Any]], columns: list[str], *, digits: int = 1) -> str:
    """A fixed-width text table; floats rounded, lists shown as [lo, hi]."""

    def cell(v: Any, digits: int = digits) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.{digits}f}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(cell(x) for x in v) + "]"
        return str(v)

    rows = list(rows)
    body = [[cell(r.get(c), _PRECISE_COLUMNS.get(c, digits)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    sep = "  ".join("-" * w for w in widths)
    numeric = [all(_is_number(r.get(c)) or r.get(c) is None for r in rows) for c in columns]
    aligned = ["  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(b, widths, numeric)) for b in body]
    return "\n".join([line, sep, *aligned])


def _is_number(v: Any) -> bool:
    return (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        or (isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v))
    )


def result_table(result: EvalResult) -> str:
    """The table the CLI prints for a result."""
    if not result.scores:
        return "(no scores)"
    first = next(iter(result.scores.values()))
    columns = [k for k in first if not isinstance(first[k], (dict,))]
    rows = [{"key": key, **vals} for key, vals in result.scores.items()]
    rows += [{"key": f"avg:{g}", **vals} for g, vals in result.averages.items()]
    return format_table(rows, ["key", *columns])
