"""The micro-batcher: concurrent callers share encoder calls and each gets exactly the rows a call of its own gives."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np

from mlse.serving.batching import MicroBatcher
from mlse.ui.score_tab import score_pair
from tests.fake_encoder import FakeEncoder, fake_vector

N_THREADS = 20


class CallCostEncoder(FakeEncoder):
    """The fake encoder with a fixed cost per call (what batching saves: a model's per-call overhead) and a record of
    each call's size; thread-safe counts, since the batcher's callers are threads."""

    def __init__(self, seconds_per_call: float = 0.02, fail_on: str | None = None):
        super().__init__()
        self.seconds_per_call = seconds_per_call
        self.fail_on = fail_on
        self.call_sizes: list[int] = []
        self._lock = threading.Lock()

    def encode(self, texts, **kwargs):
        texts = list(texts)
        time.sleep(self.seconds_per_call)
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"cannot encode {self.fail_on!r}")
        with self._lock:
            self.call_sizes.append(len(texts))
            return super().encode(texts, **kwargs)


def _pairs(n: int) -> list[tuple[str, str]]:
    return [(f"first sentence {i}", f"second sentence {i}") for i in range(n)]


def _run_together(fn, items, threads: int = N_THREADS) -> list:
    """fn(item) for every item, released at once from ``threads`` threads; results in the items' order."""
    start = threading.Barrier(threads)

    def call(item):
        start.wait()
        return fn(item)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, items))


def test_concurrent_callers_get_their_own_rows_from_fewer_larger_calls():
    encoder, batcher = CallCostEncoder(), MicroBatcher()
    pairs = _pairs(N_THREADS)
    together = _run_together(lambda pair: batcher.encode(encoder, list(pair)), pairs)
    for (s1, s2), rows in zip(pairs, together, strict=True):
        np.testing.assert_array_equal(rows, np.stack([fake_vector(s1), fake_vector(s2)]))
    assert sum(encoder.call_sizes) == 2 * N_THREADS  # every text encoded exactly once
    assert len(encoder.call_sizes) <= N_THREADS // 4, encoder.call_sizes  # 20 callers, a handful of calls
    assert max(encoder.call_sizes) >= 10
    assert batcher.stats.requests == N_THREADS and batcher.stats.calls == len(encoder.call_sizes)


def test_a_lone_caller_gets_one_call_of_its_own():
    encoder, batcher = CallCostEncoder(seconds_per_call=0), MicroBatcher()
    for s1, s2 in _pairs(3):
        np.testing.assert_array_equal(batcher.encode(encoder, [s1, s2]), encoder.encode([s1, s2]))
    assert encoder.call_sizes == [2, 2] * 3  # the batcher's call and the reference call, alternating
    assert batcher.encode(encoder, []).shape[0] == 0


def test_a_batch_never_exceeds_max_texts_and_keeps_request_order():
    encoder, batcher = CallCostEncoder(), MicroBatcher(max_texts=6)
    pairs = _pairs(N_THREADS)
    together = _run_together(lambda pair: batcher.encode(encoder, list(pair)), pairs)
    assert max(encoder.call_sizes) <= 6 and sum(encoder.call_sizes) == 2 * N_THREADS
    assert all(np.array_equal(rows[0], fake_vector(p[0])) for p, rows in zip(pairs, together, strict=True))


def test_one_callers_bad_input_fails_only_that_caller():
    bad = "second sentence 7"
    encoder, batcher = CallCostEncoder(fail_on=bad), MicroBatcher()

    def call(pair):
        try:
            return batcher.encode(encoder, list(pair))
        except ValueError as exc:
            return exc

    outcomes = _run_together(call, _pairs(N_THREADS))
    assert isinstance(outcomes[7], ValueError) and bad in str(outcomes[7])
    good = [o for i, o in enumerate(outcomes) if i != 7]
    assert all(isinstance(o, np.ndarray) and o.shape == (2, 8) for o in good)
    assert batcher.stats.retried_alone >= 2  # the failed batch was split, not dropped


