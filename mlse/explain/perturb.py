"""The perturbation check: does deleting the words of the top attributed pairs lower the score more than deleting
the words of random pairs? (Faithfulness measured, not assumed; ``benchmarks/explain_faithfulness.py`` runs it.)

For an :class:`~mlse.explain.Explanation` and ``k``: the *top* cells are the ``k`` word pairs with the largest
positive attribution (the pairs said to push the cosine up the most); the *random* cells are ``k`` word pairs drawn
uniformly among all pairs of (non-special) words. The words of the chosen cells (each word once, however many cells
it is in) are cut out of their sentence by their character spans, and the model's cosine of the shortened pair is
compared with the original: ``drop = score − cosine after deletion``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_SPACES = re.compile(r"\s{2,}")


def delete_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the characters of ``spans`` (white space left behind collapsed to one space)."""
    keep = np.ones(len(text), dtype=bool)
    for start, end in spans:
        keep[start:end] = False
    out = "".join(c for c, k in zip(text, keep) if k)
    return _SPACES.sub(" ", out).strip()


def top_cells(explanation, k: int) -> list[tuple[int, int]]:
    """The ``k`` non-special word pairs with the largest positive attribution (fewer when fewer are positive)."""
    cells = [(i, j) for i, j, v in explanation.top_cells(explanation.matrix.size) if v > 0]
    ranked = sorted(cells, key=lambda c: -explanation.matrix[c])
    return ranked[:k]


def random_cells(explanation, k: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``k`` distinct non-special word pairs drawn uniformly."""
    rows = [i for i in range(len(explanation.words1)) if not explanation.special1[i]]
    cols = [j for j in range(len(explanation.words2)) if not explanation.special2[j]]
    cells = [(i, j) for i in rows for j in cols]
    picked = rng.choice(len(cells), size=min(k, len(cells)), replace=False)
    return [cells[int(p)] for p in picked]


def without_cells(explanation, cells: list[tuple[int, int]]) -> tuple[str, str, int]:
    """(sentence 1, sentence 2) with the words of ``cells`` deleted, and the number of words deleted."""
    rows = sorted({i for i, _ in cells})
    cols = sorted({j for _, j in cells})
    spans1 = [explanation.spans1[i] for i in rows if explanation.spans1[i] is not None]
    spans2 = [explanation.spans2[j] for j in cols if explanation.spans2[j] is not None]
    return (delete_spans(explanation.sentence1, spans1), delete_spans(explanation.sentence2, spans2),
            len(spans1) + len(spans2))  # fmt: skip


@dataclass(frozen=True)
class Perturbation:
    """Score drops after deleting the words of the top-``k`` cells and of ``draws`` random draws of ``k`` cells."""

    k: int
    top_drop: float
    random_drops: tuple[float, ...]
    top_words: int
    random_words: float

    @property
    def random_drop(self) -> float:
        return float(np.mean(self.random_drops))

    @property
    def top_wins(self) -> bool:
        """Deleting the top pairs' words lowers the score more than deleting random pairs' words (on average)."""
        return self.top_drop > self.random_drop


def perturb(model, explanation, k: int, *, draws: int = 5, rng: np.random.Generator | None = None) -> Perturbation:
    """Delete the words of the top-``k`` and of ``draws`` random ``k`` cells, re-encode with ``model``, and report
    the score drops (one ``model.encode`` call for all the shortened sentences)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    variants = [without_cells(explanation, top_cells(explanation, k))]
    variants += [without_cells(explanation, random_cells(explanation, k, rng)) for _ in range(draws)]
    texts = [t for s1, s2, _ in variants for t in (s1, s2)]
    emb = np.asarray(model.encode(texts), dtype=np.float64).reshape(len(variants), 2, -1)  # [V, 2, d]
    cosines = np.einsum("vd,vd->v", emb[:, 0], emb[:, 1])
    drops = explanation.score - cosines
    return Perturbation(k=k, top_drop=float(drops[0]), random_drops=tuple(float(d) for d in drops[1:]),
                        top_words=variants[0][2], random_words=float(np.mean([v[2] for v in variants[1:]])))
