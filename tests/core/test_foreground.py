"""Visitors first: a background thread's stop check waits while another thread computes for a visitor."""

from __future__ import annotations

import math
import threading

import numpy as np

from mlse.encoders.cache import CachedEncoder
from mlse.foreground import background, foreground, foreground_busy, wait_for_foreground
from mlse.stop_signal import StopSignal

HANG_S = 60  # a hang guard, not a speed target: each wait below ends on an event long before


def start_visitor(release: threading.Event) -> threading.Thread:
    """A thread computing in the foreground until ``release`` is set (returned once it is inside)."""
    entered = threading.Event()

    def visitor():
        with foreground():
            entered.set()
            release.wait(HANG_S)

    thread = threading.Thread(target=visitor, daemon=True)
    thread.start()
    assert entered.wait(HANG_S), "the visitor never started"
    return thread


def start_waiter(**kwargs) -> tuple[threading.Thread, dict]:
    """``wait_for_foreground(**kwargs)`` in a background thread; the dict gets what it returned and whether foreground
    work was under way when it returned."""
    seen: dict = {}

    def waiter():
        seen["waited"] = wait_for_foreground(**kwargs)
        seen["busy_at_return"] = foreground_busy()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    return thread, seen


def finished(thread: threading.Thread) -> bool:
    thread.join(HANG_S)
    return not thread.is_alive()


def test_the_background_waits_while_a_visitor_computes_and_not_longer():
    release = threading.Event()
    visitor = start_visitor(release)
    assert foreground_busy()
    waiter, seen = start_waiter(max_wait_s=math.inf)  # only the visitor leaving can end this wait
    waiter.join(0.3)
    assert waiter.is_alive() and not seen  # still waiting while the visitor computes
    release.set()
    assert finished(waiter) and finished(visitor)
    assert seen["busy_at_return"] is False and not foreground_busy()
    idle, seen = start_waiter(max_wait_s=math.inf)  # nothing in the foreground: returns at once, unbounded or not
    assert finished(idle) and seen["busy_at_return"] is False


def test_the_wait_is_bounded_and_a_stop_ends_it():
    release = threading.Event()
    visitor = start_visitor(release)
    try:
        bounded, seen = start_waiter(max_wait_s=0.3)  # a stuck visitor does not stall the warm for ever
        assert finished(bounded) and seen["busy_at_return"] is True and seen["waited"] >= 0.3
        stop = StopSignal()
        stopped, seen = start_waiter(stop=stop, max_wait_s=math.inf)
        stopped.join(0.3)
        assert stopped.is_alive()  # waits for the visitor...
        stop.set()
        assert finished(stopped) and seen["busy_at_return"] is True  # ...until the stop, the visitor still inside
    finally:
        release.set()
        visitor.join(HANG_S)


def test_a_background_threads_own_computing_does_not_count():
    with background():
        with foreground():
            assert not foreground_busy()
    with foreground():
        assert foreground_busy()
    assert not foreground_busy()


class SlowEncoder:
    name = "slow"
    identity = "slow:1"

    def __init__(self):
        self.busy_seen = []

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None):
        self.busy_seen.append(foreground_busy())
        return np.ones((len(texts), 4), dtype=np.float32)


def test_the_embedding_cache_marks_what_it_encodes_as_foreground(tmp_path):
    inner = SlowEncoder()
    cached = CachedEncoder(inner, root=tmp_path)
    cached.encode(["a", "b"])  # a visitor's miss: encoded in the foreground
    cached.encode(["a", "b"])  # served from the cache: nothing encoded
    with background():
        cached.encode(["c"])  # the warm start's miss: not foreground
    assert inner.busy_seen == [True, False]
