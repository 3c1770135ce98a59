"""What the map tab shows for a :class:`~mlse.analysis.projection.LanguageMap`: one figure per space with its numbers,
a summary of the spaces side by side, the one-line reading (:mod:`mlse.analysis.map_reading`), a status line, the
table to pick a sentence from, and the highlight of one meaning; the FLORES sample and a user's own sentences share
all of it. Also which model the map opens on (:func:`map_default`). No gradio here.
"""

from __future__ import annotations

import shlex
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd

from mlse.analysis.map_mixing import NEIGHBOURS, mixed_share, neighbour_mixing, ring_offsets
from mlse.analysis.map_reading import pct, reading_of
from mlse.analysis.projection import SPACE_TITLES, SPACES, LanguageMap
from mlse.serving.app_state import map_opening
from mlse.ui.text import html_text, md_escape

HOVER_WIDTH = 70  # characters per hover line
FIGURE_HEIGHT = 520  # pixels; the width follows the page (two panels per row)
# What each panel should show when Stage 1 did its job (shown under the numbers).
EXPECTED = {
    "raw": "Backbone as is: a multilingual model keeps meaning *and* identifies the language.",
    "meaning": "Goal: probe near chance (language removed), retrieval high (meaning kept); colours mix.",
    "language": "Goal: probe high, retrieval low (no meaning left); colours form separate clusters.",
}
GOALS = {"raw": "(the backbone as is)", "meaning": "probe low, retrieval high", "language": "probe high, retrieval low"}


class MapOutput(NamedTuple):
    figures: list  # one plotly Figure per space in SPACES order, None where the model lacks the space
    metrics: list[str]  # markdown under each panel ("" where absent)
    note: str  # status line: what was projected, cache use, or the error / Stage-1 hint
    sentences: pd.DataFrame  # one row per meaning, id first: the table used to pick a sentence to highlight
    result: LanguageMap | None  # kept in gr.State for highlighting
    summary: str = ""  # the spaces' numbers side by side and how to read them (the grid's fourth cell)
    reading: str = ""  # one line under the panels: what the numbers say (mlse.analysis.map_reading)


def empty_output(note: str) -> MapOutput:
    return MapOutput([None] * len(SPACES), [""] * len(SPACES), note, pd.DataFrame({"id": [], "sentence": []}), None)


# -- the model the map opens on -------------------------------------------------------------------------------------
def map_default(models, preferred: str | None) -> tuple[str | None, str]:
    """The model the map opens on -> (name, a note for the page, "" when there is nothing to say): the choice is
    :func:`mlse.serving.app_state.map_opening`."""
    name = map_opening(models, preferred)
    if name is None or name != preferred:
        return name, ""
    return preferred, (
        f"No shipped Stage-1 head for **{md_escape(preferred)}**: the map opens on the backbone "
        "alone (raw panel only). Choose a `+s1` model for the meaning and language panels."
    )


# -- text helpers ---------------------------------------------------------------------------------------------------
def hover_text(text: str) -> str:
    """Plotly hover labels render a subset of HTML: escape the sentence, then wrap it with <br>."""
    lines = textwrap.wrap(text, HOVER_WIDTH) or [""]
    return "<br>".join(html_text(line) for line in lines[:8]) + ("<br>…" if len(lines) > 8 else "")


def stage1_hint(model_name: str) -> str:
    backbone = shlex.quote(model_name.replace("`", ""))
    return (
        f"**{md_escape(model_name)}** has no Stage-1 head, so only the raw panel is shown. Train one on this "
        f"backbone with `python -m mlse train stage1 --backbone {backbone}`; the run then appears in the model "
        f"list as `runs/<backbone>+s1` (reload the page)."
    )


