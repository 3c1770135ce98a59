"""Progress of long work, one model for every place that shows it: the command line (whole lines on stderr), the scale
pipeline (``mlse embed``), the app's pages (a ``gr.Progress`` text, the warm start's note) and the fine-tune tab.

:class:`Progress`: n of N and an honest rate and ETA, counting only items computed since the start (not resumed ones,
nor those served from the embedding cache: a cached first chunk must not announce thousands of rows a second) over
the whole elapsed time (:class:`CacheCounter` tells how many were computed). :class:`ProgressLog` prints whole lines,
so a log stays readable; tqdm bars are drawn only on a terminal (:func:`show_bar`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

AUTO_MIN_TEXTS = 1000  # show_progress=None: a bar for this many texts or more
EVERY_S = 5.0  # ProgressLog: at most one line per this many seconds


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h10m``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def rate_text(rate: float) -> str:
    """``6.3`` below ten a second (a slow model's rate must not read 6 or 0), ``1,240`` above."""
    return f"{rate:.1f}" if rate < 10 else f"{rate:,.0f}"


@dataclass
class Progress:
    """What is happening and how far it got: ``done`` of ``total`` ``unit``, since ``started`` (a monotonic time).
    ``encoded``: of the items done since ``started``, how many were computed (None: all); ``resumed``: items done
    before ``started``, not in the rate. ``measured``: a rate measured elsewhere, used instead of timing here.
    ``total`` 0: a step without a count, shown by its name alone."""

    what: str
    total: int = 0
    done: int = 0
    unit: str = "rows"
    encoded: int | None = None
    resumed: int = 0
    started: float = field(default_factory=time.monotonic)
    measured: float | None = None
    timed: bool = True  # False: a count without a rate (models loaded: 1 / 3)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def update(self, done: int, *, total: int | None = None, encoded: int | None = None) -> Progress:
        self.done = int(done)
        if total is not None:
            self.total = int(total)
        self.encoded = None if encoded is None else int(encoded)
        return self

    @property
    def computed(self) -> int:
        """Items computed since ``started`` (not resumed, not from the cache)."""
        fresh = max(0, self.done - self.resumed)
        return fresh if self.encoded is None else min(max(0, self.encoded), fresh)

    @property
    def served(self) -> int:
        """Items done since ``started`` that came from the cache."""
        return max(0, self.done - self.resumed) - self.computed

    @property
    def finished(self) -> bool:
        return self.total > 0 and self.done >= self.total

    def elapsed(self) -> float:
        return max(0.0, self.clock() - self.started)

    def rate(self) -> float | None:
        """Items computed per second over the whole elapsed time; None before the first one was computed."""
        if not self.timed:
            return None
        if self.measured is not None:
            return self.measured if self.measured > 0 and math.isfinite(self.measured) else None
        elapsed, computed = self.elapsed(), self.computed
        return computed / elapsed if computed > 0 and elapsed > 0 else None

    def eta(self) -> float | None:
        """Seconds left, the rest taken at :meth:`rate` (a rest found in the cache goes faster); 0 when finished,
        None while the rate is unknown."""
        if self.finished:
            return 0.0
        rate = self.rate()
        return None if rate is None or self.total <= 0 else (self.total - self.done) / rate

    def fraction(self) -> float | None:
        """Share done, None for a step without a count."""
        return min(1.0, self.done / self.total) if self.total > 0 else None

    def line(self, *, eta: bool = True) -> str:
        """``scoring: 512 / 1,000 rows (51%), 12 rows/s, ETA 40s``; with cached rows ``..., 256 from the cache``;
        before anything was computed ``..., measuring the rate``."""
        if self.total <= 0:
            return self.what
        share = math.floor(100 * self.done / self.total)
        parts = [f"{self.what}: {self.done:,} / {self.total:,} {self.unit} ({share}%)"]
        if self.served and self.encoded is not None:
            parts.append(f"{self.served:,} from the cache")
        rate = self.rate()
        if rate is not None:
            parts.append(f"{rate_text(rate)} {self.unit}/s")
            if eta and not self.finished:
                parts.append(f"ETA {duration(self.eta())}")
        elif eta and self.timed and not self.finished:
            parts.append("measuring the rate")
        return ", ".join(parts)


# -- how much was computed ------------------------------------------------------------------------------------------
def cache_stats(model) -> dict | None:
    """The embedding cache's ``stats`` inside ``model`` (its calibration wrapper, a scorer's backbone), or None."""
    for _ in range(8):
        if model is None:
            return None
        stats = getattr(model, "stats", None)
        if isinstance(stats, dict) and "encoded" in stats and "served" in stats:
            return stats
        inner = getattr(model, "__dict__", {})
        model = inner.get("backbone") or inner.get("inner")
    return None


class CacheCounter:
    """The share of the texts asked for since it was made that were encoded rather than served from the embedding
    cache, over ``models``. An estimate: the caches' counts are shared with whatever else uses the same model.
    """

    def __init__(self, models: Iterable[object]):
        stats = [cache_stats(model) for model in models]
        self._stats = [] if None in stats else list({id(s): s for s in stats}.values())  # each cache once
        self._start = [(s["encoded"], s["served"]) for s in self._stats]

    def share(self) -> float | None:
        """Encoded / asked since the counter was made; None when there is nothing to count (no cache, nothing asked)."""
        if not self._stats:
            return None
        encoded = sum(s["encoded"] - e for s, (e, _) in zip(self._stats, self._start))
        served = sum(s["served"] - v for s, (_, v) in zip(self._stats, self._start))
        return encoded / (encoded + served) if encoded + served > 0 else None

    def items(self, done: int) -> int | None:
        """Of ``done`` items, about how many were computed (None: all, as far as can be told)."""
        share = self.share()
        return None if share is None else round(done * share)


# -- whole lines on a stream ----------------------------------------------------------------------------------------
class ProgressLog:
    """A :class:`Progress` printed on ``stream`` (stderr) at most once every ``every`` seconds while it runs, whole
    lines only, and a last line (without ETA) at :meth:`close`; ``say``: a function given each line instead. ``done``:
    items a resumed job had done already."""

    def __init__(
        self, what: str, total: int, done: int = 0, stream=None, every: float = EVERY_S, unit: str = "rows", say=None
    ):
        self.progress = Progress(what, total, done, unit=unit, resumed=done)
        self.stream = stream if stream is not None else sys.stderr
        self.say = say or (lambda line: print(line, file=self.stream, flush=True))  # or each line to ``say``
        self.every = every
        self.last = self.progress.started

    @property
    def done(self) -> int:
        return self.progress.done

    def update(self, done: int, encoded: int | None = None) -> None:
        self.progress.update(done, encoded=encoded)
        now = self.progress.clock()
        if now - self.last >= self.every and not self.progress.finished:
            self.last = now
            self.say(self.progress.line())

    def close(self) -> None:
        self.say(self.progress.line(eta=False))


# -- tqdm bars on a terminal ----------------------------------------------------------------------------------------
def show_bar(show_progress: bool | None, n_texts: int) -> bool:
    """Whether to draw a bar: asked for (None: ``n_texts >= AUTO_MIN_TEXTS``) and stderr is a terminal."""
    wanted = n_texts >= AUTO_MIN_TEXTS if show_progress is None else bool(show_progress)
    if not wanted:
        return False
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


def progress_bar(total: int, desc: str, show: bool):
    """A tqdm bar on stderr; with ``show`` False one that draws nothing (tqdm comes with transformers and the hub)."""
    from tqdm.auto import tqdm  # lazy: only a long encode draws a bar

    return tqdm(total=total, desc=desc, unit="text", disable=not show)
