"""Where a benchmark writes: ``--out`` when given, else a fresh temporary folder in quick mode (a quick run proves a
script works on tiny inputs; it never writes over ``results/``), else the benchmark's default; and the ``--quick``
help text every script shares."""

from __future__ import annotations

import tempfile
from pathlib import Path

QUICK_HELP = "tiny inputs, the same code paths: seconds, proves the script runs (numbers mean nothing)"


def output_dir(out: str | Path | None, quick: bool, default: str | Path, name: str = "benchmark") -> Path:
    """The folder a benchmark writes to: ``out`` if given; in quick mode a new temporary folder; else ``default``."""
    if out:
        return Path(out)
    if quick:
        return Path(tempfile.mkdtemp(prefix=f"mlse-{name}-quick-"))
    return Path(default)


def output_file(out: str | Path | None, quick: bool, default: str | Path) -> Path:
    """Like :func:`output_dir` for a benchmark whose ``--out`` names one file: in quick mode the default's file name
    inside a new temporary folder."""
    if out:
        return Path(out)
    default = Path(default)
    if quick:
        return output_dir(None, True, "", default.stem) / default.name
    return default
