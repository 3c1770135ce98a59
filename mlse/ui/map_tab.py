"""Tab 2: language vs meaning map.

A FLORES sample (the same sentences in several languages) is projected to 2-D in each space of a model: the raw
backbone and, for a scorer with a Stage-1 head, its meaning and language embeddings. Under each panel: the language-ID
probe accuracy and translation retrieval@1, the two numbers that say whether a space groups by language or by meaning.
Choosing a sentence in the table highlights its translations in every panel (gr.Plot has no click events).
"""

from __future__ import annotations

import shlex
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd

from mlse.analysis.projection import SPACE_TITLES, SPACES, LanguageMap, language_map
from mlse.data.flores import flores_languages
from mlse.data.pairs import DEFAULT_MAP_LANGS
from mlse.errors import MlseError
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.text import html_text, md_escape

MAX_SENTENCES = 1012  # FLORES devtest size
DEFAULT_SENTENCES = 100
HOVER_WIDTH = 70  # characters per hover line
# What each panel should show when Stage 1 did its job (shown under the numbers).
EXPECTED = {
    "raw": "Backbone as is: a multilingual model keeps meaning *and* identifies the language.",
    "meaning": "Goal: probe near chance (language removed), retrieval high (meaning kept); colours mix.",
    "language": "Goal: probe high, retrieval low (no meaning left); colours form separate clusters.",
}


INTRO = ("Project the same FLORES sentences in several languages. In the **raw** space of a multilingual model "
         "translations lie close but languages stay identifiable; Stage 1 splits that into a **meaning** space "
         "(colours should mix) and a **language** space (colours should separate).")  # fmt: skip


class MapOutput(NamedTuple):
    figures: list  # one plotly Figure per space in SPACES order, None where the model lacks the space
    metrics: list[str]  # markdown under each panel ("" where absent)
    note: str  # status line: what was projected, cache use, or the error / Stage-1 hint
    sentences: pd.DataFrame  # [n, 2] id, sentence: the table used to pick a sentence to highlight
    result: LanguageMap | None  # kept in gr.State for highlighting


# -- text helpers ---------------------------------------------------------------------------------------------------
def hover_text(text: str) -> str:
    """Plotly hover labels render a subset of HTML: escape the sentence, then wrap it with <br>."""
    lines = textwrap.wrap(text, HOVER_WIDTH) or [""]
    return "<br>".join(html_text(line) for line in lines[:8]) + ("<br>…" if len(lines) > 8 else "")


# -- figures --------------------------------------------------------------------------------------------------------
def _palette() -> list[str]:
    from plotly.colors import qualitative  # lazy: plotly is slow to import; only figures need it

    return list(qualitative.Dark24)


def map_figure(result: LanguageMap, space: str, highlight_id: int | None = None):
    """One plotly scatter per language (same colour per language in every panel); hover shows the sentence.

    With ``highlight_id`` the translations of that sentence are drawn large and outlined and the rest faded.
    """
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    sample, view = result.sample, result.views[space]
    colours = _palette()
    fig = go.Figure()
    for li, lang in enumerate(sample.langs):
        rows = np.flatnonzero(sample.lang_idx == li)  # [n]
        chosen = sample.sentence_ids[rows] == highlight_id if highlight_id is not None else np.zeros(len(rows), bool)
        marker = {"color": colours[li % len(colours)], "size": 6, "opacity": 0.75}
        if highlight_id is not None:
            marker.update(size=np.where(chosen, 16, 5).tolist(), opacity=np.where(chosen, 1.0, 0.12).tolist(),
                          line={"width": np.where(chosen, 2, 0).tolist(), "color": "black"})  # fmt: skip
        fig.add_trace(go.Scatter(
            x=view.coords[rows, 0], y=view.coords[rows, 1], mode="markers", name=lang, marker=marker,
            text=[hover_text(sample.texts[k]) for k in rows], customdata=sample.sentence_ids[rows],
            hovertemplate=f"<b>{html_text(lang)}</b> #%{{customdata}}<br>%{{text}}<extra></extra>",
        ))  # fmt: skip
    fig.update_layout(title=view.title, template="plotly_white", height=460, legend={"itemsizing": "constant"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10}, hoverlabel={"align": "left"})  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def metrics_markdown(result: LanguageMap, space: str) -> str:
    """The numbers under a panel, with chance level and what to look for."""
    view = result.views[space]
    retrieval = "n/a (needs 2 languages)" if view.retrieval_at1 is None else f"{view.retrieval_at1:.3f}"
    probe = _pct(view.lang_id_accuracy)
    if view.lang_id_accuracy is not None:
        probe += f" (chance {_pct(result.chance)})"
    cached = " · from cache" if view.from_cache else ""
    return (f"**Language-ID probe:** {probe}  \n**Translation retrieval@1:** {retrieval}  \n"
            f"<small>{EXPECTED.get(space, '')}{cached}</small>")  # fmt: skip


