"""Keeping evaluation sentences out of training data.

The Tatoeba-Challenge bitext shares many pairs with the LASER Tatoeba test set; training on them inflates retrieval
accuracy. Matching is exact after NFC and whitespace normalisation, case-sensitive, as the overlap was measured
(``parallel/tatoeba_challenge_v2021-08-07/OVERLAP_WITH_LASER_TATOEBA_V1.md``).
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections.abc import Iterable
from dataclasses import replace

from mlse.data.paths import resolve_data_dir
from mlse.data.stsb import STS_LANGS, read_sts_file, sts_file
from mlse.data.tatoeba import load_tatoeba, resolve_tatoeba_lang, tatoeba_languages
from mlse.data.types import ParallelCorpus
from mlse.memo import MB, bytes_memoized

logger = logging.getLogger(__name__)


def normalize_sentence(s: str) -> str:
    """NFC, strip, and collapse internal whitespace runs to one space (case is kept)."""
    return " ".join(unicodedata.normalize("NFC", s).split())


def evaluation_sentences(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    tatoeba: bool | list[str] = True,
    sts_splits: Iterable[str] = ("test", "dev"),
) -> set[str]:
    """Normalised sentences of the evaluation sets: LASER Tatoeba (both sides; all languages if
    ``tatoeba`` is True, none if False, else those listed) and STS Multi MT ``sts_splits`` in all 11 languages.
    Memoised per process; returns a fresh set each call."""
    root = resolve_data_dir(data_dir)
    if isinstance(tatoeba, bool):
        langs: tuple[str, ...] = tuple(tatoeba_languages(root)) if tatoeba else ()
    else:
        langs = tuple(sorted({resolve_tatoeba_lang(x, root) for x in tatoeba}))
    return set(_evaluation_sentences(str(root), langs, tuple(sorted(set(sts_splits)))))


@bytes_memoized("contamination.evaluation_sentences", 128 * MB)
def _evaluation_sentences(root: str, tatoeba_langs: tuple[str, ...], sts_splits: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for lang in tatoeba_langs:
        corpus = load_tatoeba(lang, root)
        out.update(map(normalize_sentence, corpus.src + corpus.tgt))
    for split in sts_splits:
        for lang in STS_LANGS:
            s1, s2, _ = read_sts_file(sts_file(lang, split, root))
            out.update(map(normalize_sentence, s1 + s2))
    out.discard("")
    return frozenset(out)


def filter_contaminated(corpus: ParallelCorpus, eval_sentences: set[str]) -> tuple[ParallelCorpus, int]:
    """Drop every pair whose src or tgt (normalised) is in ``eval_sentences``; return (clean, n_dropped)."""
    keep = [
        i
        for i, (s, t) in enumerate(zip(corpus.src, corpus.tgt, strict=True))
        if normalize_sentence(s) not in eval_sentences and normalize_sentence(t) not in eval_sentences
    ]
    dropped = len(corpus) - len(keep)
    logger.info("%s: dropped %d of %d pairs that overlap evaluation sentences", corpus.name, dropped, len(corpus))
    return replace(corpus, src=[corpus.src[i] for i in keep], tgt=[corpus.tgt[i] for i in keep]), dropped
