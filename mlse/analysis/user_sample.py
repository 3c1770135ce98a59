"""A user's own sentences as a map sample (:class:`mlse.analysis.map_sample.Sample`).

* **sentences** table: one sentence per row, optional ``lang`` (else detected, and the sample says so) and ``id`` /
  ``group`` columns (rows sharing an id are translations; without ids retrieval has nothing to find).
* **parallel** table: one column per language, one meaning per row; header-less columns get their detected language.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable

import numpy as np

from mlse.analysis.map_sample import Sample
from mlse.data.user_table import UserTable
from mlse.errors import DataError

MAX_POINTS = 10_000  # a larger map is unreadable and slow to lay out
DETECT_CELLS = 50  # cells of a header-less parallel column that decide its language

Detector = Callable[[str], tuple[str, float]]


def user_sample(table: UserTable, *, detect: Detector | None = None) -> Sample:
    """The sample of a ``sentences`` or ``parallel`` table. ``detect(text) -> (code, confidence)`` names the language
    of sentences without one. DataError for another kind of table or more than :data:`MAX_POINTS` sentences."""
    if table.kind == "sentences":
        sample = _from_sentences(table, detect)
    elif table.kind == "parallel":
        sample = _from_parallel(table, detect)
    else:
        raise DataError(
            f"{table.name}: expected sentences (with an optional lang and id column) or one column per "
            f"language, got {table.kind}"
        )
    if len(sample.texts) > MAX_POINTS:
        raise DataError(
            f"{table.name}: {len(sample.texts):,} sentences; a map shows at most {MAX_POINTS:,} (upload fewer rows)"
        )
    return sample


def _detector(detect: Detector | None) -> tuple[Detector, str]:
    if detect is not None:
        return detect, "the given detector"
    from mlse.text.language_id import detect_language, detector_name  # lazy: langid unpacks its model on first use

    return detect_language, detector_name()


def _from_sentences(table: UserTable, detect: Detector | None) -> Sample:
    texts = [t.strip() for t in table.role("sentence")]
    given = table.role("lang")
    labels = [g.strip() for g in given] if given is not None else [""] * len(texts)
    blank = [k for k, lang in enumerate(labels) if not lang]
    notes = []
    if blank:
        detector, name = _detector(detect)
        for k in blank:
            labels[k] = detector(texts[k])[0]
        found = ", ".join(f"{lang} {n}" for lang, n in Counter(labels[k] for k in blank).most_common())
        if given is None:
            notes.append(
                f"No language column: each sentence's language was detected ({name}): {found}. "
                "Hover a point to check; add a lang column to set them."
            )
        else:
            notes.append(f"{len(blank)} sentence(s) without a language: detected ({name}): {found}.")
    langs = list(dict.fromkeys(labels))
    lang_idx = np.array([langs.index(lang) for lang in labels], dtype=np.int64)  # [N]
    groups = table.role("group")
    group_names: dict[int, str] | None = None
    if groups is None:
        sentence_ids = np.arange(len(texts), dtype=np.int64)  # every sentence its own meaning
    else:
        sentence_ids, group_names = _number_groups(groups)
    return Sample(
        langs,
        np.unique(sentence_ids),
        texts,
        lang_idx,
        sentence_ids,
        source=table.name,
        group_names=group_names,
        grouped=groups is not None,
        notes=notes,
        from_user=True,
    )


def _number_groups(cells: list[str]) -> tuple[np.ndarray, dict[int, str] | None]:
    """The user's ids -> (a number per row; number -> the user's id, or None when the numbers are the user's ids).

    Whole-number ids are kept; others are numbered in order of first appearance. An empty id is a meaning of its own.
    """
    keys = [cell.strip() for cell in cells]
    named = [k for k in keys if k]
    if named and all(k.isdigit() and str(int(k)) == k and len(k) <= 15 for k in named):
        numbers = {k: int(k) for k in named}
        names = None
    else:
        numbers = {k: i for i, k in enumerate(dict.fromkeys(named))}
        names = {i: k for k, i in numbers.items()}
    free = itertools.count(max(numbers.values(), default=-1) + 1)  # a number of its own for each empty id
    return np.array([numbers[k] if k else next(free) for k in keys], dtype=np.int64), names


def _from_parallel(table: UserTable, detect: Detector | None) -> Sample:
    columns = list(table.languages)
    notes = []
    if table.has_header:
        labels = [c.strip() for c in columns]
    else:
        detector, name = _detector(detect)
        labels = []
        for c in columns:
            votes = Counter(detector(cell)[0] for cell in table.column(c)[:DETECT_CELLS])
            code = votes.most_common(1)[0][0]
            labels.append(code if code not in labels else f"{code} ({c})")
        shown = ", ".join(f"{c} = {lang}" for c, lang in zip(columns, labels))
        notes.append(
            f"No header: each column's language was detected ({name}): {shown}. "
            "Add a header row (en, de, ...) to name them."
        )
    n_rows = len(table)
    texts = [cell.strip() for c in columns for cell in table.column(c)]  # language-major, like FLORES
    lang_idx = np.repeat(np.arange(len(columns), dtype=np.int64), n_rows)  # [L * rows]
    sentence_ids = np.tile(np.arange(n_rows, dtype=np.int64), len(columns))  # [L * rows]
    return Sample(
        labels,
        np.arange(n_rows, dtype=np.int64),
        texts,
        lang_idx,
        sentence_ids,
        source=table.name,
        notes=notes,
        from_user=True,
    )
