"""A user's own bitext scored like one LASER Tatoeba language: accuracy both ways, xSIM error, error lists.

Scored by :class:`mlse.evaluation.runners.TatoebaLanguage` ("to_en": ``src`` queries ``tgt``, whatever the target's
language). Added for a user's file: a pair repeated word for word is kept once (its twin would be an unavoidable
error); fewer than 2 pairs is refused (one candidate is trivially right); :func:`bitext_notes` says when numbers mean
less than they seem.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import partial

from mlse.data.types import ParallelCorpus
from mlse.errors import DataError
from mlse.evaluation.runners import TatoebaLanguage

MIN_PAIRS = 2


def drop_repeated_pairs(corpus: ParallelCorpus) -> tuple[ParallelCorpus, int]:
    """(the corpus with each (src, tgt) pair kept at its first row only, how many rows were dropped)."""
    pairs = list(dict.fromkeys(zip(corpus.src, corpus.tgt)))  # each pair at its first row
    dropped = len(corpus) - len(pairs)
    if not dropped:
        return corpus, 0
    src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
    kept = ParallelCorpus(src, tgt, corpus.src_lang, corpus.tgt_lang, corpus.name, list(corpus.sources))
    return kept, dropped


def prepare_bitext(corpus: ParallelCorpus) -> tuple[ParallelCorpus, str]:
    """(the corpus ready to score, a note on repeated pairs or ""). DataError when fewer than 2 pairs remain."""
    kept, dropped = drop_repeated_pairs(corpus)
    note = (
        f"{dropped} repeated pair(s) (the same two sentences as an earlier row) were counted once." if dropped else ""
    )
    if len(kept) < MIN_PAIRS:
        after = f" once repeated pairs are counted once ({len(corpus)} rows read)" if dropped else ""
        raise DataError(
            f"{corpus.name}: retrieval needs at least {MIN_PAIRS} different pairs to choose among; "
            f"this bitext has {len(kept)}{after}"
        )
    return kept, note


def bitext_notes(corpus: ParallelCorpus) -> list[str]:
    """Plain sentences on what makes this bitext's numbers less telling (empty when nothing does)."""
    notes = []
    for side, texts in ((corpus.src_lang, corpus.src), (corpus.tgt_lang, corpus.tgt)):
        repeats = {t: c for t, c in Counter(texts).items() if c > 1}
        if repeats:
            rows = sum(repeats.values())
            notes.append(
                f"{len(repeats)} sentence(s) of the {side} column recur in {rows} rows with different "
                "translations: no model can tell those rows apart, so some of them count as errors "
                "whatever it does."
            )
    same = sum(s == t for s, t in zip(corpus.src, corpus.tgt))
    if same == len(corpus):
        notes.append(
            "Both columns hold the same sentence in every row: each query finds itself, so the accuracy "
            "says nothing about translation."
        )
    elif same:
        notes.append(f"{same} row(s) hold the same text in both columns (names, numbers?): those are easy matches.")
    return notes


def bitext_digest(corpus: ParallelCorpus) -> str:
    """A hash of the corpus's content (both columns and their language names): the memo key of its scores."""
    h = hashlib.sha256()
    for part in (corpus.src_lang, corpus.tgt_lang, *corpus.src, "\x00", *corpus.tgt):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def score_bitext(encoder, corpus: ParallelCorpus, *, k: int = 4, batch_size: int = 64, memo=None) -> TatoebaLanguage:
    """``corpus`` (as given: see :func:`prepare_bitext`) scored with ``encoder`` like a Tatoeba language.
    ``memo``: a :class:`mlse.memo.BytesMemo`, keyed by the encoder's identity and :func:`bitext_digest`."""
    if len(corpus) < MIN_PAIRS:
        raise DataError(f"{corpus.name}: retrieval needs at least {MIN_PAIRS} pairs, got {len(corpus)}")
    compute = partial(TatoebaLanguage.encoded, encoder, corpus, k, batch_size)
    if memo is None:
        return compute()
    return memo.get_or_compute(("bitext", encoder.identity, bitext_digest(corpus), k), compute)
