"""What if? Edit a sentence of an explained pair (or drop words from it) and compare the new score with what the
explanation said those words were worth.

:func:`what_if` scores the edited pair as ``python -m mlse score`` does (:func:`mlse.encoders.protocol.similarity`),
re-attributes only the edited sentence (a sentence's attribution depends on it alone) and, when the edit deletes whole
words, sets the change of the cosine beside the predicted change (:attr:`WhatIf.predicted_delta`), minus

    Σ_{i∈D1} (row_i + u_i) + Σ_{j∈D2} (column_j + v_j) − Σ_{i∈D1, j∈D2} A_ij

for deleted words D1, D2 (``u``/``v``: :mod:`mlse.explain.explanation`; a cell of two deleted words counted once).
:attr:`WhatIf.predicted_delta_pairs` uses the matrix alone. Both are first-order: the shift of the other words'
context is not seen. An edit is a deletion when it equals, white space aside, the original cut by
:func:`mlse.explain.perturb.delete_spans`; other edits are scored and explained without a prediction.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.explain.explanation import Explanation, check_sentences, explain_pair
from mlse.explain.perturb import delete_spans, tidy


@dataclass(frozen=True)
class WhatIf:
    """An explained pair, an edit of it, and what the edit did to the score.

    ``score`` / ``calibrated``: the original pair's cosine and 0-5 score (None without a calibration);
    ``new_score`` / ``new_calibrated``: the edited pair's, as ``python -m mlse score`` gives them. ``dropped1`` /
    ``dropped2``: the indices (into the explanation's ``words1`` / ``words2``) of the words the edit deletes, empty
    when it deletes none or is not a deletion (``is_deletion`` tells which). ``predicted_delta``: the change of the
    cosine the explanation predicts for the deletion (None for other edits); ``explanation`` / ``new_explanation``:
    the two pairs' attributions (the new one None when not asked for).
    """

    model: str
    sentence1: str
    sentence2: str
    edited1: str
    edited2: str
    score: float
    new_score: float
    calibrated: float | None
    new_calibrated: float | None
    is_deletion: bool
    dropped1: tuple[int, ...]
    dropped2: tuple[int, ...]
    predicted_delta: float | None
    predicted_delta_pairs: float | None
    explanation: Explanation = field(repr=False)
    new_explanation: Explanation | None = field(default=None, repr=False)
    seconds: float = 0.0

    @property
    def delta(self) -> float:
        """new cosine − original cosine."""
        return self.new_score - self.score

    @property
    def calibrated_delta(self) -> float | None:
        if self.calibrated is None or self.new_calibrated is None:
            return None
        return self.new_calibrated - self.calibrated

    @property
    def predicted_parts(self) -> tuple[float, float, float] | None:
        """What the prediction is made of: (minus the dropped words' pairs, minus their own terms, what it missed:
        actual minus predicted change); None without a prediction."""
        if self.predicted_delta is None or self.predicted_delta_pairs is None:
            return None
        pairs = -self.predicted_delta_pairs
        return pairs, self.predicted_delta_pairs - self.predicted_delta, self.delta - self.predicted_delta

    @property
    def dropped_words(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The deleted words as the user wrote them, per sentence."""
        e = self.explanation
        return tuple(e.words1[i] for i in self.dropped1), tuple(e.words2[j] for j in self.dropped2)

    def word_effects(self) -> list[dict]:
        """Per deleted word: its sentence, the word, its pairs (row or column sum), its own term and their total
        (its predicted effect alone)."""
        e = self.explanation
        return [
            {
                "sentence": side,
                "word": words[k],
                "pairs": float(pairs[k]),
                "own_term": float(totals[k] - pairs[k]),
                "total": float(totals[k]),
            }
            for side, picked, words, pairs, totals in (
                (1, self.dropped1, e.words1, e.matrix.sum(axis=1), e.word_totals1),
                (2, self.dropped2, e.words2, e.matrix.sum(axis=0), e.word_totals2),
            )
            for k in picked
        ]

    def to_dict(self) -> dict:
        """Every number as JSON-ready values; the two explanations as :meth:`Explanation.to_dict` (or None)."""
        return {
            "model": self.model,
            "sentence1": self.sentence1,
            "sentence2": self.sentence2,
            "edited1": self.edited1,
            "edited2": self.edited2,
            "score": self.score,
            "new_score": self.new_score,
            "delta": self.delta,
            "calibrated": self.calibrated,
            "new_calibrated": self.new_calibrated,
            "calibrated_delta": self.calibrated_delta,
            "is_deletion": self.is_deletion,
            "dropped1": list(self.dropped_words[0]),
            "dropped2": list(self.dropped_words[1]),
            "predicted_delta": self.predicted_delta,
            "predicted_delta_pairs": self.predicted_delta_pairs,
            "word_effects": self.word_effects(),
            "seconds": self.seconds,
            "explanation": self.explanation.to_dict(),
            "new_explanation": None if self.new_explanation is None else self.new_explanation.to_dict(),
        }


# -- finding the words ---------------------------------------------------------------------------------------------
def droppable(explanation: Explanation, side: int) -> list[int]:
    words = explanation.words1 if side == 1 else explanation.words2
    spans = explanation.spans1 if side == 1 else explanation.spans2
    special = explanation.special1 if side == 1 else explanation.special2
    return [k for k in range(len(words)) if spans and spans[k] is not None and not (special and special[k])]


def find_words(explanation: Explanation, word: str, sides: Sequence[int] = (1, 2)) -> dict[int, list[int]]:
    """{side: indices} of the words of ``sides`` written ``word``: every occurrence written exactly so, else (none
    is) every occurrence equal up to case. {} when the word is in neither."""
    target = word.strip()
    for same in (lambda w: w == target, lambda w: w.casefold() == target.casefold()):
        found = {}
        for side in sides:
            words = explanation.words1 if side == 1 else explanation.words2
            hits = [k for k in droppable(explanation, side) if same(words[k])]
            if hits:
                found[side] = hits
        if found:
            return found
    return {}


def _picked(explanation: Explanation, drop, drop1, drop2) -> tuple[set[int], set[int]]:
    """The word indices to delete per sentence; MlseError naming a word that is in neither sentence."""
    picked: tuple[set[int], set[int]] = (set(), set())
    asked = [(w, (1, 2)) for w in drop] + [(w, (1,)) for w in drop1] + [(w, (2,)) for w in drop2]
    for word, sides in asked:
        if isinstance(word, (int, np.integer)) and not isinstance(word, bool) and len(sides) == 1:
            side = sides[0]
            if int(word) not in droppable(explanation, side):
                raise MlseError(f"sentence {side} has no word number {word} that can be dropped")
            picked[side - 1].add(int(word))
            continue
        if not isinstance(word, str) or not word.strip():
            raise MlseError(f"a word to drop must be non-empty text, got {word!r}")
        found = find_words(explanation, word, sides)
        if not found and not any(droppable(explanation, s) for s in sides):
            raise MlseError(
                f"cannot drop {word!r}: {explanation.model}'s word pieces could not be placed in the text, so no "
                "word can be dropped by name; give the edited sentence instead (edited1 / edited2)"
            )
        if not found:
            where = "either sentence" if len(sides) == 2 else f"sentence {sides[0]}"
            words = [
                (explanation.words1, explanation.words2)[s - 1][k] for s in sides for k in droppable(explanation, s)
            ]
            raise MlseError(
                f"cannot drop {word!r}: it is not a word of {where} (the words: {', '.join(map(repr, words))})"
            )
        for side, hits in found.items():
            picked[side - 1].update(hits)
    return picked


def without_words(explanation: Explanation, side: int, indices) -> str:
    """Sentence ``side`` of the explanation with the words ``indices`` deleted (:func:`delete_spans`)."""
    spans = explanation.spans1 if side == 1 else explanation.spans2
    text = explanation.sentence1 if side == 1 else explanation.sentence2
    return delete_spans(text, [spans[k] for k in sorted(indices)])


def deleted_words(explanation: Explanation, side: int, edited: str) -> tuple[int, ...] | None:
    """The indices of the words whose deletion turns sentence ``side`` into ``edited`` (white space aside), () when
    it is unchanged, None when the edit is not a deletion of whole words."""
    original = explanation.sentence1 if side == 1 else explanation.sentence2
    if _letters(edited) == _letters(original):
        return ()
    spans = explanation.spans1 if side == 1 else explanation.spans2
    gone = np.zeros(len(original), dtype=bool)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, original, edited, autojunk=False).get_opcodes():
        if tag == "delete" or (tag == "replace" and not edited[j1:j2].strip()):
            gone[i1:i2] = True
        elif tag != "equal" and edited[j1:j2].strip():
            return None  # something was added or replaced
    candidates = [
        k for k in droppable(explanation, side) if all(gone[c] or original[c].isspace() for c in range(*spans[k]))
    ]
    if candidates and _letters(without_words(explanation, side, candidates)) == _letters(edited):
        return tuple(candidates)
    return None


