"""How many CPU threads an encoder on the CPU uses: ``MLSE_THREADS`` or 2 (the ONNX backends and ``muse``)."""

from __future__ import annotations

import os

from mlse.errors import MlseError

DEFAULT_THREADS = 2
THREADS_ENV = "MLSE_THREADS"


def default_threads() -> int:
    """``MLSE_THREADS`` if set (a positive integer), else 2."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_THREADS
    try:
        value = int(raw)
    except ValueError:
        raise MlseError(f"{THREADS_ENV} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise MlseError(f"{THREADS_ENV} must be a positive integer, got {raw!r}")
    return value
