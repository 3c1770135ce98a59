"""Visitors first: background work (the app's warm start) pauses while a visitor's request computes.

On few cores the two halve each other's speed. A thread computing for a visitor marks it with :func:`foreground`, a
background thread marks itself with :func:`background`, and the background's stop check calls
:func:`wait_for_foreground` between chunks, which returns once no foreground work is under way or after
``max_wait_s`` (a visitor may be waiting on the background's output).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mlse.stop_signal import StopSignal

_lock = threading.Condition()
_active: dict[int, int] = {}  # thread id -> nesting depth of foreground() in it
_background: set[int] = set()  # threads whose work never counts as foreground


@contextmanager
def foreground() -> Iterator[None]:
    """Mark the calling thread as computing for a visitor (unless it is a background thread) for the block."""
    me = threading.get_ident()
    if me in _background:
        yield
        return
    with _lock:
        _active[me] = _active.get(me, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _active[me] -= 1
            if not _active[me]:
                del _active[me]
            _lock.notify_all()


@contextmanager
def background() -> Iterator[None]:
    """Mark the calling thread as background work for the block: its foreground() blocks do not count."""
    me = threading.get_ident()
    _background.add(me)
    try:
        yield
    finally:
        _background.discard(me)


def foreground_busy() -> bool:
    """Whether any thread is computing for a visitor now."""
    with _lock:
        return bool(_active)


def wait_for_foreground(stop: StopSignal | None = None, max_wait_s: float = 120.0, poll_s: float = 0.25) -> float:
    """Block while foreground work is under way (at most ``max_wait_s``; ``stop`` asking to stop ends the wait);
    returns the seconds waited."""
    started = time.monotonic()
    with _lock:
        while _active and not (stop is not None and stop.should_stop()):
            left = max_wait_s - (time.monotonic() - started)
            if left <= 0:
                break
            _lock.wait(min(poll_s, left))
    return time.monotonic() - started