def sentence_table(result: LanguageMap) -> pd.DataFrame:
    """One row per sampled sentence (English text when English is in the sample), for picking a highlight."""
    sample = result.sample
    lang = "eng_Latn" if "eng_Latn" in sample.langs else sample.langs[0]
    texts = [sample.text(lang, i) for i in sample.ids]
    return pd.DataFrame({"id": sample.ids.astype(int), f"sentence ({lang})": texts})


def stage1_hint(model_name: str) -> str:
    backbone = shlex.quote(model_name.replace("`", ""))
    return (f"**{md_escape(model_name)}** has no Stage-1 head, so only the raw panel is shown. Train one on this "
            f"backbone with `python -m mlse train stage1 --backbone {backbone}`; the run then appears in the model "
            f"list as `runs/<backbone>+s1` (reload the page).")  # fmt: skip


# -- handlers -------------------------------------------------------------------------------------------------------
def _empty(note: str) -> MapOutput:
    return MapOutput([None] * len(SPACES), [""] * len(SPACES), note, pd.DataFrame({"id": [], "sentence": []}), None)


def project_map(
    state, model_name: str, langs: list[str] | None, n, *, method: str = "umap", progress=None
) -> MapOutput:
    """Project the FLORES sample in every space of the chosen model (cached) -> figures, metrics, note, table."""
    if not model_name or not isinstance(model_name, str):
        return _empty("Choose a model.")
    langs = [lang for lang in (langs if isinstance(langs, (list, tuple)) else [langs])
             if isinstance(lang, str) and lang.strip()]  # an API caller may send anything  # fmt: skip
    if not langs:
        return _empty("Choose at least one language (two or more for retrieval and the language probe).")
    try:
        n = int(np.clip(int(DEFAULT_SENTENCES if n is None or n == "" else n), 1, MAX_SENTENCES))
    except (TypeError, ValueError):
        return _empty(f"Sentences per language must be a whole number from 1 to {MAX_SENTENCES}.")
    try:
        model = state.encoder(model_name)
        result = language_map(model, langs, n, data_dir=state.data_dir, method=method,
                              progress=progress)  # fmt: skip
    except MlseError as exc:
        return _empty(f"⚠️ {md_escape(str(exc))}")
    return _render(result, model_name)


def _render(result: LanguageMap, model_name: str, highlight_id: int | None = None) -> MapOutput:
    figures = [map_figure(result, s, highlight_id) if s in result.views else None for s in SPACES]
    metrics = [metrics_markdown(result, s) if s in result.views else "" for s in SPACES]
    sample = result.sample
    cached = sum(v.from_cache for v in result.views.values())
    note = (f"{len(sample.texts)} points: {len(sample.langs)} languages × {sample.n} FLORES sentences, "
            f"{result.method.upper()} (cosine, seed {result.seed}); {cached} of {len(result.views)} panels from cache. "
            "Hover a point to read it; pick a sentence below to highlight its translations.")  # fmt: skip
    if "meaning" not in result.views:
        note += "\n\n" + stage1_hint(model_name)
    return MapOutput(figures, metrics, note, sentence_table(result), result)


