"""Resident memory of a process, as the benchmarks report it (Linux /proc, with a portable fallback for self).

Peak memory is ``VmHWM``: it belongs to the process image, whereas ``ru_maxrss`` survives fork + exec, so a fresh
worker started by a large parent would report the parent's peak. tracemalloc is no substitute: it misses native
allocations (torch, onnxruntime, faiss).
"""

from __future__ import annotations

import ctypes
import functools
import resource
import sys
from collections.abc import Callable
from pathlib import Path

_TRIM = None  # glibc's malloc_trim once looked up, False where there is none


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """{"rss_mb": current, "peak_rss_mb": high-water mark} in MiB for ``pid`` (default: this process).

    Without /proc (macOS), only this process can be measured, and only its peak (``ru_maxrss``) is known."""
    try:
        fields = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024  # "VmHWM:   13724 kB"
        return {"rss_mb": round(fields["VmRSS"], 1), "peak_rss_mb": round(fields["VmHWM"], 1)}
    except (OSError, KeyError):
        if pid != "self":
            raise
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    peak = maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024
    return {"rss_mb": float("nan"), "peak_rss_mb": round(peak, 1)}


def peak_rss_mb(pid: int | str = "self") -> float:
    return memory_mb(pid)["peak_rss_mb"]


def release_free_memory() -> bool:
    """Hand the C allocator's free pages back to the system (glibc ``malloc_trim(0)``); True where it ran.

    After a large temporary allocation (encoding, converting a model) freed memory stays in the process until the
    allocator trims it. A no-op (False) without glibc."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if not _TRIM:
        return False
    _TRIM(0)
    return True


def releases_memory(fn: Callable) -> Callable:
    """``fn``, then :func:`release_free_memory` (for the handlers that encode thousands of sentences at once)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            release_free_memory()

    return wrapper
