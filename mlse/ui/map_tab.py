"""Tab 2: language vs meaning map.

A FLORES sample (the same sentences in several languages) is projected to 2-D in each space of a model: the raw
backbone and, for a scorer with a Stage-1 head, its meaning and language embeddings. The tab opens on the shipped
Stage-1 scorer of the first default backbone (:func:`mlse.ui.map_views.map_default`), so its point shows at once. The
panels sit in a 2 x 2 grid, the fourth cell comparing the spaces; each panel's title and the lines under it give the
language-ID probe accuracy and translation retrieval@1, the two numbers that say whether a space groups by language or
by meaning, and one line under the grid reads them (:mod:`mlse.analysis.map_reading`). Choosing a sentence in the
table highlights its translations in every panel (gr.Plot has no click events).

Below the FLORES controls, "Map your own sentences" (:mod:`mlse.ui.map_upload`) projects a visitor's file or pasted
sentences into the same panels, numbers and table.
"""

from __future__ import annotations

import numpy as np

from mlse.analysis.projection import SPACE_TITLES, SPACES, is_projected, language_map
from mlse.data.flores import flores_languages
from mlse.data.pairs import DEFAULT_MAP_LANGS
from mlse.errors import MlseError
from mlse.serving.procmem import releases_memory
from mlse.ui import map_upload
from mlse.ui.inputs import check_inputs
from mlse.ui.map_views import MapOutput, empty_output, highlight, hover_text, map_default, render  # noqa: F401
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.preparing import with_preparing_note
from mlse.ui.tables import TABLE_OPTIONS
from mlse.ui.text import md_escape

project_upload = map_upload.project_upload  # the "your own sentences" handler, beside the FLORES one

MAX_SENTENCES = 1012  # FLORES devtest size
DEFAULT_SENTENCES = 100


INTRO = (
    "Project the same FLORES sentences in several languages. In the **raw** space of a multilingual model "
    "translations lie close but languages stay identifiable; Stage 1 splits that into a **meaning** space "
    "(colours should mix) and a **language** space (colours should separate)."
)


# -- handlers -------------------------------------------------------------------------------------------------------
@releases_memory
def project_map(
    state, model_name: str, langs: list[str] | None, n, *, method: str = "umap", progress=None
) -> MapOutput:
    """Project the FLORES sample in every space of the chosen model (cached) -> figures, metrics, note, table."""
    if not model_name or not isinstance(model_name, str):
        return empty_output("Choose a model.")
    langs = [
        lang
        for lang in (langs if isinstance(langs, (list, tuple)) else [langs])
        if isinstance(lang, str) and lang.strip()
    ]  # an API caller may send anything
    if not langs:
        return empty_output("Choose at least one language (two or more for retrieval and the language probe).")
    try:
        n = int(np.clip(int(DEFAULT_SENTENCES if n is None or n == "" else n), 1, MAX_SENTENCES))
    except (TypeError, ValueError):
        return empty_output(f"Sentences per language must be a whole number from 1 to {MAX_SENTENCES}.")
    try:
        model = state.encoder(model_name)
        result = language_map(model, langs, n, data_dir=state.data_dir, method=method, progress=progress)
    except MlseError as exc:
        return empty_output(f"⚠️ {md_escape(str(exc))}")
    out = render(result, model_name)
    return out._replace(note=with_preparing_note(state, "map", out.note))  # while the app's warm start still runs


def open_map(state, model_name, langs, n, shown=None, *, method: str = "umap") -> MapOutput | None:
    """What the tab draws when it is opened: the map for its current settings when every panel is in the cache (after
    ``mlse warm`` or the app's warm start; a quarter second, nothing encoded), else None (the visitor presses
    Project; a cold map takes a minute and must not start because a tab was looked at). None as well once a map
    is shown."""
    if shown is not None or not isinstance(model_name, str) or not model_name:
        return None
    try:
        langs = [lang for lang in (langs or []) if isinstance(lang, str) and lang.strip()]
        count = int(DEFAULT_SENTENCES if n in (None, "") else n)
        if not langs or not is_projected(
            state.encoder(model_name), langs, count, data_dir=state.data_dir, method=method
        ):
            return None
    except (MlseError, TypeError, ValueError):  # a model or data that does not load: the press says why
        return None
    return project_map(state, model_name, langs, count, method=method)


