"""Keep Python's cycle collector off what a serving process holds for good: after each load, freeze the survivors.

A full collection walks every tracked container, and a serving process holds hundreds of thousands of long-lived ones;
under load each walk stalls every request in flight (docs/speed.md). :func:`freeze_survivors` collects once, then
``gc.freeze()`` (collections skip frozen objects; reference counting still frees them). A frozen object in a garbage
*cycle* (an evicted model) is never collected, so evictions use :func:`collect_all`: unfreeze, collect, freeze again.
Off unless :func:`enable` was called (``app.py`` does): a library user's process keeps its own collector.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_enabled = False
_FEW = 100  # tracked objects made since the last collection below which a freeze does not collect first


def enable(on: bool = True) -> None:
    """Freeze survivors from now on (``on``), or stop (and hand every frozen object back to the collector)."""
    global _enabled
    with _lock:
        _enabled = on
        if not on:
            gc.unfreeze()


def freeze_survivors() -> int:
    """Collect, then freeze what is alive -> how many objects are frozen now (0 when not enabled).

    When hardly anything was made since the last collection, the full collection is skipped (it would find nothing)."""
    with _lock:
        if not _enabled:
            return 0
        young, older, oldest = gc.get_count()
        if young >= _FEW or older or oldest:
            gc.collect()
        gc.freeze()
        return gc.get_freeze_count()


def collect_all() -> None:
    """One full collection that reaches the frozen objects too (what an eviction let go of), the survivors then frozen
    again; a plain ``gc.collect()`` when not enabled."""
    with _lock:
        if _enabled:
            gc.unfreeze()
        gc.collect()
        if _enabled:
            gc.freeze()
