"""One stop signal for a whole job: the Stop button, the time budget and the preparation's own limit, asked in every
phase. One :class:`StopSignal` (a parameter named ``stop`` everywhere) is passed through every phase of a job (data,
encoding, teacher targets, epochs, dev evaluations, saving), so each can end the job within seconds; a bare event or
predicate is wrapped in one (``StopSignal(event)``, ``StopSignal(also=...)``).

Two clocks: by default the budget counts from the signal's creation. With ``preparation_s``, **preparation**
(loading and one-off encoding) has its own limit from the job's start, and the **budget** counts from
:meth:`StopSignal.start_budget` (training begins), so a short budget is not spent encoding on a fresh cache.
:func:`encode_in_chunks` makes encoding stoppable: a stop loses at most one chunk; the rest stays cached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

ShouldStop = Callable[[], bool]
# on_encoding(done, total, texts_per_s, cached): ``cached`` of the ``done`` texts came from the embedding cache; the
# rate counts only the others (None until one was encoded)
OnEncoding = Callable[[int, int, float | None, int], None]

# A chunk is sized to take about this long, so that a stop is noticed within a few seconds even on a slow model.
_CHUNK_TARGET_S = 1.5
_MAX_CHUNK_BATCHES = 16


def _now() -> float:
    """The budget's clock (a module-level function, so a test can move time on without sleeping)."""
    return time.monotonic()


class Stopped(Exception):
    """A job was stopped (button or budget) before it had anything worth keeping; the message says where."""


class StopSignal:
    """The Stop button (a :class:`threading.Event`) plus the job's budget (and preparation limit), asked as one."""

    def __init__(
        self,
        event: threading.Event | None = None,
        budget_s: float | None = None,
        *,
        also: ShouldStop | None = None,
        **limits,
    ):
        """``event``: the Stop button (default a fresh one); ``also``: a further condition that stops the job as the
        button does (asked at every check); ``budget_s`` and ``limits``: see :meth:`limit`."""
        self.event = event or threading.Event()
        self.also = also
        self.limit(budget_s, **limits)

    def set(self) -> None:
        """Stop now (the Stop button): every phase asking the signal ends at its next check."""
        self.event.set()

    def is_set(self) -> bool:
        """Whether Stop was pressed (not whether time is up: :meth:`reason` says which)."""
        return self.event.is_set()

    def limit(
        self,
        budget_s: float | None,
        *,
        started: float | None = None,
        preparation_s: float | None = None,
        on_encoding: OnEncoding | None = None,
        on_budget_start: Callable[[float], None] | None = None,
    ) -> StopSignal:
        """Give this signal (the runner's, whose Stop button it already is) the job's budget -> itself.

        ``started``: the job's start (monotonic, so a child process can keep its parent's clock; default now).
        ``preparation_s`` None: the budget counts from ``started``; a number: it counts from :meth:`start_budget`, and
        preparing may take at most ``preparation_s`` seconds from ``started``. ``on_encoding``: told each encoding's
        progress while preparing; ``on_budget_start``: told the preparation's seconds when the budget starts."""
        self.budget_s, self.preparation_s = budget_s, preparation_s
        self.on_encoding, self.on_budget_start = on_encoding, on_budget_start
        self.started = _now() if started is None else started
        self.budget_started: float | None = self.started if preparation_s is None else None
        return self

    @property
    def preparing(self) -> bool:
        """True until the budget's clock has started."""
        return self.budget_started is None

    def start_budget(self) -> None:
        """Start the budget's clock now (once: training begins). A no-op when it runs already."""
        if self.budget_started is None:
            self.budget_started = _now()
            if self.on_budget_start is not None:
                self.on_budget_start(self.budget_started - self.started)

    def elapsed(self) -> float:
        """Seconds on the budget's clock (0 while preparing)."""
        return 0.0 if self.budget_started is None else _now() - self.budget_started

    def preparation_elapsed(self) -> float:
        """Seconds since the job started, up to the start of the budget's clock."""
        return (_now() if self.budget_started is None else self.budget_started) - self.started

    def reason(self) -> str | None:
        """``"stopped"`` (button or ``also``), ``"preparation"`` (its limit is up), ``"budget"`` (time is up) or None
        (go on)."""
        if self.event.is_set() or (self.also is not None and self.also()):
            return "stopped"
        if self.budget_started is None:
            if self.preparation_s is not None and self.preparation_elapsed() >= self.preparation_s:
                return "preparation"
            return None
        if self.budget_s is not None and self.elapsed() >= self.budget_s:
            return "budget"
        return None

    def should_stop(self) -> bool:
        return self.reason() is not None

    def check(self, phase: str) -> None:
        """Raise :class:`Stopped` naming ``phase`` when the job must end now."""
        reason = self.reason()
        if reason is not None:
            raise Stopped(self.describe(reason, phase))

    def describe(self, reason: str, phase: str) -> str:
        if reason == "budget":
            return f"the {self.budget_s / 60:.3g}-minute budget ran out while {phase}"
        if reason == "preparation":
            return (
                f"the {self.preparation_s / 60:.3g}-minute limit on preparing (loading and encoding, before the "
                f"budget starts) ran out while {phase}"
            )
        return f"stopped while {phase}"