def default_choice(state) -> tuple[str | None, str]:
    """(the model the map opens on, a note when it has no Stage-1 head): the shipped Stage-1 scorer of the app's
    preferred backbone (``shipped/me5-small+s1`` on a full install), else that backbone (see ``map_default``)."""
    return map_default(state.models(), state.preferred_model())


def default_model(state) -> str | None:
    return default_choice(state)[0]


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

    def show(out: MapOutput) -> list:
        numbers = [gr.update(value=m, visible=bool(m)) for m in out.metrics]
        numbers.append(gr.update(value=out.summary, visible=bool(out.summary)))
        reading = f"**Reading:** {out.reading}" if out.reading else ""
        return [*figure_updates(out.figures), *numbers, reading, out.note, out.sentences, out.result, ""]

    def on_project(model_name, languages, sentences_per_language, progress=gr.Progress()):
        return show(
            project_map(
                state,
                model_name,
                languages,
                sentences_per_language,
                progress=lambda fraction, message: progress(fraction, desc=message),
            )
        )

    def on_open(model_name, languages, sentences_per_language, shown):
        out = open_map(state, model_name, languages, sentences_per_language, shown)
        return [gr.skip()] * len(outputs) if out is None else show(out)

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
    opening, opening_note = default_choice(state)
    with gr.Tab("Language vs meaning map") as tab:
        gr.Markdown(INTRO)
        with gr.Row():
            model = gr.Dropdown(state.model_names(), value=opening, label="Model", scale=2)
            n = gr.Slider(2, MAX_SENTENCES, value=DEFAULT_SENTENCES, step=1, label="Sentences per language", scale=2)
        langs = gr.CheckboxGroup(languages, value=default_langs, label="Languages (FLORES-200 devtest)")
        button = gr.Button("Project", variant="primary")
        own = map_upload.build_section()
        note = gr.Markdown("\n\n".join(part for part in (data_warning, opening_note) if part))
        plots, metrics = [], []

        def panel(space: str) -> None:  # half the page wide; a narrow screen stacks them
            with gr.Column(min_width=420):
                plots.append(gr.Plot(label=SPACE_TITLES[space], visible=space == "raw"))
                metrics.append(gr.Markdown(visible=space == "raw"))

        raw, meaning, language = SPACES  # a 2 x 2 grid: raw | meaning, language | the spaces side by side
        with gr.Row(equal_height=False):
            panel(raw)
            panel(meaning)
        with gr.Row(equal_height=False):
            panel(language)
            with gr.Column(min_width=420):
                summary = gr.Markdown(visible=False)
        reading = gr.Markdown(elem_id="map-reading")
        gr.Markdown("**Highlight a sentence:** click a row to emphasise its translations in every panel.")
        with gr.Row():
            table = gr.Dataframe(
                interactive=False,
                max_height=300,
                scale=3,
                label="Sentences (one row per meaning; a click on a sentence shows all of it)",
                **TABLE_OPTIONS,
            )
            with gr.Column(scale=2):
                details = gr.Markdown()
                clear = gr.Button("Clear highlight", size="sm")
        result = gr.State(None)
        outputs = [*plots, *metrics, summary, reading, note, table, result, details]
        one_map_at_a_time = {"concurrency_limit": 1, "concurrency_id": "language_map"}  # UMAP is CPU-bound
        button.click(on_project, [model, langs, n], outputs, api_name="language_map", **one_map_at_a_time)
        map_upload.wire(own, state, model, outputs, show, **one_map_at_a_time)
        # opened: the cached map drawn at once (open_map), so the tab's point shows without a press
        tab.select(on_open, [model, langs, n, result], outputs, api_visibility="private", **one_map_at_a_time)
        table.select(on_select, [result], [*plots, details], api_name="map_highlight", concurrency_limit=4)
        clear.click(on_clear, [result], [*plots, details], api_name=False, concurrency_limit=4)
        check_inputs(n, langs)
        check_inputs(model, allowed=state.model_names)
    return [ModelPicker(model)]