def _letters(text: str) -> str:
    """``text`` without its white space: "flute ." and "flute." delete the same words."""
    return "".join(text.split())


# -- the prediction ------------------------------------------------------------------------------------------------
def predicted_change(explanation: Explanation, dropped1, dropped2) -> tuple[float, float]:
    """(the change of the cosine the explanation predicts for deleting those words, the same from the word pairs
    alone): the module docstring's formula."""
    matrix = np.asarray(explanation.matrix, dtype=np.float64)  # [W1, W2]
    rows = np.asarray(sorted(dropped1), dtype=np.intp)
    cols = np.asarray(sorted(dropped2), dtype=np.intp)
    pairs = matrix[rows, :].sum() + matrix[:, cols].sum() - matrix[np.ix_(rows, cols)].sum()
    own = (explanation.word_totals1 - matrix.sum(axis=1))[rows].sum()  # u_i of the deleted words
    own += (explanation.word_totals2 - matrix.sum(axis=0))[cols].sum()  # v_j
    return -float(pairs + own), -float(pairs)


# -- the function --------------------------------------------------------------------------------------------------
def _one_pair(model, s1: str, s2: str, encode: Callable | None) -> tuple[float, float | None]:
    cos, calibrated = similarity(model, [s1], [s2], encode=encode)  # as `mlse score` and the Score tab
    return float(cos[0]), (None if calibrated is None else float(calibrated[0]))


