"""One stop signal for a whole job: the Stop button and the time budget, asked in every phase.

Why a module of its own: a training job spends its time in several places (reading data, encoding thousands of
sentences, teacher targets, epochs, dev evaluations, saving) and each of them must be able to end it within seconds.
Passing one :class:`StopSignal` (or just its :meth:`StopSignal.should_stop`) through those phases, instead of an event
here and a deadline there, keeps "the budget counts the whole job" true by construction: the clock starts when the
signal is made, at the start of the job.

:func:`encode_in_chunks` is the piece that makes the slowest phase, encoding, stoppable: it hands the encoder a few
batches at a time (the embedding cache stores each finished chunk), so a stop loses at most one chunk of work and a
rerun continues from what was cached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

ShouldStop = Callable[[], bool]

# A chunk is sized to take about this long, so that a stop is noticed within a few seconds even on a slow model.
_CHUNK_TARGET_S = 1.5
_MAX_CHUNK_BATCHES = 16


def _now() -> float:
    """The budget's clock (a module-level function, so a test can move time on without sleeping)."""
    return time.monotonic()


class Stopped(Exception):
    """A job was stopped (button or budget) before it had anything worth keeping; the message says where."""


class StopSignal:
    """The Stop button (a :class:`threading.Event`) plus the job's whole-time budget, asked as one."""

    def __init__(
        self, event: threading.Event | None = None, budget_s: float | None = None, started: float | None = None
    ):
        """``started``: when the budget's clock started (a monotonic time; default now). The clock is the system's
        monotonic clock, so a job continued in a child process can keep the clock its parent started."""
        self.event = event or threading.Event()
        self.budget_s = budget_s
        self.started = _now() if started is None else started

    def elapsed(self) -> float:
        return _now() - self.started

    def reason(self) -> str | None:
        """``"stopped"`` (button), ``"budget"`` (time is up) or None (go on)."""
        if self.event.is_set():
            return "stopped"
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
        return f"stopped while {phase}"


def check(should_stop: ShouldStop | None, phase: str) -> None:
    """:meth:`StopSignal.check` for code that was handed only a ``should_stop`` callable (or None)."""
    if should_stop is None:
        return
    signal = getattr(should_stop, "__self__", None)
    if isinstance(signal, StopSignal):
        signal.check(phase)
    elif should_stop():
        raise Stopped(f"stopped while {phase}")


def encode_in_chunks(
    encoder,
    texts: Sequence[str],
    *,
    should_stop: ShouldStop | None,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
    **encode_kwargs,
) -> np.ndarray:
    """``encoder.encode(texts)`` a few batches at a time, asking ``should_stop`` between chunks.

    The chunk grows or shrinks so one chunk takes about 1.5 s (at least one batch, at most 16), so a stop is
    honoured within seconds whatever the model's speed. ``progress(done, total)`` is called after every chunk.
    Raises :class:`Stopped` when stopped; chunks already encoded stay in the encoder's embedding cache.
    """
    texts = list(texts)
    if should_stop is None or not texts:
        return encoder.encode(texts, batch_size=batch_size, **encode_kwargs)
    parts: list[np.ndarray] = []
    done, n_batches = 0, 1
    while done < len(texts):
        check(should_stop, f"encoding ({done} of {len(texts)} texts done and cached)")
        chunk = texts[done : done + n_batches * batch_size]
        t0 = time.perf_counter()
        parts.append(encoder.encode(chunk, batch_size=batch_size, **encode_kwargs))
        seconds = time.perf_counter() - t0
        done += len(chunk)
        if progress is not None:
            progress(done, len(texts))
        per_batch = seconds / max(1, -(-len(chunk) // batch_size))
        n_batches = int(min(_MAX_CHUNK_BATCHES, max(1, _CHUNK_TARGET_S / max(per_batch, 1e-6))))
    return np.concatenate(parts)
