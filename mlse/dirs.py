"""Where mlse keeps its own files: the cache root and the runs directory (datasets: :mod:`mlse.data.paths`).

* ``cache_root()``: ``MLSE_CACHE`` or the user's cache dir. The embedding cache (:mod:`mlse.encoders.cache`), the
  weight-fingerprint memo, ONNX exports, the converted e5 folder and the map's projections live under it.
* ``runs_dir()``: ``MLSE_RUNS`` or ``./runs``. Trained runs (scorers and fine-tuned students) and local
  calibrations; what a folder there is and how runs are named: :mod:`mlse.runs.folders`.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir


def cache_root() -> Path:
    """``MLSE_CACHE`` or the user's cache dir (e.g. ``~/.cache/mlse``)."""
    env = os.environ.get("MLSE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(user_cache_dir("mlse"))


def runs_dir() -> Path:
    """Where trained runs live: ``MLSE_RUNS`` or ``./runs``."""
    return Path(os.environ.get("MLSE_RUNS", "runs"))
