"""``align_tokens``: contextual word similarity between two sentences, each word's best match in the other.

**Not** an explanation of the score (that is :func:`mlse.explain.explain_pair`): a cheap companion view comparing the
last-layer token vectors, averaged over each word's pieces, by cosine. Special tokens and the prefix are left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mlse.explain.backbones import attributable
from mlse.explain.explanation import check_sentences
from mlse.explain.words import merge_words


@dataclass(frozen=True)
class Alignment:
    """``similarity`` [len(words1), len(words2)]: cosine of the words' contextual vectors; ``best1[i]``: the column
    of word i's best match in sentence 2, ``best2[j]``: the row of word j's best match in sentence 1."""

    model: str
    words1: tuple[str, ...]
    words2: tuple[str, ...]
    similarity: np.ndarray
    best1: tuple[int, ...]
    best2: tuple[int, ...]
    seconds: float

    def matches1(self) -> list[tuple[str, str, float]]:
        """(word of sentence 1, its best match in sentence 2, cosine), in sentence order."""
        return [
            (w, self.words2[j], float(self.similarity[i, j])) for i, (w, j) in enumerate(zip(self.words1, self.best1))
        ]

    def mutual(self) -> list[tuple[str, str, float]]:
        """Pairs that are each other's best match (a one-to-one alignment)."""
        return [
            (self.words1[i], self.words2[j], float(self.similarity[i, j]))
            for i, j in enumerate(self.best1)
            if self.best2[j] == i
        ]

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "words1": list(self.words1),
            "words2": list(self.words2),
            "similarity": np.asarray(self.similarity, dtype=float).tolist(),
            "best1": list(self.best1),
            "best2": list(self.best2),
            "seconds": self.seconds,
            "note": "contextual token similarity; not an explanation of the score",
        }


def _word_vectors(backbone, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    tokens = backbone.tokenize(text)
    words = merge_words(tokens)
    states = np.asarray(backbone.contextual(tokens), dtype=np.float64)  # [T, H]
    keep = [w for w in range(len(words.labels)) if not words.special[w]]
    owner = np.asarray(words.word_of_token)
    vectors = np.stack([states[owner == w].mean(axis=0) for w in keep]) if keep else np.zeros((0, states.shape[1]))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return tuple(words.labels[w] for w in keep), vectors / np.maximum(norms, 1e-12)


def align_tokens(model, sentence1: str, sentence2: str) -> Alignment:
    """Each word's best match in the other sentence by contextual token similarity (see the module docstring)."""
    check_sentences(sentence1, sentence2)
    backbone = attributable(model)
    started = time.perf_counter()
    words1, v1 = _word_vectors(backbone, sentence1)
    words2, v2 = _word_vectors(backbone, sentence2)
    similarity = v1 @ v2.T  # [W1, W2]
    best1 = tuple(int(j) for j in similarity.argmax(axis=1)) if similarity.size else ()
    best2 = tuple(int(i) for i in similarity.argmax(axis=0)) if similarity.size else ()
    return Alignment(
        str(getattr(model, "name", getattr(backbone, "name", "model"))),
        words1,
        words2,
        similarity,
        best1,
        best2,
        time.perf_counter() - started,
    )
