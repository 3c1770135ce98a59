"""Jobs for tests/train/test_train_child_jobs.py, importable by a spawned child (``"tests.child_targets:NAME"``)."""

from __future__ import annotations

import os
import time

from mlse.errors import MlseError
from mlse.serving.procmem import memory_mb
from mlse.stop_signal import StopSignal


def allocate(mb: int, *, report, stop) -> float:
    """Hold ``mb`` MiB in many small objects (the kind of memory an allocator keeps after it is freed); return RSS."""
    chunks = [bytes(4096) for _ in range(mb * 256)]  # 4 KiB each
    rss = memory_mb()["rss_mb"]
    report({"event": "phase", "message": f"holding {len(chunks) * 4 // 1024} MiB"})
    return rss


def wait_for_stop(*, report, stop: StopSignal) -> str:
    """Wait for the parent's Stop, asked as every job asks it (the child's own :class:`StopSignal`)."""
    report({"event": "phase", "message": "waiting"})
    while not stop.should_stop():
        time.sleep(0.05)
    return f"saw stop ({type(stop).__name__}: {stop.reason()})"


def refuse(*, report, stop):
    raise MlseError("run name 'x' is taken")


def die(*, report, stop):
    os._exit(9)
