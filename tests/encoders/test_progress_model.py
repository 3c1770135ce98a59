"""mlse.encoders.progress: one progress model (what, n of N, an honest rate and ETA) for the command line, the scale
pipeline and the app; the rate counts the items computed over the whole elapsed time, so rows the embedding cache
served (a cached first chunk) or a resumed job had done do not inflate it."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from mlse.encoders.cache import CachedEncoder
from mlse.encoders.progress import CacheCounter, Progress, ProgressLog, cache_stats, duration, rate_text
from mlse.heads.scorer import Scorer
from tests.fake_encoder import FakeEncoder


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_rate_and_eta_over_the_whole_elapsed_time():
    clock = Clock()
    job = Progress("scoring", 1000, started=clock.now, clock=clock)
    assert job.rate() is None and job.eta() is None  # nothing computed yet: no rate, no made-up ETA
    assert job.line() == "scoring: 0 / 1,000 rows (0%), measuring the rate"
    clock.now += 10
    job.update(100)
    assert job.rate() == pytest.approx(10.0) and job.eta() == pytest.approx(90.0)
    assert job.line() == "scoring: 100 / 1,000 rows (10%), 10 rows/s, ETA 1m30s"
    clock.now += 40  # a slow stretch: the rate is the whole job's (100 + 100 rows in 50 s), not the last chunk's
    job.update(200)
    assert job.rate() == pytest.approx(4.0) and job.line().endswith("4.0 rows/s, ETA 3m20s")
    job.update(1000)
    assert job.finished and job.eta() == 0.0 and job.line() == "scoring: 1,000 / 1,000 rows (100%), 20 rows/s"


def test_rows_served_from_the_cache_do_not_inflate_the_rate():
    """The issue's case: a first chunk of 256 rows from the cache in 0.065 s read as 3,937 rows/s; the real rate was
    6-12 rows/s."""
    clock = Clock()
    job = Progress("scoring", 10_000, started=clock.now, clock=clock)
    clock.now += 0.065
    job.update(256, encoded=0)
    assert job.rate() is None and job.served == 256
    assert job.line() == "scoring: 256 / 10,000 rows (2%), 256 from the cache, measuring the rate"
    clock.now += 30
    job.update(512, encoded=256)  # the next chunk encoded: 256 rows in ~30 s
    assert job.rate() == pytest.approx(256 / 30.065) and 8 < job.rate() < 9
    assert job.eta() == pytest.approx((10_000 - 512) / job.rate())


def test_a_resumed_job_times_only_its_own_rows_and_counts_without_rates():
    clock = Clock()
    job = Progress("embed", 100, 60, resumed=60, started=clock.now, clock=clock)
    clock.now += 4
    job.update(80)
    assert job.computed == 20 and job.rate() == pytest.approx(5.0) and job.eta() == pytest.approx(4.0)
    assert Progress("loading the models", 3, 1, unit="models", timed=False).line() == (
        "loading the models: 1 / 3 models (33%)"
    )
    assert Progress("reading the file").line() == "reading the file" and Progress("x").fraction() is None
    assert Progress("encoding", 10, 4, unit="texts", measured=2.0).line() == (
        "encoding: 4 / 10 texts (40%), 2.0 texts/s, ETA 3s"
    )


def test_formats():
    assert [duration(s) for s in (None, float("inf"), 0.4, 59, 61, 3599, 3600, 7325)] == [
        "?",
        "?",
        "0s",
        "59s",
        "1m01s",
        "59m59s",
        "1h00m",
        "2h02m",
    ]
    assert [rate_text(r) for r in (0.04, 6.26, 10, 3937.2)] == ["0.0", "6.3", "10", "3,937"]


def test_the_log_prints_whole_lines_now_and_then_and_a_last_line(monkeypatch):
    stream = io.StringIO()
    log = ProgressLog("embed", 10, 2, stream=stream, every=0.0)
    log.update(6)
    log.update(10)  # finished: no running line, the last line comes with close()
    log.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in stream.getvalue()
    assert re.fullmatch(r"embed: 6 / 10 rows \(60%\), [\d,.]+ rows/s, ETA \d+s", lines[0]), lines
    assert re.fullmatch(r"embed: 10 / 10 rows \(100%\), [\d,.]+ rows/s", lines[1]), lines
    quiet = io.StringIO()
    slow = ProgressLog("embed", 10, stream=quiet, every=3600.0)
    slow.update(5)
    assert quiet.getvalue() == "" and slow.done == 5


def test_the_cache_counter_reads_the_embedding_caches_counts(tmp_path: Path):
    cached = CachedEncoder(FakeEncoder("fake:count"), root=tmp_path)
    scorer = Scorer(cached)  # a scorer's backbone holds the cache
    assert cache_stats(scorer) is cached.stats and cache_stats(FakeEncoder()) is None
    cached.encode(["a", "b"])
    counter = CacheCounter([cached, scorer])  # the same cache twice: counted once
    assert counter.share() is None and counter.items(10) is None  # nothing asked since it was made
    cached.encode(["a", "b", "c", "d"])  # a, b served; c, d encoded
    assert counter.share() == pytest.approx(0.5) and counter.items(10) == 5
    assert CacheCounter([FakeEncoder()]).items(10) is None  # no cache: every item counts as computed
