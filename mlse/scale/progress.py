"""Progress of a scale job on stderr: ``rows done / total (percent), rows/s, ETA``, at most one whole line every
:data:`EVERY_S` seconds (no carriage returns, so a log file stays readable), and a last line at the end."""

from __future__ import annotations

import math
import sys
import time

EVERY_S = 5.0


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """``update(done)`` after each chunk; rates count the rows of this session only (a resumed job's earlier rows
    are done but were not timed here)."""

    def __init__(self, what: str, total: int, done: int = 0, stream=None, every: float = EVERY_S):
        self.what, self.total, self.start_done = what, total, done
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.started = self.last = time.monotonic()
        self.done = done

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        rate = self.rate()
        eta = (self.total - self.done) / rate if rate > 0 else None
        share = 100 * self.done / self.total if self.total else 100
        return (
            f"{self.what}: {self.done:,} / {self.total:,} rows ({share:.0f}%), {rate:,.0f} rows/s, ETA {duration(eta)}"
        )

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self.last >= self.every and done < self.total:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        print(self.line().split(", ETA")[0], file=self.stream, flush=True)
