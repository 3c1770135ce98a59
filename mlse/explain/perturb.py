"""The perturbation check: does removing the words of the top attributed pairs lower the score more than removing
the words of random pairs? (Faithfulness measured, not assumed; ``benchmarks/explain_faithfulness.py`` runs it.)

The *top* cells are the ``k`` word pairs ranked by ``A_ij`` (``rank="cell"``) or by their words' total
(``rank="words"``: row i + ``u_i`` + column j + ``v_j`` − ``A_ij``, :mod:`mlse.explain.explanation`); the *random*
cells are ``k`` non-special pairs drawn uniformly. Their words are removed (``drop = score − cosine after``) by
``delete`` (cut out, re-encoded) or ``reference`` (their states at the explained layer set to the reference's).
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
    return tidy("".join(c for c, k in zip(text, keep) if k))


def tidy(text: str) -> str:
    """``text`` with every run of two or more white-space characters collapsed to one space, then stripped."""
    return _SPACES.sub(" ", text).strip()


def top_cells(explanation, k: int, rank: str = "cell") -> list[tuple[int, int]]:
    """The ``k`` non-special word pairs ranked first by ``rank`` (``cell`` or ``words``, see the module docstring);
    only positive values count."""
    value = np.asarray(explanation.matrix, dtype=np.float64)
    if rank == "words":
        value = explanation.word_totals1[:, None] + explanation.word_totals2[None, :] - value
    elif rank != "cell":
        raise ValueError(f"rank must be 'cell' or 'words', got {rank!r}")
    cells = [(i, j) for i, j, _ in explanation.top_cells(explanation.matrix.size)]
    return sorted((c for c in cells if value[c] > 0), key=lambda c: -value[c])[:k]


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
    return (
        delete_spans(explanation.sentence1, spans1),
        delete_spans(explanation.sentence2, spans2),
        len(spans1) + len(spans2),
    )


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


def perturb(
    model,
    explanation,
    k: int,
    *,
    draws: int = 5,
    rng: np.random.Generator | None = None,
    how: str = "delete",
    rank: str = "cell",
) -> Perturbation:
    """Remove the words of the top-``k`` cells by ``rank`` and of ``draws`` random ``k`` cells (``how``: ``delete`` or
    ``reference``; see the module docstring) and report the score drops."""
    rng = rng if rng is not None else np.random.default_rng(0)
    choices = [top_cells(explanation, k, rank)] + [random_cells(explanation, k, rng) for _ in range(draws)]
    if how == "delete":
        variants = [without_cells(explanation, cells) for cells in choices]
        texts = [t for s1, s2, _ in variants for t in (s1, s2)]
        emb = np.asarray(model.encode(texts), dtype=np.float64).reshape(len(variants), 2, -1)  # [V, 2, d]
        drops = explanation.score - np.einsum("vd,vd->v", emb[:, 0], emb[:, 1])
        counts = [v[2] for v in variants]
    elif how == "reference":
        drops, counts = _reference_drops(model, explanation, choices)
    else:
        raise ValueError(f"how must be 'delete' or 'reference', got {how!r}")
    return Perturbation(
        k=k,
        top_drop=float(drops[0]),
        random_drops=tuple(float(d) for d in drops[1:]),
        top_words=counts[0],
        random_words=float(np.mean(counts[1:])),
    )


def _reference_drops(model, explanation, choices: list[list[tuple[int, int]]]) -> tuple[np.ndarray, list[int]]:
    """Score drops when the chosen words' tokens take the reference's representation at the explained layer."""
    import torch  # lazy: only computing needs it

    from mlse.explain.backbones import attributable

    backbone = attributable(model)
    layer = explanation.layer
    sides = []
    for text, owner in (
        (explanation.sentence1, explanation.word_of_token1),
        (explanation.sentence2, explanation.word_of_token2),
    ):
        x, r = backbone.states(backbone.tokenize(text), layer)
        sides.append((x, r, np.asarray(owner)))
    batches: list[list] = [[], []]
    counts = []
    for cells in choices:
        words = ({i for i, _ in cells}, {j for _, j in cells})
        counts.append(len(words[0]) + len(words[1]))
        for side, (x, r, owner) in enumerate(sides):
            swap = torch.from_numpy(np.isin(owner, sorted(words[side])))[:, None]
            batches[side].append(torch.where(swap, r, x))
    with torch.no_grad():
        emb = [backbone.tail(torch.stack(b), layer).double().numpy() for b in batches]  # 2 x [V, d]
    return explanation.forward_score - np.einsum("vd,vd->v", emb[0], emb[1]), counts