def highlight(result: LanguageMap | None, sentence_id) -> tuple[list, str]:
    """Re-draw every panel with ``sentence_id``'s translations emphasised -> (figures, markdown of the translations)."""
    if result is None:
        return [None] * len(SPACES), "Project a sample first."
    try:
        sid = int(sentence_id) if sentence_id is not None and str(sentence_id).strip() != "" else None
    except (TypeError, ValueError):
        sid = None
    if sid is not None and sid not in set(result.sample.ids.tolist()):
        sid = None
    figures = [map_figure(result, s, sid) if s in result.views else None for s in SPACES]
    if sid is None:
        return figures, ""
    rows = [f"| {md_escape(lang)} | {md_escape(result.sample.text(lang, sid))} |" for lang in result.sample.langs]
    return figures, f"**Sentence #{sid}** in every language:\n\n| language | sentence |\n|---|---|\n" + "\n".join(rows)


def default_model(state) -> str | None:
    """The app's preferred model (the first default that loads here, me5-small on a full install), else the first."""
    return state.preferred_model()


def language_choices(state) -> tuple[list[str], list[str], str]:
    """(FLORES languages found, the default selection, a warning when the data directory is missing)."""
    try:
        found = flores_languages(state.data_dir)
    except MlseError as exc:
        return list(DEFAULT_MAP_LANGS), list(DEFAULT_MAP_LANGS), f"⚠️ {md_escape(str(exc))}"
    return found, [lang for lang in DEFAULT_MAP_LANGS if lang in found] or found[:8], ""


# -- layout ---------------------------------------------------------------------------------------------------------
def build_tab(state) -> list[ModelPicker]:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    def figure_updates(figures):
        return [gr.update(value=f, visible=f is not None) for f in figures]

    def on_project(model_name, langs, n, progress=gr.Progress()):
        out = project_map(state, model_name, langs, n,
                          progress=lambda fraction, message: progress(fraction, desc=message))  # fmt: skip
        metric_updates = [gr.update(value=m, visible=bool(m)) for m in out.metrics]
        return [*figure_updates(out.figures), *metric_updates, out.note, out.sentences, out.result, ""]

    def on_select(result, evt):
        row = evt.row_value or []
        figures, details = highlight(result, row[0] if row else None)
        return [*figure_updates(figures), details]

    # gradio finds the event-data parameter by its type hint; with postponed annotations the string "gr.SelectData"
    # cannot be resolved from this module's globals (gradio is imported locally), so give it the class itself.
    on_select.__annotations__["evt"] = gr.SelectData

    def on_clear(result):
        figures, _ = highlight(result, None)
        return [*figure_updates(figures), ""]

    languages, default_langs, data_warning = language_choices(state)
    with gr.Tab("Language vs meaning map"):
        gr.Markdown(INTRO)
        with gr.Row():
            model = gr.Dropdown(state.model_names(), value=default_model(state), label="Model", scale=2)
            n = gr.Slider(2, MAX_SENTENCES, value=DEFAULT_SENTENCES, step=1, label="Sentences per language", scale=2)
        langs = gr.CheckboxGroup(languages, value=default_langs, label="Languages (FLORES-200 devtest)")
        button = gr.Button("Project", variant="primary")
        note = gr.Markdown(data_warning)
        plots, metrics = [], []
        with gr.Row():
            for space in SPACES:
                with gr.Column(min_width=300):
                    plots.append(gr.Plot(label=SPACE_TITLES[space], visible=space == "raw"))
                    metrics.append(gr.Markdown(visible=space == "raw"))
        gr.Markdown("**Highlight a sentence:** click a row to emphasise its translations in every panel.")
        with gr.Row():
            table = gr.Dataframe(interactive=False, max_height=300, wrap=True, scale=3, label="Sampled sentences")
            with gr.Column(scale=2):
                details = gr.Markdown()
                clear = gr.Button("Clear highlight", size="sm")
        result = gr.State(None)
        button.click(on_project, [model, langs, n], [*plots, *metrics, note, table, result, details],
                     api_name="language_map", concurrency_limit=1)  # fmt: skip
        table.select(on_select, [result], [*plots, details], api_name="map_highlight", concurrency_limit=4)
        clear.click(on_clear, [result], [*plots, details], api_name=False, concurrency_limit=4)
        check_inputs(n, langs)
        check_inputs(model, allowed=state.model_names)
    return [ModelPicker(model)]