# -- figures --------------------------------------------------------------------------------------------------------
def map_figure(result: LanguageMap, space: str, highlight_id: int | None = None):
    """One plotly scatter per language (same colour per language in every panel); hover shows the sentence. Each
    language's small offset makes translations sharing a point a ring; ``highlight_id``'s are drawn large."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it
    from plotly.colors import qualitative

    sample, view = result.sample, result.views[space]
    colours = qualitative.Dark24
    offsets = ring_offsets(len(sample.langs), view.coords)  # [L, 2]
    fig = go.Figure()
    for li, lang in enumerate(sample.langs):
        rows = np.flatnonzero(sample.lang_idx == li)  # [n]
        marker = {"color": colours[li % len(colours)], "size": 6, "opacity": 0.85}
        if highlight_id is not None:
            chosen = sample.sentence_ids[rows] == highlight_id
            marker.update(
                size=np.where(chosen, 16, 5).tolist(),
                opacity=np.where(chosen, 1.0, 0.12).tolist(),
                line={"width": np.where(chosen, 2, 0).tolist(), "color": "black"},
            )
        fig.add_scatter(
            x=view.coords[rows, 0] + offsets[li, 0],
            y=view.coords[rows, 1] + offsets[li, 1],
            mode="markers",
            name=lang,
            marker=marker,
            text=[hover_text(sample.texts[k]) for k in rows],
            customdata=sample.sentence_ids[rows],
            hovertemplate=f"<b>{html_text(lang)}</b> #%{{customdata}}<br>%{{text}}<extra></extra>",
        )
    # the legend goes below the map, so the points keep the panel's whole width
    fig.update_layout(
        title={"text": panel_title(result, space), "font": {"size": 15}},
        template="plotly_white",
        height=FIGURE_HEIGHT,
        autosize=True,
        hoverlabel={"align": "left"},
        legend={"itemsizing": "constant", "orientation": "h", "x": 0, "y": 0, "yanchor": "top"},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


# -- numbers and tables ---------------------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def panel_title(result: LanguageMap, space: str) -> str:
    """The panel's name and its two numbers: "Meaning (Stage 1) — language probe 35.9 %, retrieval@1 99.5 %"."""
    view = result.views[space]
    return (
        f"{html_text(view.title)} — language probe {pct(view.lang_id_accuracy)}, retrieval@1 {pct(view.retrieval_at1)}"
    )


def summary_markdown(result: LanguageMap) -> str:
    """The spaces' numbers side by side, what Stage 1 aims for in each, and what the two numbers are."""
    rows = [
        f"| {SPACE_TITLES[s]} | {pct(v.lang_id_accuracy)} | {pct(v.retrieval_at1)} | {GOALS[s]} |"
        for s, v in result.views.items()
    ]
    table = "| space | language probe | retrieval@1 | Stage 1 aims for |\n|---|---|---|---|\n" + "\n".join(rows)
    legend = (
        f"<small>**Language probe**: how often a linear classifier names a sentence's language (5 folds, a "
        f"sentence's translations held out together); chance {pct(result.chance)}. **Retrieval@1**: how often "
        "a sentence's nearest neighbour in another language is its translation. Each colour is a language, "
        "each point a sentence; hover a point to read it.</small>"
    )
    return f"**The spaces side by side**\n\n{table}\n\n{legend}"


def metrics_markdown(result: LanguageMap, space: str) -> str:
    """The numbers under a panel, with chance level and what to look for (or why a number cannot be measured)."""
    view, sample = result.views[space], result.sample
    if view.retrieval_at1 is None:
        retrieval = f"n/a ({md_escape(sample.retrieval_problem() or 'needs translations in 2 languages')})"
    else:
        retrieval = f"{view.retrieval_at1:.3f}"
    if view.lang_id_accuracy is None:
        probe = f"n/a, not shown ({md_escape(sample.probe_problem() or 'needs 2 languages and 2 sentences')})"
    else:
        probe = f"{_pct(view.lang_id_accuracy)} (chance {_pct(result.chance)})"
    cached = " · from cache" if view.from_cache else ""
    return (
        f"**Language-ID probe:** {probe}  \n**Translation retrieval@1:** {retrieval}  \n"
        f"**Languages mixed on the map:** {mixing_text(result, space)}  \n"
        f"<small>{EXPECTED.get(space, '')}{cached}</small>"
    )


