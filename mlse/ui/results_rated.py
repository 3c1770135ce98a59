"""The Results tab's "rated / unrated languages" split: how a model does on language pairs it learnt rated pairs in
against pairs it did not (the leave-languages-out protocol, :mod:`mlse.experiments.unrated`), so the gap is on screen.

Sources: a protocol result (kind ``unrated``; an incomplete one says so in ``status`` and has no mean row), and an STS
evaluation (kind ``eval``) of a run trained on rated pairs of only some languages.
"""

from __future__ import annotations

from pathlib import Path

from mlse.data.json_safe import finite_or_none
from mlse.dirs import runs_dir
from mlse.runs.folders import rated_languages
from mlse.ui.tables import sortable

SPLIT_COLUMNS = ["model", "pair", "rated", "unrated", "gap", "status", "source"]
INCOMPLETE = "incomplete: not compared"
_NUMBERS = ["rated", "unrated", "gap"]
SPLIT_PLACES = dict.fromkeys(_NUMBERS, 2)  # Spearman x 100, as the Results table writes it


def _run_rated(model: str) -> tuple[str, ...] | None:
    """The rated languages of an evaluated model named by a path (as given, or under the runs directory)."""
    for candidate in (Path(model), runs_dir() / model):
        try:
            if candidate.exists():
                return rated_languages(candidate)
        except OSError:
            continue
    return None


def rated_split(frame):
    """(the split table, a markdown note); empty (with a note saying how to make one) when no result has a split."""
    import pandas as pd  # lazy: pandas costs ~0.5 s to import; the tab's table needs it anyway

    rows: list[dict] = []
    protocol = frame[frame["kind"] == "unrated"]
    for (model, source), group in protocol.groupby(["model", "source"], sort=True):
        incomplete = bool((group["metric"] == "incomplete").any())
        status = INCOMPLETE if incomplete else "complete"
        pairs = group[~group["key"].astype(str).str.startswith("avg:") & (group["key"].astype(str) != "")]
        wide = pairs.pivot_table(index="key", columns="metric", values="value", aggfunc="first", sort=False)
        rows += [
            _row(model, pair, *(values.get(c) for c in _NUMBERS), status, source) for pair, values in wide.iterrows()
        ]
        if not incomplete and len(wide):
            rows.append(_row(model, "mean", *wide.reindex(columns=_NUMBERS).mean(), status, source))
    evals = frame[(frame["kind"] == "eval") & (frame["task"] == "sts") & (frame["metric"] == "spearman")]
    for model, group in evals.groupby("model", sort=True):
        rated = _run_rated(str(model))
        if rated is None:
            continue
        for _, r in group[~group["key"].astype(str).str.startswith("avg:")].iterrows():
            split = (
                (r["value"], None) if all(lang in rated for lang in str(r["key"]).split("-")) else (None, r["value"])
            )
            rows.append(_row(model, r["key"], *split, None, "", r["source"]))
    table = pd.DataFrame(rows, columns=SPLIT_COLUMNS)
    if table.empty:
        note = (
            "No run trained without some languages' rated pairs yet: `python -m mlse experiment unrated --recipes "
            "sts-cosent+lora --folds de,nl,pl --max-steps 40` makes one."
        )
    else:
        note = (
            "Rated / unrated languages: Spearman × 100 on pairs whose languages the model learnt rated pairs in "
            "(*rated*) and on pairs it did not (*unrated*); for a protocol result, the same pair with and without the "
            f"language's rated pairs and their gap. Rows marked *{INCOMPLETE}* come from a run stopped before its end."
        )
    return table, note


def split_shown(table):
    """The split table as the page shows it: Spearman and gap with 2 decimals, still sorted as numbers."""
    return sortable(table, SPLIT_PLACES)


def _row(model, pair, rated, unrated, gap, status, source) -> dict:
    numbers = [finite_or_none(x) for x in (rated, unrated, gap)]
    return dict(zip(SPLIT_COLUMNS, (model, pair, *numbers, status, source)))
