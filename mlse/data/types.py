"""Containers every loader returns, so evaluation code never cares where the data came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlse.errors import DataError


@dataclass
class ScoredPairs:
    """Sentence pairs with a gold similarity score each (STS: 0-5; user files: any real scale).

    ``sources`` lists the files the pairs were read from, so reports can cite (and hash) them."""

    s1: list[str]
    s2: list[str]
    scores: np.ndarray
    name: str
    sources: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        # float32 is plenty for gold scores and halves memory next to float64 embeddings maths.
        self.scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if not (len(self.s1) == len(self.s2) == len(self.scores)):
            raise DataError(
                f"{self.name}: s1, s2 and scores must have equal lengths, "
                f"got {len(self.s1)}, {len(self.s2)} and {len(self.scores)}"
            )
        self.sources = [Path(p) for p in self.sources]

    def __len__(self) -> int:
        return len(self.s1)


@dataclass
class ParallelCorpus:
    """Line-aligned translations: ``src[i]`` and ``tgt[i]`` mean the same thing."""

    src: list[str]
    tgt: list[str]
    src_lang: str
    tgt_lang: str
    name: str
    sources: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise DataError(
                f"{self.name}: src and tgt must have equal lengths, got {len(self.src)} and {len(self.tgt)}"
            )
        self.sources = [Path(p) for p in self.sources]

    def __len__(self) -> int:
        return len(self.src)