def test_different_encoders_are_batched_apart():
    first, second, batcher = CallCostEncoder(), CallCostEncoder(), MicroBatcher()
    first._identity, second._identity = "fake:a", "fake:b"
    jobs = [(first if i % 2 else second, pair) for i, pair in enumerate(_pairs(N_THREADS))]
    together = _run_together(lambda job: batcher.encode(job[0], list(job[1])), jobs)
    for (encoder, (s1, _)), rows in zip(jobs, together, strict=True):
        np.testing.assert_array_equal(rows[0], fake_vector(s1, identity=encoder.identity))
    assert sum(first.call_sizes) == sum(second.call_sizes) == N_THREADS


# -- through the Score-a-pair handler -------------------------------------------------------------------------------
def _fake_state(encoders: dict) -> SimpleNamespace:
    return SimpleNamespace(encoder=encoders.__getitem__, model_kind=lambda name: "backbone", batcher=MicroBatcher())


def test_score_pair_from_many_threads_matches_sequential_calls():
    encoders = {"a": CallCostEncoder(), "b": CallCostEncoder()}
    encoders["b"]._identity = "fake:b"
    state = _fake_state(encoders)
    pairs = _pairs(N_THREADS)
    sequential = [score_pair(state, s1, s2, ["a", "b"])[0] for s1, s2 in pairs]
    sequential_calls = {name: len(e.call_sizes) for name, e in encoders.items()}
    together = _run_together(lambda pair: score_pair(state, pair[0], pair[1], ["a", "b"])[0], pairs)
    for alone, shared in zip(sequential, together, strict=True):
        assert alone.equals(shared)
    for name, encoder in encoders.items():
        concurrent_calls = len(encoder.call_sizes) - sequential_calls[name]
        assert sequential_calls[name] == N_THREADS and concurrent_calls <= N_THREADS // 4, encoder.call_sizes


def test_score_pair_on_a_real_model_is_the_same_batched_or_not(tiny_bert, monkeypatch, tmp_path):
    """A transformer pads a batch to its longest text; the attention mask must keep every row as it is alone."""
    from mlse.serving.app_state import AppState

    name, pairs = str(tiny_bert), _pairs(8)
    pairs[3] = ("a much longer first sentence, so that this batch has to pad every other text to it", "short")
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "alone"))
    state = AppState(default_models=())
    alone = [score_pair(state, s1, s2, [name])[0] for s1, s2 in pairs]
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "together"))  # nothing may come from the first pass's cache
    state = AppState(default_models=())
    together = _run_together(lambda pair: score_pair(state, pair[0], pair[1], [name])[0], pairs, threads=len(pairs))
    assert state.batcher.stats.calls < len(pairs)
    for a, b in zip(alone, together, strict=True):
        # written with 3 decimals: a difference under 2e-4 may still land on either side of a rounding boundary
        np.testing.assert_allclose(a["cosine"].astype(float), b["cosine"].astype(float), atol=1e-3 + 1e-9)


def test_a_lone_caller_does_not_wait_for_company(monkeypatch):
    slept: list[float] = []
    batcher_globals = MicroBatcher.encode.__globals__  # the batcher's module, wherever it lives
    monkeypatch.setitem(batcher_globals, "time", SimpleNamespace(sleep=slept.append))  # its window, recorded
    encoder, batcher = CallCostEncoder(seconds_per_call=0), MicroBatcher(window_s=0.5)
    for s1, s2 in _pairs(3):
        batcher.encode(encoder, [s1, s2])
    assert slept == [] and encoder.call_sizes == [2, 2, 2]  # three calls, no window slept
    assert batcher._inside == 0
    batcher._inside = 1  # another caller inside the batcher (for any encoder): now the window is worth waiting
    batcher.encode(encoder, ["company"])
    assert slept == [0.5] and batcher._inside == 1
