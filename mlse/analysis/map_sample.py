"""The sentences a language-vs-meaning map shows: which text, which language, which meaning (translation group).

A :class:`Sample` is a FLORES-200 devtest subset (:func:`flores_sample`) or a user's own sentences
(:func:`mlse.analysis.user_sample.user_sample`), where a meaning may have any number of translations, or none marked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mlse.data.flores import load_flores
from mlse.data.parallel import seeded_subset
from mlse.errors import MlseError

FLORES_SOURCE = "FLORES-200 devtest"
PREFERRED_LANGS = ("eng_Latn", "en", "eng", "English", "english")  # shown in the sentence table when present


@dataclass
class Sample:
    """Point ``k`` is ``texts[k]``, in language ``langs[lang_idx[k]]``, meaning ``sentence_ids[k]``.

    Points with the same sentence id are translations. FLORES samples are language-major and complete; a user's is
    in input order, and a meaning may lack some languages."""

    langs: list[str]
    ids: np.ndarray  # [G] the distinct sentence ids, sorted (FLORES: 0-based line numbers)
    texts: list[str]  # [N]
    lang_idx: np.ndarray  # [N] index into langs
    sentence_ids: np.ndarray  # [N] the meaning of each point
    source: str = FLORES_SOURCE  # what the page calls the sample
    group_names: dict[int, str] | None = None  # the user's id of each meaning, where the input had one
    grouped: bool = True  # translations are marked (FLORES, parallel columns, an id column)
    notes: list[str] = field(default_factory=list)  # remarks about how it was built (plain text)
    from_user: bool = False  # a user's sentences rather than a FLORES request

    @property
    def n(self) -> int:
        """The number of meanings (FLORES: sentences per language)."""
        return len(self.ids)

    @cached_property
    def _first(self) -> dict[tuple[int, int], int]:
        """(language index, sentence id) -> the first point with them."""
        index: dict[tuple[int, int], int] = {}
        for k, (li, sid) in enumerate(zip(self.lang_idx.tolist(), self.sentence_ids.tolist())):
            index.setdefault((li, sid), k)
        return index

    def text(self, lang: str, sentence_id: int) -> str | None:
        """The sentence ``sentence_id`` in ``lang``; None when that meaning has no sentence in that language."""
        if lang not in self.langs:
            return None
        k = self._first.get((self.langs.index(lang), int(sentence_id)))
        return None if k is None else self.texts[k]

    def members(self, sentence_id: int) -> list[tuple[str, str]]:
        """(language, text) of every point of one meaning, in point order."""
        rows = np.flatnonzero(self.sentence_ids == int(sentence_id))
        return [(self.langs[self.lang_idx[k]], self.texts[k]) for k in rows]

    def shown_text(self, sentence_id: int) -> tuple[str, str]:
        """(language, text) that stands for a meaning in a table: English when it has English, else its first."""
        members = self.members(sentence_id)
        preferred = (member for lang in PREFERRED_LANGS for member in members if member[0] == lang)
        return next(preferred, members[0] if members else ("", ""))

    def label(self, sentence_id: int) -> str:
        """The user's id of a meaning where the input gave one, else the number."""
        return (self.group_names or {}).get(int(sentence_id), str(int(sentence_id)))

    @property
    def translated(self) -> int:
        """How many meanings have sentences in two or more languages."""
        pairs = set(zip(self.sentence_ids.tolist(), self.lang_idx.tolist()))
        return sum(c >= 2 for c in Counter(sid for sid, _ in pairs).values())

    def probe_problem(self) -> str | None:
        """Why the language-ID probe cannot be measured on this sample (None: it can).

        It is tested on held-out meanings, so it needs two languages that each occur in two meanings or more."""
        if len(self.langs) < 2:
            return f"needs 2 languages; this sample has 1: {self.langs[0] if self.langs else 'none'}"
        if self.n < 2:
            return "needs 2 different sentences: it is tested on sentences held out from its training"
        meanings = Counter(li for li, _ in set(zip(self.lang_idx.tolist(), self.sentence_ids.tolist())))  # per language
        if sum(count >= 2 for count in meanings.values()) < 2:
            return "needs 2 languages with 2 or more different sentences each"
        return None

    def retrieval_problem(self) -> str | None:
        """Why translation retrieval cannot be measured on this sample (None: it can)."""
        if len(self.langs) < 2:
            return "needs 2 languages"
        if not self.grouped:
            return "no translations marked; give translations the same id, or upload one column per language"
        if self.translated == 0:
            return "no translations marked: no id has sentences in 2 languages"
        return None


def flores_sample(langs: Sequence[str], n: int, *, data_dir=None, seed: int = 0) -> Sample:
    """A seeded subset of ``n`` FLORES sentence ids, in every language of ``langs`` (codes as ``load_flores`` takes).

    Random, not the first ``n`` lines: FLORES is ordered by source article, so those would cover few topics.
    """
    if not langs:
        raise MlseError("choose at least one language")
    if n < 1:
        raise MlseError(f"sentences per language must be at least 1 (got {n})")
    flores = load_flores(list(langs), data_dir)  # {code: [1012 lines]}; DataError on a missing folder or bad code
    total = len(next(iter(flores.values())))
    ids = seeded_subset(total, n, seed)
    codes = list(flores)
    texts = [flores[code][i] for code in codes for i in ids]
    lang_idx = np.repeat(np.arange(len(codes)), len(ids))  # [L * n]
    sentence_ids = np.tile(ids, len(codes))  # [L * n]
    return Sample(codes, ids, texts, lang_idx, sentence_ids)
