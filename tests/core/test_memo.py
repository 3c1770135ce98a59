"""Memos bounded by bytes (mlse.memo), and the app's memos use them."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlse.memo import MB, BytesMemo, approx_bytes, bytes_memoized


def test_approx_bytes_counts_array_buffers_text_and_nested_objects():
    assert approx_bytes(np.zeros((1000, 100), dtype=np.float32)) >= 400_000
    assert approx_bytes("x" * 10_000) >= 10_000
    assert approx_bytes(["x" * 1000] * 1) < approx_bytes(["x" * 1000, "y" * 1000])

    @dataclass
    class View:
        emb: np.ndarray
        texts: list

    view = View(np.zeros((500, 64), dtype=np.float32), [f"sentence {i}" for i in range(500)])
    assert approx_bytes(view) >= view.emb.nbytes + 500 * 50
    frame = pd.DataFrame({"text": ["a sentence"] * 1000})
    assert approx_bytes(frame) >= 1000 * len("a sentence")
    shared = np.zeros(10_000, dtype=np.float64)
    assert approx_bytes([shared, shared]) < 2 * shared.nbytes  # one buffer referenced twice counts once


def test_memo_stays_within_its_bytes_evicting_least_recently_used():
    memo = BytesMemo("test.lru", max_bytes=3 * 100_000 + 1000)
    for key in "abc":
        memo.put(key, np.zeros(100_000, dtype=np.uint8))
    assert memo.get("a") is not None  # "a" is now the most recently used
    memo.put("d", np.zeros(100_000, dtype=np.uint8))
    assert "b" not in memo and all(k in memo for k in "acd")
    assert memo.total_bytes <= memo.max_bytes and len(memo) == 3
    memo.put("huge", np.zeros(1_000_000, dtype=np.uint8))  # bigger than the budget: not kept, nothing evicted
    assert "huge" not in memo and len(memo) == 3
    memo.put("a", np.zeros(10, dtype=np.uint8))  # replacing an entry re-counts its size
    assert memo.total_bytes < 3 * 100_000
    memo.clear()
    assert len(memo) == 0 and memo.total_bytes == 0


def test_memo_is_safe_from_many_threads():
    memo = BytesMemo("test.threads", max_bytes=50 * 8_000)

    def work(worker: int):
        for i in range(200):
            key = (worker, i % 30)
            value = memo.get_or_compute(key, lambda k=key: np.full(1000, k[1], dtype=np.int64))
            assert int(value[0]) == key[1]

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 0 < memo.total_bytes <= memo.max_bytes


def test_a_key_asked_twice_at_once_is_computed_once():
    """The warm start and a press (or two visitors) asking for the same view: the second waits for the first."""
    memo = BytesMemo("test.single", max_bytes=1 * MB)
    inside, release, calls, got = threading.Event(), threading.Event(), [], []

    def slow():
        calls.append(1)
        inside.set()
        assert release.wait(10)
        return np.arange(3)

    first = threading.Thread(target=lambda: got.append(memo.get_or_compute("k", slow)))
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=lambda: got.append(memo.get_or_compute("k", slow)))
    second.start()
    assert memo.get_or_compute("other", lambda: np.zeros(1)).shape == (1,)  # another key is not held up
    second.join(0.3)
    assert second.is_alive() and len(calls) == 1  # waiting for the first, not computing beside it
    release.set()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and len(got) == 2 and got[0] is got[1]


def test_bytes_memoized_computes_once_per_arguments_and_clears():
    calls = []

    @bytes_memoized("test.decorated", max_bytes=1 * MB)
    def square(x: int) -> np.ndarray:
        calls.append(x)
        return np.full(1000, x * x)

    assert int(square(3)[0]) == 9 and int(square(3)[0]) == 9 and calls == [3]
    assert len(square.memo) == 1
    square.cache_clear()
    square(3)
    assert calls == [3, 3]


def test_the_apps_memos_are_bounded_by_bytes():
    from mlse.data import contamination, stsb
    from mlse.runs import results_index
    from mlse.ui import gold_tab, tatoeba_views

    memos = [
        results_index._memo,
        tatoeba_views._memo,
        gold_tab._memo,
        stsb._parse_sts_cached.memo,
        contamination._evaluation_sentences.memo,
    ]
    assert all(isinstance(m, BytesMemo) and 0 < m.max_bytes <= 256 * MB for m in memos)
