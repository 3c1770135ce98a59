"""One computation per key at a time, in this process: whoever asks second waits for the first, then reads its result.

For work whose result the first caller writes where the second can read it (a cache file); ``on_wait`` tells the
waiting caller, so its progress line can say why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

_locks: dict[Hashable, threading.Lock] = {}
_guard = threading.Lock()


@contextmanager
def single_flight(key: Hashable, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``key`` for the block; a caller already holding it makes this one wait (``on_wait()`` is called first).

    Inside the block, look first for what the caller this one waited for produced, then compute what is missing. The
    table keeps a key only while someone holds or waits for it.
    """
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        if on_wait is not None:
            on_wait()
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
        with _guard:
            if not lock.locked() and _locks.get(key) is lock:
                del _locks[key]


def held_keys() -> list[Hashable]:
    """The keys someone holds or waits for now (for tests and diagnostics)."""
    with _guard:
        return list(_locks)
