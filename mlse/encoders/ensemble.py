"""Several encoders as one: each member's unit embedding, concatenated and scaled by ``1 / sqrt(k)``.

The result is a unit vector, and the cosine of two such vectors is the **mean of the members' cosines**, whatever
their dimensions. Satisfies the :class:`~mlse.encoders.protocol.Encoder` protocol; each member encodes through its
own embedding cache, the ensemble caches nothing of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlse.encoders.protocol import Scoring
from mlse.errors import MlseError


class EnsembleEncoder(Scoring):
    def __init__(self, members: Sequence, name: str | None = None):
        if len(members) < 2:
            raise MlseError(f"an ensemble needs at least two encoders, got {len(members)}")
        self.members = list(members)
        self.name = name or "+".join(getattr(m, "name", "?") for m in self.members)

    @property
    def identity(self) -> str:
        return "ensemble(" + ",".join(m.identity for m in self.members) + ")"

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """[n, sum of the members' dimensions], unit rows whatever ``normalize`` says (the scale is the point)."""
        scale = np.float32(1.0 / np.sqrt(len(self.members)))  # each member's unit rows -> norm 1 / sqrt(k)
        parts = [
            m.encode(texts, normalize=True, batch_size=batch_size, show_progress=show_progress) for m in self.members
        ]  # each [n, d_i]
        return np.concatenate(parts, axis=1).astype(np.float32, copy=False) * scale
