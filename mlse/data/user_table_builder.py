"""The checks behind the user-file reader: from a file's records (or rows given as cells) to a
:class:`~mlse.data.user_table.UserTable`, deciding whether the first row is a header, which column plays which role
and which rows are refused (each with a message naming the file, the line and the column). The entry points, and the
rules applied here, are in :mod:`mlse.data.user_files`.
"""

from __future__ import annotations

import math
import re

from mlse.data.json_safe import finite_or_none
from mlse.data.records import cell_text, reads_as_number
from mlse.data.user_table import ROLE_NAMES, RowProblem, UserTable
from mlse.errors import DataError

MAX_LISTED = 50  # skipped rows kept with their message (all are counted)

_ROLE_OF = {name: role for role, names in ROLE_NAMES.items() for name in names}
_KIND_ROLES = {
    "pairs": ("sentence1", "sentence2", "gold", "lang1", "lang2"),
    "sentences": ("sentence", "lang", "group"),
}
# A language code as a column name: ISO 639-1 or 639-3, optionally with a script (FLORES: zho_Hans)
# or a region (pt_BR, en-US); all in lower or all in upper case (EN, DE), never a capitalised word (Yes, Ja)
_LANG_CODE = re.compile(r"^(?:[a-z]{2,3}|[A-Z]{2,3})(?:[_-](?:[A-Za-z]{4}|[A-Z]{2}))?$")


