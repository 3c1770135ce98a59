"""The preparation's encoding count (mlse.stop_signal.encode_in_chunks -> the signal's on_encoding -> the job's
``encoding`` record): texts found in the embedding cache are counted apart and left out of the rate, so a cached
chunk no longer shows a rate hundreds of times the model's (issue 48: "3,937 rows/s after a cached chunk when the
real rate was 6-12 rows/s"). A fake clock moves only while the fake model encodes, so the rates are exact."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import mlse.stop_signal
from mlse.encoders.cache import CachedEncoder
from mlse.stop_signal import StopSignal, encode_in_chunks
from mlse.train.jobs import encoding_record
from tests.fake_encoder import FakeEncoder, fake_vector

SECONDS_PER_TEXT = 0.01  # the fake model encodes 100 texts a second; a cache lookup takes no time on the fake clock


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TimedEncoder(FakeEncoder):
    """A fake model whose every encoded text moves the clock on by SECONDS_PER_TEXT."""

    def __init__(self, clock: Clock):
        super().__init__()
        self.clock = clock

    def encode(self, texts, **kwargs):
        self.clock.now += SECONDS_PER_TEXT * len(texts)
        return super().encode(texts, **kwargs)


@pytest.fixture()
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(mlse.stop_signal, "time", SimpleNamespace(perf_counter=clock, monotonic=clock))
    return clock


def _encode(encoder, texts) -> tuple[np.ndarray, list[tuple]]:
    seen: list[tuple] = []
    stop = StopSignal(preparation_s=1e6, on_encoding=lambda *told: seen.append(told))  # preparing: counts are told
    return encode_in_chunks(encoder, texts, stop=stop, batch_size=16), seen


def test_cached_texts_are_counted_apart_and_left_out_of_the_rate(clock, tmp_path):
    texts = [f"sentence {i}" for i in range(300)]
    model = TimedEncoder(clock)
    CachedEncoder(model, root=tmp_path).encode(texts[:200])  # an earlier run cached the first 200
    encoder = CachedEncoder(model, root=tmp_path)
    rows, seen = _encode(encoder, texts)
    assert np.allclose(rows, np.stack([fake_vector(t) for t in texts]), atol=1e-6)
    assert seen[0] == (0, 300, None, 0)
    first = seen[1]  # one batch, all of it from the cache: no rate yet, rather than thousands of texts a second
    assert first == (16, 300, None, 16)
    done, total, rate, cached = seen[-1]
    assert (done, total, cached) == (300, 300, 200)
    assert rate == pytest.approx(1 / SECONDS_PER_TEXT)  # 100 encoded in 1 s: the model's rate, not 300/s
    assert all(c <= d for d, _, _, c in seen) and [d for d, *_ in seen] == sorted(d for d, *_ in seen)


def test_without_a_cache_every_text_counts(clock):
    _, seen = _encode(TimedEncoder(clock), [f"t {i}" for i in range(100)])
    done, _, rate, cached = seen[-1]
    assert done == 100 and cached == 0 and rate == pytest.approx(1 / SECONDS_PER_TEXT)


def test_the_record_says_how_many_came_from_the_cache():
    record = encoding_record(12_000, 15_000, 45.2, 0.5, cached=3_000)
    assert record["cached"] == 3_000 and record["done"] == 12_000
    assert record["message"].startswith("preparing: encoding 12,000 of 15,000 texts (3,000 cached), 45 texts/s")
    assert encoding_record(10, 20, 5.0, 0.5)["message"].startswith("preparing: encoding 10 of 20 texts, 5 texts/s")
