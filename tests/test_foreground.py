"""Visitors first: a background thread's stop check waits while another thread computes for a visitor."""

from __future__ import annotations

import threading

import numpy as np

from mlse.encoders.cache import CachedEncoder
from mlse.foreground import background, foreground, foreground_busy, wait_for_foreground


def start_visitor(release: threading.Event) -> threading.Thread:
    """A thread computing in the foreground until ``release`` is set (returned once it is inside)."""
    entered = threading.Event()

    def visitor():
        with foreground():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=visitor)
    thread.start()
    entered.wait(5)
    return thread


def test_the_background_waits_while_a_visitor_computes_and_not_longer():
    release = threading.Event()
    thread = start_visitor(release)
    assert foreground_busy()
    threading.Timer(0.4, release.set).start()
    waited = wait_for_foreground(max_wait_s=5)
    thread.join()
    assert 0.3 <= waited < 3 and not foreground_busy()
    assert wait_for_foreground(max_wait_s=5) < 0.1  # nothing in the foreground: no wait


def test_the_wait_is_bounded_and_a_stop_ends_it():
    release = threading.Event()
    thread = start_visitor(release)
    try:
        assert 0.2 <= wait_for_foreground(max_wait_s=0.3) < 2  # a stuck visitor does not stall the warm for ever
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        assert wait_for_foreground(stop.is_set, max_wait_s=10) < 2
    finally:
        release.set()
        thread.join()


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
