"""How the app's tables read: words for column names, numbers as text at the precision that matters, one line a row.

gradio shows field names, every digit and (with ``wrap=True``) breaks "0.87" mid-number, so every tab builds its
tables from here: :data:`HEADERS` (field names -> words), :func:`number_text`, :func:`sortable` (text that still sorts
by value) and :data:`TABLE_OPTIONS` (cells never wrap). No gradio.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd

from mlse.data.json_safe import finite_or_none

CELL_CHARS = 40  # a sentence cell shows this many characters; a click shows the whole sentence (gradio's max_chars)
TABLE_OPTIONS = {"wrap": False, "max_chars": CELL_CHARS}  # what every gr.Dataframe is built with
# A pair's scores in every table: the cosine to 3 decimals (models often differ in the third), the 0-5 score to 2
COSINE_PLACES, CALIBRATED_PLACES = 3, 2

HEADERS = {
    # a retrieval error (Tatoeba or the user's bitext)
    "index": "row",
    "sim_retrieved": "cosine retrieved",
    "sim_gold": "cosine gold",
    "margin_retrieved": "margin retrieved",
    "margin_gold": "margin gold",
    "rank_of_gold": "rank of gold",
    "retrieved_a": "retrieved by A",
    "retrieved_b": "retrieved by B",
    # a pair whose cosine disagrees with its gold score
    "sentence1": "sentence 1",
    "sentence2": "sentence 2",
    "gold": "gold",
    "pred_as_gold": "cosine as gold",
    "diff": "off by",
    "rank_gap": "rank gap (points)",
    # correlations with gold (x 100) and the calibrated score's fit
    "pearson": "Pearson",
    "pearson_lo": "Pearson low",
    "pearson_hi": "Pearson high",
    "spearman": "Spearman",
    "spearman_lo": "Spearman low",
    "spearman_hi": "Spearman high",
    "pearson_calibrated": "Pearson, 0-5 score",
    "mae_calibrated": "mean error, 0-5 score",
}


def header(name: str) -> str:
    """The words a table shows for field ``name`` (the name itself when it already is words)."""
    return HEADERS.get(name, name)


def headers(names: list[str]) -> list[str]:
    return [header(n) for n in names]


def number_text(value, places: int, signed: bool = False) -> str:
    """``value`` with ``places`` decimals ("0.90"; "+0.35" when ``signed``, and "0.00", never "-0.00"), "" when it
    is missing or not finite."""
    number = finite_or_none(value)
    if number is None:
        return ""
    if round(number, places) == 0:
        number = 0.0  # "-0.00" would read as a negative difference
    return f"{number:+.{places}f}" if signed and number else f"{number:.{places}f}"


def numbers_as_text(frame: pd.DataFrame, places: dict[str, int], signed: tuple[str, ...] = ()) -> pd.DataFrame:
    """A copy of ``frame`` with each column of ``places`` written by :func:`number_text` (columns it lacks are
    skipped); the ones named in ``signed`` carry their sign ("+0.35"), for differences."""
    out = frame.copy()
    for column, digits in places.items():
        if column in out.columns:
            out[column] = [number_text(v, digits, column in signed) for v in out[column].tolist()]
    return out


def significant_text(value, places: int = 2) -> str:
    """``value`` with ``places`` decimals, and a small non-zero one with 2 significant digits instead of "0.00"
    (0.00123 -> "0.0012", 2e-5 -> "2e-05"); "" when missing, text that is not a number as it is."""
    text = number_text(value, places)
    if not text:
        return value if isinstance(value, str) else ""
    return f"{float(value):.2g}" if float(value) != 0 and float(text) == 0 else text


def sortable(frame: pd.DataFrame, places: dict[str, int | Callable[[object], str]]):
    """``frame`` for a non-interactive ``gr.Dataframe``: a pandas ``Styler`` showing each column of ``places`` as
    :func:`number_text` (or by the given function) while cells keep their numbers, so sorting sorts by value."""
    formats = {column: way if callable(way) else partial(number_text, places=way) for column, way in places.items()}
    return frame.style.format({column: way for column, way in formats.items() if column in frame})
