"""The one protocol every model in mlse satisfies (MTEB style): ``encode(texts) -> float32 [n, d]``, an identity, and
a pair's scores: ``calibrate(cosine)`` (-> its 0-5 score where a calibration was fitted for the model, else None) and
``similarity(sentences1, sentences2)`` (-> the cosine and the calibrated score of each pair).

Backbones, the embedding cache, calibrated backbones and scorers all satisfy it and get ``calibrate`` and
``similarity`` from :class:`Scoring`. :func:`similarity` is the one place a pair's cosine and calibrated score are
computed, and :func:`cosine_predictions` the one cosine of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from mlse.errors import MlseError


@runtime_checkable
class Encoder(Protocol):
    """What every model in mlse satisfies (MTEB style)."""

    name: str

    @property
    def identity(self) -> str:
        """A string that changes whenever the encoder's outputs could change (used as the cache key)."""

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Embed ``texts`` -> float32 array [n, d] (rows L2-normalised when ``normalize``)."""

    def calibrate(self, cosine: np.ndarray) -> np.ndarray | None:
        """Cosine [n] -> the calibrated 0-5 score [n], or None when no calibration was fitted for this model."""

    def similarity(
        self, sentences1: Sequence[str], sentences2: Sequence[str], *, batch_size: int = 64
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(cosine [n], calibrated 0-5 [n] or None) of ``sentences1[i]`` vs ``sentences2[i]``."""


class Similarity(NamedTuple):
    """A pair's (or each pair's) cosine in [-1, 1] and calibrated 0-5 score (None: the model has no calibration)."""

    cosine: Any
    score: Any


class Scoring:
    """``calibrate`` and ``similarity`` for a class that has ``encode``: every encoder class of mlse inherits them.
    ``calibrate`` applies ``calibration`` (a callable cosine -> 0-5, or None: not calibrated); a model calibrated
    another way (a scorer's Stage-2 head) overrides ``calibrate``."""

    calibration: Callable[[np.ndarray], np.ndarray] | None = None

    def calibrate(self, cosine: np.ndarray) -> np.ndarray | None:
        return None if self.calibration is None else np.asarray(self.calibration(cosine), dtype=np.float32)

    def similarity(self, sentences1: str | Sequence[str], sentences2: str | Sequence[str], *, batch_size: int = 64):
        """``Similarity(cosine, score)`` of each pair (:func:`similarity`); of one pair when given two strings."""
        if isinstance(sentences1, str) and isinstance(sentences2, str):
            cos, score = similarity(self, [sentences1], [sentences2], batch_size=batch_size)
            return Similarity(float(cos[0]), None if score is None else float(score[0]))
        if isinstance(sentences1, str) or isinstance(sentences2, str):
            raise MlseError("similarity: give two sentences or two lists of sentences, not one of each")
        return similarity(self, sentences1, sentences2, batch_size=batch_size)


def similarity(
    model, sentences1: Sequence[str], sentences2: Sequence[str], *, batch_size: int = 64, encode: Callable | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """(cosine [n] in [-1, 1], calibrated 0-5 [n] or None) of ``sentences1[i]`` vs ``sentences2[i]`` under ``model``.

    Both sides are encoded in one call (a text on both sides is encoded once). ``encode(model, texts)``: another way
    to get the embeddings (the app's micro-batcher); default ``model.encode``.
    """
    s1, s2 = list(sentences1), list(sentences2)
    if len(s1) != len(s2):
        raise MlseError(f"similarity: {len(s1)} first sentences but {len(s2)} second sentences")
    if not s1:
        return np.zeros(0, dtype=np.float32), None
    texts = [*s1, *s2]
    emb = encode(model, texts) if encode is not None else model.encode(texts, batch_size=batch_size)  # [2n, d]
    emb = np.asarray(emb, dtype=np.float32)
    cos = np.clip(cosine_predictions(emb[: len(s1)], emb[len(s1) :]), -1.0, 1.0).astype(np.float32)  # [n], shown
    calibrated = model.calibrate(cos)
    return Similarity(cos, None if calibrated is None else np.asarray(calibrated, dtype=np.float32))


def cosine_predictions(emb1: np.ndarray, emb2: np.ndarray) -> np.ndarray:
    """Row-wise cosine between two [n, d] embedding matrices -> [n] float64.
    Rows need not be normalised. A pair with an all-zero vector gets 0 rather than NaN, so one degenerate sentence
    cannot make a metric NaN. A cosine rounded an ulp past +-1 is left there: clipping would tie nearly parallel pairs
    and change their ranking."""
    a = np.asarray(emb1, dtype=np.float64)
    b = np.asarray(emb2, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"emb1 and emb2 must be 2-D arrays of equal shape, got {a.shape} and {b.shape}")
    dots = np.einsum("nd,nd->n", a, b)  # [n]
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)  # [n]
    out = np.zeros(a.shape[0], dtype=np.float64)
    ok = norms > 0
    out[ok] = dots[ok] / norms[ok]
    return out