def start_budget(stop: StopSignal | None) -> None:
    """:meth:`StopSignal.start_budget` where the signal is optional (training begins)."""
    if stop is not None:
        stop.start_budget()


def check(stop: StopSignal | None, phase: str) -> None:
    """:meth:`StopSignal.check` where the signal is optional (None: nothing can stop this call)."""
    if stop is not None:
        stop.check(phase)


def should_stop(stop: StopSignal | None) -> bool:
    """:meth:`StopSignal.should_stop` where the signal is optional."""
    return stop is not None and stop.should_stop()


def encode_in_chunks(
    encoder,
    texts: Sequence[str],
    *,
    stop: StopSignal | None,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
    **encode_kwargs,
) -> np.ndarray:
    """``encoder.encode(texts)`` a few batches at a time, asking ``stop`` between chunks.

    Chunks are sized to take about ``_CHUNK_TARGET_S``. ``progress(done, total)`` and, while preparing, the signal's
    :data:`OnEncoding` callback (first with ``done=0``) follow each chunk. ``stop`` None: one plain ``encode`` call.
    Raises :class:`Stopped` when stopped; chunks already encoded stay in the encoder's embedding cache.
    """
    texts = list(texts)
    if stop is None or not texts:
        return encoder.encode(texts, batch_size=batch_size, **encode_kwargs)
    on_encoding = stop.on_encoding if stop.preparing else None
    if on_encoding is not None:
        on_encoding(0, len(texts), None, 0)
    parts: list[np.ndarray] = []
    done, encoded, n_batches, began = 0, 0, 1, time.perf_counter()
    while done < len(texts):
        stop.check(f"encoding ({done} of {len(texts)} texts done and cached)")
        chunk = texts[done : done + n_batches * batch_size]
        t0 = time.perf_counter()
        before = _encoded_so_far(encoder)
        parts.append(encoder.encode(chunk, batch_size=batch_size, **encode_kwargs))
        seconds = time.perf_counter() - t0
        done += len(chunk)
        encoded += _newly_encoded(before, _encoded_so_far(encoder), len(chunk))
        if progress is not None:
            progress(done, len(texts))
        if on_encoding is not None:
            rate = encoded / max(time.perf_counter() - began, 1e-6) if encoded else None  # cached texts cost ~nothing
            on_encoding(done, len(texts), rate, done - encoded)
        per_batch = seconds / max(1, -(-len(chunk) // batch_size))
        n_batches = int(min(_MAX_CHUNK_BATCHES, max(1, _CHUNK_TARGET_S / max(per_batch, 1e-6))))
    return np.concatenate(parts)


def _encoded_so_far(encoder) -> int | None:
    """How many texts ``encoder`` has encoded itself (not served from its embedding cache) since it was made: a
    :class:`~mlse.encoders.cache.CachedEncoder`'s ``stats``; None for an encoder without them."""
    stats = getattr(encoder, "stats", None)
    value = stats.get("encoded") if isinstance(stats, dict) else None
    return value if isinstance(value, int) else None


def _newly_encoded(before: int | None, after: int | None, size: int) -> int:
    """Texts of a chunk of ``size`` that were encoded rather than found in the cache (all of them for an encoder
    without a cache; at most ``size``: other threads may add to the count)."""
    if before is None or after is None:
        return size
    return min(size, max(0, after - before))
