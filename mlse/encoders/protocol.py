"""The one protocol every model in mlse satisfies (MTEB style): ``encode(texts) -> float32 [n, d]`` plus an identity.

Backbones (:mod:`mlse.encoders.torch`, :mod:`mlse.encoders.onnx.runtime`, :mod:`mlse.encoders.use`), the embedding
cache (:mod:`mlse.encoders.cache`) and scorers (:mod:`mlse.heads.scorer`) all satisfy it, so the evaluation
runners, the training code and the app take any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


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
