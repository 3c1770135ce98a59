"""Let concurrent requests share one encoder call: a small thread-safe micro-batcher.

Why not Gradio's ``batch=True``: it batches only one function's queued events and makes handlers list-in, list-out.
Here requests for one model waiting while it is busy (or arriving within :data:`DEFAULT_WINDOW_S`) share the next
encoder call, whatever event, tab or thread they came from.

How: the first caller for an encoder *leads*: it waits ``window_s`` only if other callers are inside, encodes every
waiting request (up to ``max_texts`` texts) in one call and hands out the rows until its own is served, then passes
the lead on. A caller alone pays nothing. A failed batch is retried per request, so bad input fails only its caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

DEFAULT_WINDOW_S = 0.003  # long enough for requests released together to meet, short against an encode (~10+ ms)
DEFAULT_MAX_TEXTS = 128  # one call's texts: big enough for 60 pairs, small enough to keep padding waste modest


@dataclass
class _Request:
    encoder: object
    texts: list[str]
    rows: np.ndarray | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class BatchStats:
    """What the batcher did, for tests and the load benchmark: encoder calls made and requests they served."""

    calls: int = 0
    requests: int = 0
    largest_batch: int = 0
    retried_alone: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, batch_size: int) -> None:
        with self._lock:
            self.calls += 1
            self.requests += batch_size
            self.largest_batch = max(self.largest_batch, batch_size)


class MicroBatcher:
    """``encode(encoder, texts)`` with the result of ``encoder.encode(texts)``, sharing calls between threads."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S, max_texts: int = DEFAULT_MAX_TEXTS):
        self.window_s = window_s
        self.max_texts = max_texts
        self.stats = BatchStats()
        self._changed = threading.Condition()
        self._waiting: dict[int, list[_Request]] = {}  # id(encoder) -> requests not yet taken, oldest first
        self._leading: set[int] = set()  # id(encoder) of encoders with a leader at work
        self._inside = 0  # callers in encode() now, for every encoder: a leader alone does not wait for company

    def encode(self, encoder, texts: Sequence[str]) -> np.ndarray:
        """Rows of ``encoder.encode(texts)`` (one per text, in order), computed together with concurrent callers."""
        request = _Request(encoder, list(texts))
        if not request.texts:
            return encoder.encode(request.texts)
        key = id(encoder)  # queued requests hold the encoder, so its id is not reused while the key is in use
        with self._changed:
            self._inside += 1
            self._waiting.setdefault(key, []).append(request)
            while not request.done and key in self._leading:
                self._changed.wait()
            company = self._inside > 1
            if not request.done:
                self._leading.add(key)
        try:
            if not request.done:
                try:
                    self._lead(key, request, wait=company)
                finally:
                    with self._changed:
                        self._leading.discard(key)
                        if not self._waiting.get(key):
                            self._waiting.pop(key, None)
                        self._changed.notify_all()  # a waiting caller takes the lead, served ones return
        finally:
            with self._changed:
                self._inside -= 1
        if request.error is not None:
            raise request.error
        return request.rows

    def _lead(self, key: int, mine: _Request, wait: bool = True) -> None:
        """Encode waiting batches for ``key`` until ``mine`` is served (after the window when ``wait``)."""
        if wait and self.window_s > 0:
            time.sleep(self.window_s)
        while not mine.done:
            with self._changed:
                batch = self._take(key)
            self._run(batch)
            with self._changed:
                self._changed.notify_all()  # callers in this batch may return before the next batch is encoded

    def _take(self, key: int) -> list[_Request]:
        """The oldest waiting requests whose texts fit ``max_texts`` (always at least one)."""
        waiting = self._waiting[key]
        count, taken = 0, 0
        for request in waiting:  # stops at the first request that does not fit: the queue is not read to its end
            if taken and count + len(request.texts) > self.max_texts:
                break
            count += len(request.texts)
            taken += 1
        batch, self._waiting[key] = waiting[:taken], waiting[taken:]
        return batch

    def _run(self, batch: list[_Request]) -> None:
        """Encode the batch in one call and give each request its rows; on failure, each request alone."""
        encoder = batch[0].encoder
        try:
            rows = encoder.encode([t for r in batch for t in r.texts]) if len(batch) > 1 else None
        except Exception:  # noqa: BLE001 -- retried one by one below, so the error reaches only its own caller
            rows = None
            self.stats.retried_alone += len(batch)
        if rows is not None:
            self.stats.add(len(batch))
            ends = np.cumsum([len(r.texts) for r in batch])
            for request, part in zip(batch, np.split(np.asarray(rows), ends[:-1])):
                request.rows = np.array(part)  # a copy, not a view of the batch
        else:
            for request in batch:
                try:
                    request.rows = encoder.encode(request.texts)
                    self.stats.add(1)
                except BaseException as exc:  # noqa: BLE001 -- handed to the caller, who re-raises it
                    request.error = exc
        for request in batch:
            request.done = True
