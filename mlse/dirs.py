"""Where mlse keeps its own files: the cache root, the runs directory and the shipped assets (datasets:
:mod:`mlse.data.paths`).

:func:`cache_root`: embedding cache, fingerprints, ONNX exports, projections; :func:`runs_dir`: trained runs
(:mod:`mlse.runs.folders`) and local calibrations; :func:`assets_dir`: what mlse ships.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from platformdirs import user_cache_dir

from mlse.errors import MlseError


def cache_root() -> Path:
    """``MLSE_CACHE`` or the user's cache dir (e.g. ``~/.cache/mlse``)."""
    env = os.environ.get("MLSE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(user_cache_dir("mlse"))


def runs_dir() -> Path:
    """Where trained runs live: ``MLSE_RUNS`` or ``./runs``."""
    return Path(os.environ.get("MLSE_RUNS", "runs"))


def assets_dir() -> Path:
    """The shipped files: ``mlse/assets`` of an installed package (``importlib.resources``), else the checkout's
    ``assets/`` beside the ``mlse`` folder."""
    installed = resources.files("mlse").joinpath("assets")
    if isinstance(installed, Path) and installed.is_dir():  # a zipped install has no folder to hand out
        return installed
    return package_parent() / "assets"


def package_parent() -> Path:
    """The folder that holds the ``mlse`` package: the repository in a checkout, ``site-packages`` when installed."""
    return Path(__file__).resolve().parents[1]


def file_safe(name: str, limit: int = 40) -> str:
    """``name`` as part of a file name: letters, digits, ``-_.`` kept, anything else ``_``; at most ``limit`` long."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:limit]


def positive_env(name: str, default: int) -> int:
    """The positive whole number the environment variable ``name`` holds; ``default`` when unset or blank."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MlseError(f"{name}={raw!r}: expected a whole number") from None
    if value < 1:
        raise MlseError(f"{name}={raw!r}: expected a positive number")
    return value
