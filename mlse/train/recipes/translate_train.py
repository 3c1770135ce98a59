"""Translate-train for languages without rated pairs: pseudo-rated pairs made from the bitext's own translations.

For a bitext language X not in ``sts_langs``, a teacher (``translate_teacher``, default the starting student) scores
two English sentences ``a``, ``b`` by its cosine, and their Tatoeba translations carry that score to ``(a, b_X)``,
``(a_X, b)`` and ``(a_X, b_X)``; the pairs join the STS term (:mod:`mlse.train.sts_term`). Partners are each anchor's
:data:`NEIGHBOURS` nearest English neighbours and :data:`RANDOM_PARTNERS` random ones. Bitext rows with a sentence of
STS Multi MT (any split or language) are left out, so a held-out language's STS sentences stay unseen.

A batch of the STS term is pseudo-rated with probability ``k / (k + r)`` (``k`` pseudo-rated, ``r`` rated languages),
so a step's compute is unchanged. A batch is never mixed: pseudo scores are cosines, rated ones 0-5, and the ranking
losses compare scores within a batch only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlse.data.sts_train import StsBatch, StsTrainRows
from mlse.errors import MlseError
from mlse.stop_signal import StopSignal, encode_in_chunks

NEIGHBOURS = 4  # nearest English neighbours per anchor: the similar end of the scale
RANDOM_PARTNERS = 4  # random partners per anchor: the dissimilar end
FORMS = ("en-X", "X-en", "X-X")
_CHUNK = 1024  # anchors per similarity block (memory: chunk x n floats)


def pseudo_langs(pairs: Sequence[str], sts_langs: Sequence[str]) -> list[str]:
    """The target languages of English-X ``pairs`` ("en-de") that have no rated pairs in ``sts_langs``."""
    others = dict.fromkeys(b if a == "en" else a for a, _, b in (pair.partition("-") for pair in pairs))
    return [x for x in others if x and x != "en" and x not in sts_langs]


def pseudo_pairs(
    english: np.ndarray, rng: np.random.Generator, neighbours: int = NEIGHBOURS, random: int = RANDOM_PARTNERS
):
    """(anchor index [m], partner index [m], teacher cosine [m]) from L2-normalised English embeddings [n, d]: each
    anchor's ``neighbours`` nearest other sentences and ``random`` random other ones."""
    n = len(english)
    if n < 2:
        raise MlseError(f"translate-train needs at least 2 bitext pairs in a language, got {n}")
    k = min(neighbours, n - 1)
    first, second = [], []
    for start in range(0, n, _CHUNK):
        block = english[start : start + _CHUNK] @ english.T  # [c, n]
        rows = np.arange(start, start + len(block))
        block[np.arange(len(block)), rows] = -np.inf  # never the sentence itself
        if k:
            near = np.argpartition(-block, k - 1, axis=1)[:, :k]  # [c, k]
            first.append(np.repeat(rows, k))
            second.append(near.ravel())
    if random:
        anchors = np.repeat(np.arange(n), random)
        partners = (anchors + rng.integers(1, n, size=len(anchors))) % n  # never the anchor itself
        first.append(anchors)
        second.append(partners)
    i, j = np.concatenate(first), np.concatenate(second)
    scores = np.einsum("md,md->m", english[i], english[j]).astype(np.float32)
    return i, j, scores


@dataclass
class PseudoRated:
    """One language's pseudo-rated pairs: English sentences, their X translations, and (i, j, score) rows."""

    lang: str
    english: list[str]
    translated: list[str]
    i: np.ndarray
    j: np.ndarray
    scores: np.ndarray

    def sample(self, rng: np.random.Generator, size: int) -> StsBatch:
        """``size`` rows (without replacement where there are enough), each in a random form of :data:`FORMS`."""
        rows = rng.choice(len(self.i), size=size, replace=size > len(self.i))
        forms = rng.integers(len(FORMS), size=size)
        sides = {"en": self.english, "X": self.translated}
        texts1, texts2, pairings = [], [], []
        for r, form in zip(rows, forms):
            first, second = FORMS[form].split("-")
            texts1.append(sides[first][self.i[r]])
            texts2.append(sides[second][self.j[r]])
            pairings.append(FORMS[form].replace("X", self.lang))
        return StsBatch(texts1, texts2, self.scores[rows].astype(np.float32), pairings)


@dataclass
class TranslatedRows:
    """The rated rows plus pseudo-rated languages, drawn as :class:`~mlse.data.sts_train.StsTrainRows` are (what
    :class:`mlse.train.sts_term.StsTerm` asks of them): ``sample`` gives a whole batch of one kind."""

    rated: StsTrainRows
    pseudo: list[PseudoRated]
    info: dict = field(init=False)

    def __post_init__(self):
        k, r = len(self.pseudo), len(self.rated.langs)
        self.share = k / (k + r) if k else 0.0
        pseudo = {"langs": [p.lang for p in self.pseudo], "rows": {p.lang: int(len(p.i)) for p in self.pseudo}}
        self.info = {**self.rated.info, "translate_train": {**pseudo, "batch_share": round(self.share, 4)}}

    def __len__(self) -> int:
        return len(self.rated)

    def sample(self, rng: np.random.Generator, size: int) -> StsBatch:
        if self.pseudo and rng.random() < self.share:
            return self.pseudo[int(rng.integers(len(self.pseudo)))].sample(rng, size)
        return self.rated.sample(rng, size)


def with_translated_pairs(cfg, rated: StsTrainRows, device: str, stop: StopSignal | None = None) -> TranslatedRows:
    """The STS term's rows of run ``cfg`` (a :class:`mlse.train.config.FinetuneConfig` with ``translate_train``) with
    the pseudo-rated pairs of each bitext language it has no rated pairs in, from the run's own bitext sample;
    ``stop`` is asked between encoding chunks."""
    from mlse.data.contamination import evaluation_sentences, normalize_sentence  # lazy: only translate-train
    from mlse.models import load_model
    from mlse.train.finetune_data import english_first, run_bitext

    pairs = ["-".join(english_first(pair)) for pair in cfg.pairs]
    langs = pseudo_langs(pairs, cfg.sts_langs)
    if not langs:
        return TranslatedRows(rated, [])
    bitext = run_bitext(cfg, stop, label="translate-train")
    sts_sentences = evaluation_sentences(cfg.data_dir, tatoeba=False, sts_splits=("train", "dev", "test"))
    teacher = load_model(cfg.translate_teacher or cfg.student, device=device)
    rng = np.random.default_rng([cfg.seed, 11])
    found = []
    for lang in langs:
        rows = [
            k
            for k, (a, b) in enumerate(zip(bitext.src_lang, bitext.tgt_lang))
            if {a, b} == {"en", lang}
            and normalize_sentence(bitext.src[k]) not in sts_sentences
            and normalize_sentence(bitext.tgt[k]) not in sts_sentences
        ]
        english = [bitext.src[k] if bitext.src_lang[k] == "en" else bitext.tgt[k] for k in rows]
        translated = [bitext.tgt[k] if bitext.src_lang[k] == "en" else bitext.src[k] for k in rows]
        if len(english) < 2:
            continue
        emb = encode_in_chunks(teacher, english, stop=stop, batch_size=cfg.batch_size, normalize=True)
        i, j, scores = pseudo_pairs(np.asarray(emb, dtype=np.float32), rng)
        found.append(PseudoRated(lang, english, translated, i, j, scores))
    return TranslatedRows(rated, found)
