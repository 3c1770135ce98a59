"""The user's own bitext for the Tatoeba errors tab: an upload or pasted rows read as two aligned columns.

A header of language codes (``en<TAB>de``) names the columns, else "src" and "tgt"; of more columns the user names two
(:func:`pick_columns`). Repeated pairs count once and a single pair is refused
(:func:`mlse.evaluation.bitext_view.prepare_bitext`). No gradio.
"""

from __future__ import annotations

import re

from mlse.data.types import ParallelCorpus
from mlse.data.user_files import UserTable
from mlse.dirs import assets_dir
from mlse.errors import DataError, MlseError
from mlse.evaluation.bitext_view import prepare_bitext
from mlse.ui.text import md_escape
from mlse.ui.uploads import read_upload

UNNAMED = ("src", "tgt")  # the two sides of a bitext without a header
EXAMPLE = assets_dir() / "examples" / "bitext.tsv"  # 40 en-de pairs


def pick_columns(table: UserTable, choice: str | None = None) -> tuple[str, str, str]:
    """(source column, target column, a note saying which were used when the table has more than two). ``choice``:
    "" for the first two, else two column names (case-insensitive) or 1-based positions ("en, fr" or "1 3")."""
    columns = table.languages
    offer = ", ".join(f"{i} = {c}" for i, c in enumerate(columns, start=1))
    wanted = [w for w in re.split(r"[,;\s]+", (choice or "").strip()) if w]
    if not wanted:
        note = (
            f"The file has {len(columns)} language columns ({offer}); using the first two, {columns[0]} and "
            f"{columns[1]}. Name two under Columns to use others."
        )
        return columns[0], columns[1], note if len(columns) != 2 else ""
    if len(wanted) != 2:
        raise DataError(f"Columns: expected two column names or numbers, got {choice.strip()!r}; the file has {offer}")
    picked = [_column(table, w, offer) for w in wanted]
    if picked[0] == picked[1]:
        raise DataError(f"Columns: {choice.strip()!r} names the same column twice; choose two of {offer}")
    note = f"Using columns {picked[0]} and {picked[1]} of {len(columns)}." if len(columns) > 2 else ""
    return picked[0], picked[1], note


def _column(table: UserTable, word: str, offer: str) -> str:
    columns = table.languages
    if word.isdigit() and 1 <= int(word) <= len(columns):
        return columns[int(word) - 1]
    by_name = {c.lower(): c for c in columns}
    if word.lower() in by_name:
        return by_name[word.lower()]
    raise DataError(f"Columns: no column {word!r}; the file has {offer}")


def to_bitext(table: UserTable, choice: str | None = None) -> tuple[ParallelCorpus, list[str]]:
    """(the two chosen columns as a corpus ready to score, notes on the columns used and on repeated pairs)."""
    src, tgt, which = pick_columns(table, choice)
    corpus = table.to_parallel(src, tgt)
    names = (src, tgt)
    if not table.has_header:
        plain = [src, tgt] == table.languages  # two columns, in their order
        names = UNNAMED if plain else (f"column {src.removeprefix('column')}", f"column {tgt.removeprefix('column')}")
    corpus = ParallelCorpus(corpus.src, corpus.tgt, *names, name=table.name)  # the name the user gave, with suffix
    corpus, repeated = prepare_bitext(corpus)
    return corpus, [n for n in (which, repeated) if n]


def read_bitext(file, pasted: str | None, columns: str | None = None) -> tuple[ParallelCorpus | None, str]:
    """(the user's bitext, or None; a markdown message on what was read, or why nothing was)."""
    table, message = read_upload(file, pasted, kind="parallel")
    if table is None:
        return None, message
    try:
        corpus, notes = to_bitext(table, columns)
    except MlseError as exc:
        return None, "\n\n".join([message, md_escape(str(exc))])
    return corpus, "\n\n".join([message, *(md_escape(n) for n in notes)])


def direction_labels(corpus: ParallelCorpus) -> dict[str, str]:
    """Tatoeba's direction names ("to_en": src queries tgt) -> what the tab shows for this bitext ("en→de")."""
    return {"to_en": f"{corpus.src_lang}→{corpus.tgt_lang}", "from_en": f"{corpus.tgt_lang}→{corpus.src_lang}"}