def mixing_text(result: LanguageMap, space: str) -> str:
    """ "61 % (fully mixed: 88 %)": the share of each point's nearest map neighbours in another language."""
    sample = result.sample
    share = neighbour_mixing(result.views[space].coords, sample.lang_idx)
    mixed = mixed_share(sample.lang_idx)
    if share is None or mixed is None:
        return "n/a (needs 2 points)"
    near = f"{_pct(share)} of each point's {NEIGHBOURS} nearest neighbours are in another language"
    return f"{near} (languages mixed at random: {_pct(mixed)})"


def sentence_table(result: LanguageMap) -> pd.DataFrame:
    """One row per meaning (its English sentence when it has one), id first, for picking a highlight."""
    sample = result.sample
    if not sample.from_user:
        lang = "eng_Latn" if "eng_Latn" in sample.langs else sample.langs[0]
        texts = [sample.text(lang, i) for i in sample.ids]
        return pd.DataFrame({"id": sample.ids.astype(int), f"sentence ({lang})": texts})
    shown = [sample.shown_text(i) for i in sample.ids]
    table = {"id": sample.ids.astype(int)}
    if sample.group_names:
        table["your id"] = [sample.group_names.get(int(i), "") for i in sample.ids]
    table["languages"] = [len({lang for lang, _ in sample.members(i)}) for i in sample.ids]
    table["language"] = [lang for lang, _ in shown]
    table["sentence"] = [text for _, text in shown]
    return pd.DataFrame(table)


def render(result: LanguageMap, model_name: str, *, read_note: str = "") -> MapOutput:
    """Figures, numbers, status line and sentence table of a computed map."""
    figures = [map_figure(result, s) if s in result.views else None for s in SPACES]
    metrics = [metrics_markdown(result, s) if s in result.views else "" for s in SPACES]
    sample = result.sample
    cached = sum(v.from_cache for v in result.views.values())
    how = f"{md_escape(result.projection)}, seed {result.seed}; {cached} of {len(result.views)} panels from cache."
    if sample.from_user:
        langs = ", ".join(md_escape(lang) for lang in sample.langs)
        note = (
            f"{len(sample.texts)} sentences from {md_escape(sample.source)}: {len(sample.langs)} language(s) "
            f"({langs}), {sample.n} meaning(s), {sample.translated} with translations. {how} Hover a point to "
            "read it; pick a row below to highlight its translations."
        )
        note = "\n\n".join([part for part in (read_note, note) if part] + [md_escape(n) for n in sample.notes])
    else:
        note = (
            f"{len(sample.texts)} points: {len(sample.langs)} languages × {sample.n} FLORES sentences, {how} "
            "Hover a point to read it; pick a sentence below to highlight its translations."
        )
    if "meaning" not in result.views:
        note += "\n\n" + stage1_hint(model_name)
    return MapOutput(
        figures, metrics, note, sentence_table(result), result, summary_markdown(result), reading_of(result)
    )


def highlight(result: LanguageMap | None, sentence_id) -> tuple[list, str]:
    """Re-draw every panel with ``sentence_id``'s translations emphasised -> (figures, markdown of the translations)."""
    if result is None:
        return [None] * len(SPACES), "Project a sample first."
    try:
        sid = int(sentence_id)
    except (TypeError, ValueError, OverflowError):  # nothing chosen
        sid = None
    if sid not in set(result.sample.ids.tolist()):
        sid = None
    figures = [map_figure(result, s, sid) if s in result.views else None for s in SPACES]
    if sid is None:
        return figures, ""
    sample = result.sample
    members = sample.members(sid)
    rows = [f"| {md_escape(lang)} | {md_escape(text)} |" for lang, text in members]
    if sample.from_user:
        named = f" (your id {md_escape(sample.group_names[sid])})" if sid in (sample.group_names or {}) else ""
        alone = "" if len({lang for lang, _ in members}) > 1 else "\n\nNo translation of it is marked."
        head = f"**Sentence #{sid}**{named}, {len(members)} sentence(s):"
    else:
        head, alone = f"**Sentence #{sid}** in every language:", ""
    return figures, f"{head}\n\n| language | sentence |\n|---|---|\n" + "\n".join(rows) + alone
