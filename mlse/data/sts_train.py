"""Scored pairs to train on: the STS Multi MT *train* split in every language pairing its aligned translations offer.

Row ``i`` is the same pair in all 11 language files (:mod:`mlse.data.stsb`), so any ordered pairing is a scored pair:
(sentence 1 of row ``i`` in de, sentence 2 in fr, score ``i``). :class:`StsTrainRows` keeps the rows once and draws
(row, pairing) at random, so the 11 x 11 pairings cost no memory. Only the train split is read. A row is dropped
when any of its sentences is an evaluation sentence (:func:`mlse.data.contamination.evaluation_sentences`): STSb's
splits are disjoint by pair, not by sentence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from mlse.data.contamination import evaluation_sentences, normalize_sentence
from mlse.data.hashing import file_sha256
from mlse.data.layout import STS_LANGS
from mlse.data.stsb import read_sts_file, sts_file
from mlse.errors import MlseError


@dataclass
class StsBatch:
    """``texts1[k]``, ``texts2[k]`` with gold ``scores[k]`` (0-5), in the languages ``pairings[k]`` ("de-fr")."""

    texts1: list[str]
    texts2: list[str]
    scores: np.ndarray  # [B] float32
    pairings: list[str]


@dataclass
class StsTrainRows:
    """The train split, row-aligned across ``langs``: ``s1[lang][i]``, ``s2[lang][i]``, ``scores[i]``."""

    langs: tuple[str, ...]
    s1: dict[str, list[str]]
    s2: dict[str, list[str]]
    scores: np.ndarray  # [N]
    info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def pairings(self) -> list[tuple[str, str]]:
        """Every ordered (language of sentence 1, language of sentence 2), same-language ones included."""
        return [(a, b) for a in self.langs for b in self.langs]

    def sample(self, rng: np.random.Generator, size: int) -> StsBatch:
        """``size`` rows drawn without replacement (with, when ``size`` exceeds the rows), each in a random pairing."""
        rows = rng.choice(len(self), size=size, replace=size > len(self))
        pairs = self.pairings
        chosen = [pairs[k] for k in rng.integers(len(pairs), size=size)]
        return StsBatch(
            [self.s1[a][i] for i, (a, _) in zip(rows, chosen)],
            [self.s2[b][i] for i, (_, b) in zip(rows, chosen)],
            self.scores[rows].astype(np.float32),
            [f"{a}-{b}" for a, b in chosen],
        )


def load_sts_train(
    langs: list[str] | tuple[str, ...] = STS_LANGS, data_dir: str | os.PathLike[str] | None = None
) -> StsTrainRows:
    """The contamination-filtered train rows in ``langs`` (every row aligned across them). DataError / MlseError for
    a missing file, an unknown language, or files whose rows do not line up."""
    langs = tuple(dict.fromkeys(langs))
    unknown = [lang for lang in langs if lang not in STS_LANGS]
    if not langs or unknown:
        raise MlseError(
            f"STS training languages must be among {', '.join(STS_LANGS)}; got {', '.join(langs) or 'none'}"
        )
    files = {lang: sts_file(lang, "train", data_dir) for lang in langs}
    read = {lang: read_sts_file(path) for lang, path in files.items()}
    scores = read[langs[0]][2]
    for lang, (s1, _, y) in read.items():
        if len(s1) != len(scores) or not np.array_equal(y, scores):
            raise MlseError(f"STS Multi MT train: {files[lang].name} does not line up with {files[langs[0]].name}")
    banned = evaluation_sentences(data_dir, tatoeba=True, sts_splits=("test", "dev"))
    columns = [sentences for lang in langs for sentences in read[lang][:2]]  # s1 and s2 of every language
    keep = [i for i in range(len(scores)) if not any(normalize_sentence(col[i]) in banned for col in columns)]
    info = {
        "source": "STS Multi MT train",
        "langs": list(langs),
        "rows": len(keep),
        "rows_dropped_contamination": len(scores) - len(keep),
        "pairings": len(langs) ** 2,
        "data": {path.name: file_sha256(path) for path in files.values()},
    }
    return StsTrainRows(
        langs,
        {lang: [read[lang][0][i] for i in keep] for lang in langs},
        {lang: [read[lang][1][i] for i in keep] for lang in langs},
        np.asarray(scores, dtype=np.float64)[keep],
        info,
    )
