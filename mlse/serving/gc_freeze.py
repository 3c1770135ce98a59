"""Keep Python's cycle collector off what a serving process holds for good: after each load, freeze the survivors.

A full (generation-2) collection walks every tracked container object, and a process with loaded models, tokenizers
and a Gradio page holds ~450,000 of them. Under load (20 clients pressing Score, onnx-int8, 2 cores) the app ran a
full collection every few seconds, each stopping every request for 150-300 ms while it walked the same long-lived
objects again; at 20 requests in flight, each stop lands in ~20 requests' latencies, which is what put the page's p95
past 500 ms in one run and under it in the next (``docs/speed.md``).

:func:`freeze_survivors` collects once, then ``gc.freeze()``: every object alive at that moment moves to the permanent
generation, which collections skip (reference counting still frees each one as usual). The app calls it after a model
is loaded into its pool and after each warm step, the moments when long-lived objects appear. A frozen object that
later becomes part of a garbage *cycle* (an evicted model) would not be collected, so an eviction collects with
:func:`collect_all`: unfreeze, collect, freeze again.

Off unless :func:`enable` was called (``app.py`` calls it): a library user's process keeps the collector it chose.
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

    When hardly anything was made since the last collection (a warm step that only loaded a model, which the pool
    froze already), the full collection is skipped: it would walk everything again to find nothing."""
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
