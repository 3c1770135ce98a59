"""What the user-file reader returns: the table of a user's rows with the role of each column, and the rows it
refused (:mod:`mlse.data.user_files` reads; this module only holds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlse.data.records import PASTED
from mlse.data.types import ParallelCorpus, ScoredPairs
from mlse.errors import DataError

# role -> accepted column names (compared after lower-casing and turning spaces and hyphens into underscores)
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "sentence1": ("sentence1", "sentence_1", "s1", "text1", "text_1", "text_a", "sentence_a", "sentence_1_text"),
    "sentence2": ("sentence2", "sentence_2", "s2", "text2", "text_2", "text_b", "sentence_b", "sentence_2_text"),
    "gold": ("score", "gold", "label", "similarity", "rating", "gold_score", "relatedness_score"),
    "lang1": ("lang1", "lang_1", "language1", "language_1", "src_lang", "source_lang"),
    "lang2": ("lang2", "lang_2", "language2", "language_2", "tgt_lang", "target_lang"),
    "sentence": ("sentence", "text"),
    "lang": ("lang", "language", "lang_code", "language_code"),
    "group": ("id", "group", "sentence_id", "group_id"),
}


def stem(label: str) -> str:
    """A dataset name from a display name: ``pairs.tsv`` -> ``pairs``."""
    return Path(label).stem if label != PASTED else "pasted"


@dataclass(frozen=True)
class RowProblem:
    """One refused row: where it is and what is wrong with it."""

    source: str  # the file's display name
    line: int
    column: str | None  # "'score'" (by header name) or "3" (by position); None for the row as a whole
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: " + (f"column {self.column}: " if self.column else "") + self.message


@dataclass
class UserTable:
    """A user's rows, validated, with the role of each column.

    ``columns`` are the input's column names (the header's, or ``column1`` ... without one) and ``rows`` the input's
    cells of every kept row, so a scored file can give the user's columns back first. ``roles`` maps a role
    (``sentence1``, ``gold``, ``lang`` ...) to its column; for a parallel table ``languages`` lists its language
    columns in order.
    """

    kind: str
    name: str
    format: str
    columns: list[str]
    rows: list[list[str]]
    lines: list[int]  # the input line of each kept row (1-based)
    roles: dict[str, str] = field(default_factory=dict)
    languages: list[str] = field(default_factory=list)
    has_header: bool = False
    skipped: list[RowProblem] = field(default_factory=list)  # the first MAX_LISTED refused rows
    n_skipped: int = 0
    gold_range: tuple[float, float] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def role(self, role: str) -> list[str] | None:
        """The cells of the column that plays ``role``, or None when the table has none."""
        name = self.roles.get(role)
        return None if name is None else self.column(name)

    @property
    def gold(self) -> np.ndarray | None:
        cells = self.role("gold")
        return None if cells is None else np.array([float(c) for c in cells], dtype=np.float64)

    def frame(self):
        """The input's columns as a pandas DataFrame of the strings as read (the gold column as numbers). The columns
        are object columns holding the same strings, not copies (a 50 MB field stays one 50 MB string)."""
        import pandas as pd  # lazy: reading a file must not pay for pandas when nobody asks for a frame

        df = pd.DataFrame(self.rows, columns=self.columns, dtype=object)
        if "gold" in self.roles:
            df[self.roles["gold"]] = self.gold
        return df

    def to_scored_pairs(self) -> ScoredPairs:
        """A :class:`mlse.data.types.ScoredPairs` (needs a gold column)."""
        if self.kind != "pairs" or "gold" not in self.roles:
            raise DataError(
                f"{self.name}: no score column, so it cannot be compared with gold "
                f"(expected a column named {', '.join(ROLE_NAMES['gold'][:3])})"
            )
        return ScoredPairs(self.role("sentence1"), self.role("sentence2"), self.gold, name=stem(self.name))

    def to_parallel(self, first: str | None = None, second: str | None = None) -> ParallelCorpus:
        """Two language columns of a parallel table as a :class:`mlse.data.types.ParallelCorpus` (the first two by
        default)."""
        if self.kind != "parallel":
            raise DataError(f"{self.name}: expected parallel columns (one per language), got a {self.kind} table")
        a, b = first or self.languages[0], second or self.languages[1]
        for lang in (a, b):
            if lang not in self.languages:
                raise DataError(f"{self.name}: no column {lang!r}; its languages are {', '.join(self.languages)}")
        return ParallelCorpus(self.column(a), self.column(b), src_lang=a, tgt_lang=b, name=stem(self.name))
