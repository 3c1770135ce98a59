"""In-process memos bounded by bytes, not by entry count: a long-running app must not grow without end.

Entries differ in size by orders of magnitude, so an entry count is no bound. Each memo has a byte budget; an entry's
size is estimated once, when stored (:func:`approx_bytes`); least recently used entries go first, and one bigger than
the budget is returned but not kept. Bookkeeping is ``cachetools.LRUCache`` with ``getsizeof``; this module adds the
estimate, a lock (cachetools is not thread-safe) and compute-once (:meth:`BytesMemo.get_or_compute`).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Hashable

from cachetools import LRUCache

from mlse.single_flight import single_flight

MB = 2**20
_MAX_DEPTH = 6  # deeper structures are counted by their shell only: estimates, not an audit


def approx_bytes(value, _depth: int = 0, _seen: set[int] | None = None) -> int:
    """Roughly how many bytes ``value`` keeps alive: array buffers, string data, containers and their items."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    nbytes = getattr(value, "nbytes", None)  # numpy arrays (and torch-like tensors exposing it)
    if isinstance(nbytes, int) and not isinstance(value, type):
        return nbytes + 128
    memory_usage = getattr(value, "memory_usage", None)  # pandas frames and series
    if callable(memory_usage) and hasattr(value, "index"):
        try:
            used = memory_usage(deep=True)
            return int(used.sum() if hasattr(used, "sum") else used)
        except (TypeError, ValueError):
            pass
    size = sys.getsizeof(value, 64)
    if _depth >= _MAX_DEPTH or isinstance(value, str | bytes | bytearray | int | float | bool | type(None)):
        return size
    if isinstance(value, dict):
        return size + sum(
            approx_bytes(k, _depth + 1, seen) + approx_bytes(v, _depth + 1, seen) for k, v in value.items()
        )
    if isinstance(value, list | tuple | set | frozenset):
        return size + sum(approx_bytes(item, _depth + 1, seen) for item in value)
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return size + approx_bytes(attributes, _depth + 1, seen)
    slots = getattr(type(value), "__slots__", ())
    return size + sum(approx_bytes(getattr(value, s, None), _depth + 1, seen) for s in slots)


class BytesMemo:
    """A thread-safe LRU mapping whose entries' estimated sizes stay within ``max_bytes``."""

    def __init__(self, name: str, max_bytes: int, sizeof: Callable[[object], int] = approx_bytes):
        self.name = name
        self.max_bytes = int(max_bytes)
        self._sizeof = sizeof
        # values are stored as (value, size): the estimate is made once, outside the lock, and cachetools reads it back
        self._entries: LRUCache = LRUCache(maxsize=self.max_bytes, getsizeof=lambda entry: entry[1])
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        with self._lock:
            entry = self._entries.get(key)  # a hit counts as a use
        return default if entry is None else entry[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: Hashable, value) -> None:
        """Keep ``value`` (evicting the least recently used to make room); one larger than the budget is not kept."""
        size = self._sizeof(value)
        with self._lock:
            if size > self.max_bytes:  # cachetools would refuse it (ValueError); an older value under key goes
                self._entries.pop(key, None)
                return
            self._entries[key] = (value, size)

    def get_or_compute(self, key: Hashable, compute: Callable[[], object]):
        """The memoised value, or ``compute()`` stored. A second thread asking for a key being computed waits for it
        (:func:`mlse.single_flight.single_flight`); other keys are not held up. ``compute`` must not ask this memo for
        the same key."""
        sentinel = object()
        value = self.get(key, sentinel)
        if value is not sentinel:
            return value
        with single_flight(("memo", self.name, key)):
            value = self.get(key, sentinel)  # computed by the thread this one waited for (unless too big to keep)
            if value is sentinel:
                value = compute()
                self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def total_bytes(self) -> int:
        return int(self._entries.currsize)

    def __len__(self) -> int:
        return len(self._entries)


def bytes_memoized(name: str, max_bytes: int):
    """Decorator: ``functools.lru_cache`` for hashable arguments, bounded by bytes (``fn.memo`` is the BytesMemo)."""

    def wrap(fn):
        memo = BytesMemo(name, max_bytes)

        @functools.wraps(fn)
        def memoized(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            return memo.get_or_compute(key, lambda: fn(*args, **kwargs))

        memoized.memo = memo
        memoized.cache_clear = memo.clear
        return memoized

    return wrap
