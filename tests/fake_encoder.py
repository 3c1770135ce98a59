"""A deterministic, counting stand-in for a sentence encoder (importable by spawned worker processes).

Vectors are derived from sha256(identity | text), so they are exact (bit-for-bit) and depend on the identity: two fakes
with different identities ("weights") give different vectors for the same text.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlse.encoders.protocol import Scoring

DIM = 8


def fake_vector(text: str, *, identity: str = "fake:v1", normalize: bool = True) -> np.ndarray:
    """The exact float32 row the fake encoder returns for ``text``."""
    digest = hashlib.sha256(f"{identity}|{text}".encode("utf-8", "surrogatepass")).digest()
    raw = np.frombuffer(digest[: DIM * 2], dtype=np.uint16).astype(np.float32)  # [DIM]
    vec = (raw - np.float32(32767.5)) / np.float32(32768.0)
    if normalize:
        vec = vec / np.linalg.norm(vec)
    return vec.astype(np.float32)


class FakeEncoder(Scoring):
    """Satisfies :class:`mlse.encoders.Encoder` (uncalibrated unless ``calibration`` is set); counts calls and texts
    encoded."""

    def __init__(self, identity: str = "fake:v1", name: str = "fake"):
        self.name = name
        self._identity = identity
        self.calls = 0
        self.texts_encoded = 0
        self.seen: list[str] = []

    @property
    def identity(self) -> str:
        return self._identity

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        self.calls += 1
        self.texts_encoded += len(texts)
        self.seen.extend(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([fake_vector(t, identity=self._identity, normalize=normalize) for t in texts])  # [n, DIM]


class SlowFakeEncoder(FakeEncoder):
    """The fake encoder at the speed of a big model on a small CPU: ``seconds_per_text`` of sleep per text encoded.

    Lets a test see whether a job notices Stop or its budget *during* encoding without a real model's cost.
    """

    def __init__(self, seconds_per_text: float = 0.005, identity: str = "fake:slow", name: str = "slow-fake"):
        super().__init__(identity=identity, name=name)
        self.seconds_per_text = seconds_per_text

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        import time

        texts = list(texts)
        time.sleep(self.seconds_per_text * len(texts))
        return super().encode(texts, normalize=normalize, batch_size=batch_size, show_progress=show_progress)


def worker_texts(worker: int, n_workers: int, per_worker: int = 300, overlap: int = 150) -> list[str]:
    """Overlapping text sets: worker w gets texts [w*(per-overlap), w*(per-overlap)+per)."""
    start = worker * (per_worker - overlap)
    return [f"sentence number {i}" for i in range(start, start + per_worker)]


def _worker_main(cache_dir: str, worker: int, n_workers: int, rounds: int, go_file: str) -> None:
    """Run in a separate process: wait for the start signal, then encode this worker's texts in several rounds."""
    import time

    os.environ["MLSE_CACHE"] = cache_dir
    from mlse.encoders.cache import CachedEncoder

    deadline = time.monotonic() + 30
    while not Path(go_file).exists():  # start all workers at (nearly) the same moment
        if time.monotonic() > deadline:
            raise SystemExit("no start signal")
        time.sleep(0.005)
    texts = worker_texts(worker, n_workers)
    enc = CachedEncoder(FakeEncoder())
    step = max(1, len(texts) // rounds)
    for r in range(rounds):
        chunk = texts[r * step : (r + 1) * step] if r < rounds - 1 else texts[r * step :]
        out = enc.encode(chunk)
        expected = np.stack([fake_vector(t) for t in chunk])
        if not np.array_equal(out, expected):
            raise SystemExit(f"worker {worker}: wrong vectors in round {r}")
    out = enc.encode(texts)  # everything again: must all come back right
    if not np.array_equal(out, np.stack([fake_vector(t) for t in texts])):
        raise SystemExit(f"worker {worker}: wrong vectors on re-read")
    print(f"worker {worker} ok {enc.stats['encoded']} {enc.stats['served']}")


if __name__ == "__main__":
    _worker_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