def what_if(
    model,
    sentence1: str,
    sentence2: str,
    *,
    drop: Sequence[str] = (),
    drop1: Sequence[str | int] = (),
    drop2: Sequence[str | int] = (),
    edited1: str | None = None,
    edited2: str | None = None,
    explanation: Explanation | None = None,
    explain_new: bool = True,
    steps: int | None = None,
    layer: int | None = None,
    rule: str | None = None,
    encode: Callable | None = None,
) -> WhatIf:
    """Score and explain an edit of the pair ``sentence1`` / ``sentence2`` under ``model`` -> :class:`WhatIf`.

    The edit: ``drop`` words (every occurrence written exactly so in either sentence, else every one equal up to
    case), ``drop1`` / ``drop2`` words of one sentence only (a word, or its index in the explanation's words), or a
    whole new ``edited1`` / ``edited2``; drops and a new text for the same sentence do not mix. A word that is in
    neither sentence, an edit that changes nothing or leaves a sentence empty is an MlseError naming it.
    ``explanation``: the pair's explanation when already computed (else it is computed with ``steps`` / ``layer`` /
    ``rule``); the edited pair is explained with the same setting unless ``explain_new`` is False. ``encode``: another
    way to encode (the app's micro-batcher), as :func:`mlse.encoders.protocol.similarity` takes it.
    """
    check_sentences(sentence1, sentence2)
    started = time.perf_counter()
    if explanation is None:
        explanation = explain_pair(model, sentence1, sentence2, steps=steps, layer=layer, rule=rule)
    elif (explanation.sentence1, explanation.sentence2) != (sentence1, sentence2):
        raise MlseError("the explanation given is of another pair of sentences; explain this pair first")
    picked = _picked(explanation, list(drop), list(drop1), list(drop2))
    texts = []
    for side, edited, original in ((1, edited1, sentence1), (2, edited2, sentence2)):
        if edited is not None and picked[side - 1]:
            raise MlseError(f"sentence {side} is both given a new text and asked to drop words: do one of the two")
        if edited is not None and not isinstance(edited, str):
            raise MlseError(f"the edited sentence {side} must be text, got {type(edited).__name__}")
        text = without_words(explanation, side, picked[side - 1]) if picked[side - 1] else edited
        text = original if text is None else text
        if not text.strip():
            raise MlseError(f"the edit leaves sentence {side} empty: keep at least one word")
        texts.append(text)
    if all(tidy(t) == tidy(o) for t, o in zip(texts, (sentence1, sentence2))):
        raise MlseError("the edit changes neither sentence: drop a word or edit one of them")
    deleted = [
        tuple(sorted(picked[side - 1])) if picked[side - 1] else deleted_words(explanation, side, texts[side - 1])
        for side in (1, 2)
    ]
    is_deletion = all(d is not None for d in deleted)
    dropped1, dropped2 = (deleted[0], deleted[1]) if is_deletion else ((), ())
    predicted = predicted_change(explanation, dropped1, dropped2) if is_deletion else (None, None)
    score, calibrated = _one_pair(model, sentence1, sentence2, encode)
    new_score, new_calibrated = _one_pair(model, texts[0], texts[1], encode)
    new_explanation = None
    if explain_new:
        new_explanation = explain_pair(
            model,
            texts[0],
            texts[1],
            steps=explanation.steps,
            layer=explanation.layer,
            rule=explanation.rule,
            precision=explanation.precision,
            reuse=explanation,
        )
    return WhatIf(
        model=explanation.model,
        sentence1=sentence1,
        sentence2=sentence2,
        edited1=texts[0],
        edited2=texts[1],
        score=score,
        new_score=new_score,
        calibrated=calibrated,
        new_calibrated=new_calibrated,
        is_deletion=is_deletion,
        dropped1=tuple(dropped1),
        dropped2=tuple(dropped2),
        predicted_delta=predicted[0],
        predicted_delta_pairs=predicted[1],
        explanation=explanation,
        new_explanation=new_explanation,
        seconds=time.perf_counter() - started,
    )