def _normal(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def is_language_code(name: str) -> bool:
    """True for a column name that reads as a language code and is no known column name (``id`` is an id)."""
    stripped = name.strip()
    return bool(_LANG_CODE.match(stripped)) and _normal(stripped) not in _ROLE_OF


class TableBuilder:
    """One table being read: its records become rows, each bad one raised or skipped (``bad_rows``)."""

    def __init__(self, label, fmt, kinds, header, gold_range, bad_rows, max_rows):
        if bad_rows not in ("raise", "skip"):
            raise ValueError(f"bad_rows must be 'raise' or 'skip', got {bad_rows!r}")
        self.label, self.fmt, self.kinds, self.header = label, fmt, kinds, header
        self.gold_range, self.bad_rows, self.max_rows = gold_range, bad_rows, max_rows
        self.skipped: list[RowProblem] = []
        self.n_skipped = 0
        self.kept = 0  # rows accepted so far
        self.header_line: int | None = None  # the header's line, once read (None: no header, or rows given as cells)
        # the layout, once decided (decide): the columns, whether the first record was a header, the kind, roles
        self.columns: list[str] = []
        self.has_header = False
        self.kind = ""
        self.roles: dict[str, str] = {}
        self.languages: list[str] = []
        if gold_range is not None:
            lo, hi = gold_range
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
                raise DataError(f"score range [{lo:g}, {hi:g}]: expected two numbers, low < high")

    # -- errors ----------------------------------------------------------------------------------------------------
    def fail(self, line: int | None, message: str):
        where = f"{self.label}:{line}: " if line is not None else f"{self.label}: "
        raise DataError(where + message)

    def bad_row(self, line: int, column: str | None, message: str) -> None:
        problem = RowProblem(self.label, line, column, message)
        if self.bad_rows == "raise":
            raise DataError(str(problem))
        self.n_skipped += 1
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append(problem)

    def no_rows(self):
        shown = {
            "pairs": "sentence1, sentence2 and an optional score",
            "sentences": "one sentence per row",
            "parallel": "one column per language",
        }
        expected = " or ".join(shown[k] for k in self.kinds)
        self.fail(None, f"no rows found (expected rows of {expected})")

    # -- the table -------------------------------------------------------------------------------------------------
    def build(self, records) -> UserTable:
        kept = [(line, fields) for line, fields in self.decide(records) if self.accept(line, fields)]
        self.require_rows(len(kept))
        return self.table([fields for _, fields in kept], [line for line, _ in kept])

    def table(self, rows: list[list[str]], lines: list[int], *, skipped: bool = True) -> UserTable:
        """The kept ``rows`` (read from ``lines``) in the settled layout; ``skipped``: with the refused rows."""
        refused, n_refused = (self.skipped, self.n_skipped) if skipped else ([], 0)
        return UserTable(
            self.kind,
            self.label,
            self.fmt,
            list(self.columns),
            rows,
            lines,
            dict(self.roles),
            list(self.languages),
            self.has_header,
            refused,
            n_refused,
            self.gold_range,
        )

    def decide(self, head: list, columns: list[str] | None = None) -> list:
        """Settle the table's columns, header, kind and roles from its first records ``head`` (all of them, or enough:
        the header and 51 rows; JSONL ``columns``: all keys); returns ``head``'s body records (:meth:`body_record`)."""
        if not head:
            self.no_rows()
        if self.fmt == "jsonl":
            self.columns, self.has_header = columns if columns is not None else self.jsonl_keys(head), True
            body = [self.body_record(record) for record in head]
        else:
            self.columns, self.has_header, body = self.delimited_columns(head)
        self.header_line = head[0][0] if self.has_header else None
        self.kind, self.roles, self.languages = self.assign_roles(self.columns, self.has_header, body)
        return body

    def layout(self) -> dict:
        """What :meth:`decide` settled, to read further records of the same table by (:meth:`settle`)."""
        keys = ("columns", "has_header", "header_line", "kind", "roles", "languages")
        return {key: getattr(self, key) for key in keys}

    def settle(self, layout: dict) -> TableBuilder:
        for key, value in layout.items():
            setattr(self, key, value)
        return self

    def accept(self, line: int, fields) -> bool:
        """Whether one body record (:meth:`body_record`) is a row; a bad one is raised or skipped (``bad_rows``), a row
        past ``max_rows`` refuses the table."""
        if isinstance(fields, str):  # a JSONL line that is no object
            problem = (None, fields)
        else:
            problem = self.ragged(fields) if len(fields) != len(self.columns) else self.check_row(fields)
        if problem is not None:
            self.bad_row(line, *problem)
            return False
        self.kept += 1
        if self.max_rows is not None and self.kept > self.max_rows:
            self.fail(None, f"more than {self.max_rows:,} row{'' if self.max_rows == 1 else 's'}, the limit here")
        return True

    def require_rows(self, kept: int) -> None:
        if not kept:
            if self.n_skipped:
                self.fail(None, f"no usable rows: all {self.n_skipped} were refused; the first: {self.skipped[0]}")
            self.no_rows()

    def jsonl_keys(self, records) -> list[str]:
        """The columns of a JSONL table: every key of its objects, in order of first appearance (one pass)."""
        columns: list[str] = []
        seen: dict[str, tuple[str, int]] = {}  # key, lower-cased -> (key, its first line)
        first = None
        for line, value in records:
            first = first or (line, value)
            for key in value if isinstance(value, dict) else ():
                if key in columns:
                    continue
                if key.strip().lower() in seen:
                    other, other_line = seen[key.strip().lower()]
                    self.fail(line, f"key {key!r} and key {other!r} (line {other_line}) differ only in case or spaces")
                seen[key.strip().lower()] = (key, line)
                columns.append(key)
        if not columns:
            if first is None:
                self.no_rows()
            line, message = first
            self.fail(line, message if isinstance(message, str) else "no keys in the JSON objects")
        return columns

    def body_record(self, record) -> tuple[int, list[str] | str]:
        """A record after the header as (line, the row's fields), or (line, why it is no row): a JSONL object's values
        in column order, or the key it misses that a role needs."""
        line, value = record
        if self.fmt != "jsonl" or isinstance(value, str):
            return record
        missing = [c for c in self.columns if c not in value]
        needed = [
            c
            for c in missing
            if _ROLE_OF.get(_normal(c)) in ("sentence1", "sentence2", "sentence", "gold") or is_language_code(c)
        ]
        if needed:
            return line, f"key {needed[0]!r} is missing"
        return line, [cell_text(value.get(c, "")) for c in self.columns]

    def delimited_columns(self, records):
        first_line, first = records[0]
        has_header = self.header if self.header is not None else self.looks_like_header(first, records[1:2])
        if has_header:
            columns = [c.strip() for c in first]
            if any(not c for c in columns):
                self.fail(first_line, f"column {columns.index('') + 1} of the header has no name")
            seen: dict[str, int] = {}
            for i, c in enumerate(columns, start=1):
                if (key := c.lower()) in seen:
                    self.fail(first_line, f"column {c!r} appears twice in the header (columns {seen[key]} and {i})")
                seen[key] = i
            return columns, True, records[1:]
        return [f"column{i}" for i in range(1, len(first) + 1)], False, records

    def looks_like_header(self, first: list[str], rest) -> bool:
        if any(_normal(c) in _ROLE_OF for c in first):
            return True
        if "parallel" in self.kinds and len(first) >= 2 and all(is_language_code(c) for c in first):
            return True
        if "pairs" in self.kinds and len(first) == 3 and not reads_as_number(first[2]):
            # a third cell that is no number heads a score column, unless the next row has no number there either
            return not rest or reads_as_number(rest[0][1][2] if len(rest[0][1]) > 2 else "")
        return False

    def assign_roles(self, columns, has_header, body):
        """(kind, role -> column, language columns)."""
        if has_header:
            roles: dict[str, str] = {}
            for c in columns:
                role = _ROLE_OF.get(_normal(c))
                if role is not None and role not in roles:
                    roles[role] = c
            languages = [c for c in columns if is_language_code(c)]
            if "pairs" in self.kinds and ("sentence1" in roles or "sentence2" in roles):
                return "pairs", self.require(roles, "pairs", columns), []
            if "sentences" in self.kinds and "sentence" in roles:
                return "sentences", self.require(roles, "sentences", columns), []
            if "parallel" in self.kinds and len(languages) >= 2:
                return "parallel", {}, languages
            if roles or self.header is not True or self.fmt == "jsonl" or ("parallel" in self.kinds and languages):
                self.fail(self.header_line, self.header_problem(columns))
            # header=True over the user's own names ("Satz 1", "Satz 2", "Note"): the columns by position
        width = len(columns)
        # 3 columns: pairs with a score, unless the third column holds no numbers and the table may be parallel
        scored = width == 3 and (
            "parallel" not in self.kinds
            or any(reads_as_number(f[2]) for _, f in body[:50] if not isinstance(f, str) and len(f) == 3)
        )
        if "pairs" in self.kinds and (scored or (width == 2 and self.kinds[0] == "pairs")):
            names = ["sentence1", "sentence2", "gold"][:width]
            return "pairs", dict(zip(names, columns)), []
        labels_second = width == 2 and all(
            _LANG_CODE.match(f[1].strip()) for _, f in body[:50] if not isinstance(f, str) and len(f) == 2
        )
        sentence_rows = width == 1 or (width == 2 and (labels_second or "parallel" not in self.kinds))
        if "sentences" in self.kinds and sentence_rows:
            return "sentences", dict(zip(["sentence", "lang"], columns)), []
        if "parallel" in self.kinds and width >= 2:
            return "parallel", {}, list(columns)
        if has_header:
            self.fail(self.header_line, self.header_problem(columns))
        comma = width == 1 and self.fmt == "tsv" and any("," in f[0] for _, f in body[:5] if not isinstance(f, str))
        hint = "; the rows hold no tab but commas: a CSV file? (name it .csv)" if comma else ""
        self.fail(body[0][0] if body else 1, self.position_problem(width) + hint)

    def header_problem(self, columns) -> str:
        has = ", ".join(repr(c) for c in columns)
        wanted = {
            "pairs": "sentence1 and sentence2 (optional: score, lang1, lang2)",
            "sentences": "sentence (optional: lang, id)",
            "parallel": "two or more language codes (en, de, zho_Hans ...)",
        }
        return f"the header has {has}; expected columns named " + ", or ".join(wanted[k] for k in self.kinds)

    def position_problem(self, width: int) -> str:
        wanted = {
            "pairs": "2 or 3 (sentence1, sentence2[, score])",
            "sentences": "1 or 2 (sentence[, language])",
            "parallel": "2 or more (one per language)",
        }
        expected = ", or ".join(wanted[k] for k in self.kinds)
        return f"{width} column(s) and no header; expected {expected}, or a header naming the columns"

    def require(self, roles, kind, columns) -> dict[str, str]:
        needed = ("sentence1", "sentence2") if kind == "pairs" else ("sentence",)
        for role in needed:
            if role not in roles:
                names = ", ".join(ROLE_NAMES[role][:4])
                has = ", ".join(repr(c) for c in columns)
                self.fail(self.header_line, f"no column for {role} (expected one named {names}; the header has {has})")
        return {r: c for r, c in roles.items() if r in _KIND_ROLES[kind]}

    def ragged(self, fields) -> tuple[str, str]:
        columns, has_header = self.columns, self.has_header
        n, m = len(columns), len(fields)
        counts = f"the row has {m} field(s), expected {n}" + (f": {', '.join(columns)}" if has_header else "")
        if m < n:
            return (repr(columns[m]) if has_header else str(m + 1)), f"missing ({counts})"
        return str(n + 1), f"unexpected extra field ({counts})"

    def check_row(self, fields) -> tuple[str, str] | None:
        columns, roles = self.columns, self.roles

        def col(name: str) -> str:
            return repr(name) if self.has_header else str(columns.index(name) + 1)

        text_columns = [roles[r] for r in ("sentence1", "sentence2", "sentence") if r in roles] + self.languages
        for name in text_columns:
            if not fields[columns.index(name)].strip():
                return col(name), "empty sentence"
        if "gold" in roles:
            cell = fields[columns.index(roles["gold"])]
            value = finite_or_none(cell)  # the finite number the cell holds, or None
            if value is None:
                comma = finite_or_none(cell.replace(",", ".")) is not None
                hint = "; write decimals with a dot (3.5, not 3,5)" if comma else ""
                return col(roles["gold"]), f"expected a number, got {cell.strip()!r}{hint}"
            if self.gold_range is not None:
                lo, hi = self.gold_range
                if not lo <= value <= hi:
                    return col(roles["gold"]), f"score {value:g} is outside the stated range [{lo:g}, {hi:g}]"
        return None
