"""Tab 2: language vs meaning map.

A FLORES sample is projected to 2-D in each space of a model (raw backbone; a Stage-1 scorer's meaning and language
embeddings), with language-ID probe accuracy and retrieval@1 per panel (:mod:`mlse.ui.map_views`). A sentence chosen
in the table highlights its translations (gr.Plot has no click events). See docs/app/map.md.
"""

from __future__ import annotations

import time

from mlse.analysis.projection import SPACE_TITLES, SPACES, is_projected, language_map
from mlse.data.flores import flores_languages
from mlse.data.pairs import DEFAULT_MAP_LANGS
from mlse.errors import MlseError
from mlse.serving.procmem import releases_memory
from mlse.serving.warm import follow_step
from mlse.ui import map_upload
from mlse.ui.inputs import check_inputs
from mlse.ui.map_views import MapOutput, empty_output, highlight, map_default, render
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.preparing import map_warm_note, warm_map_step, with_preparing_note
from mlse.ui.text import md_escape
from mlse.ui.widgets import read_only_table, reporter

MAX_SENTENCES = 1012  # FLORES devtest size
DEFAULT_SENTENCES = 100
WARM_POLL_S = 2.0  # while the app's warm start prepares the default map, the tab reads its progress this often


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
    asked = langs if isinstance(langs, (list, tuple)) else [langs]  # an API caller may send anything
    langs = [lang for lang in asked if isinstance(lang, str) and lang.strip()]
    if not langs:
        return empty_output("Choose at least one language (two or more for retrieval and the language probe).")
    try:
        n = min(max(int(DEFAULT_SENTENCES if n in (None, "") else n), 1), MAX_SENTENCES)
    except (TypeError, ValueError):
        return empty_output(f"Sentences per language must be a whole number from 1 to {MAX_SENTENCES}.")
    try:
        model = state.encoder(model_name)
        waited = wait_for_warm(state, model_name, langs, n, method, progress)
        result = language_map(model, langs, n, data_dir=state.data_dir, method=method, progress=progress)
    except MlseError as exc:
        return empty_output(f"⚠️ {md_escape(str(exc))}")
    out = render(result, model_name)
    if waited is not None and all(view.from_cache for view in result.views.values()):
        reused = (
            f"Drawn from the app's warm start, which was computing this map when Project was pressed (waited "
            f"{waited:.0f} s for it; nothing computed twice)."
        )
        return out._replace(note=f"{reused}\n\n{out.note}")
    return out._replace(note=with_preparing_note("map", out.note))  # while the app's warm start still runs


def wait_for_warm(state, model_name, langs, n, method, progress=None) -> float | None:
    """When the app's warm start is computing this very map: wait for it, showing its count and ETA, -> seconds
    waited (the result is then cached); None when it is not (``language_map`` is single-flight either way)."""
    step = warm_map_step(state, model_name, langs, n, method)
    if step is None or step.state != "running":
        return None
    report = progress or (lambda fraction, message: None)
    started = time.monotonic()
    follow_step(
        step.name,
        lambda status, _: report(0.95 * status.fraction, f"the app's warm start is computing this map: {status.note}"),
    )
    return time.monotonic() - started


def warm_view(state, model_name, langs, n, shown=None, *, method: str = "umap") -> tuple[MapOutput | None, str]:
    """What the tab shows, opened or polled, while the app's warm start prepares its default map -> (the map once it
    is in the cache, else None; the warm's note, "" when it prepares nothing for these settings: stop polling)."""
    if shown is not None:
        return None, ""
    out = open_map(state, model_name, langs, n, method=method)
    if out is not None:
        return out, ""
    try:
        count = int(DEFAULT_SENTENCES if n in (None, "") else n)
    except (TypeError, ValueError):
        return None, ""
    step = warm_map_step(state, model_name, langs, count, method)
    return None, "" if step is None else map_warm_note(step)


def open_map(state, model_name, langs, n, shown=None, *, method: str = "umap") -> MapOutput | None:
    """What the tab draws when it is opened, until a map is shown: the map for its settings when every panel is cached
    (nothing encoded), else None (a cold map takes a minute)."""
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
    """(the model the map opens on, a note when it has no Stage-1 head): :func:`mlse.ui.map_views.map_default`."""
    return map_default(state.models(), state.preferred_model())


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
        return show(project_map(state, model_name, languages, sentences_per_language, progress=reporter(progress)))

    def watch(model_name, languages, sentences_per_language, shown, polled: bool) -> list:
        """The cached map drawn at once, else the warm start's count and ETA in the note (polling on while it says
        something)."""
        out, preparing = warm_view(state, model_name, languages, sentences_per_language, shown)
        if out is not None:
            return [*show(out), gr.Timer(active=False)]
        note_now = preparing or (base_note if polled and shown is None else gr.skip())
        return [*[gr.skip()] * (len(outputs) - 4), note_now, *[gr.skip()] * 3, gr.Timer(active=bool(preparing))]

    def on_open(model_name, languages, sentences_per_language, shown):
        return watch(model_name, languages, sentences_per_language, shown, polled=False)

    def on_poll(model_name, languages, sentences_per_language, shown):
        return watch(model_name, languages, sentences_per_language, shown, polled=True)

    def on_select(result, evt):
        row = evt.row_value or []
        figures, details = highlight(result, row[0] if row else None)
        return [*figure_updates(figures), details]

    # gradio finds the event data by its type hint, which must be the class itself (gradio is imported locally)
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
        base_note = "\n\n".join(part for part in (data_warning, opening_note) if part)
        note = gr.Markdown(base_note)
        warm_poll = gr.Timer(WARM_POLL_S, active=False)  # on while the warm start prepares the default map
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
            table = read_only_table(
                max_height=300, scale=3, label="Sentences (one row per meaning; a click on a sentence shows all of it)"
            )
            with gr.Column(scale=2):
                details = gr.Markdown()
                clear = gr.Button("Clear highlight", size="sm")
        result = gr.State(None)
        outputs = [*plots, *metrics, summary, reading, note, table, result, details]
        one_map_at_a_time = {"concurrency_limit": 1, "concurrency_id": "language_map"}  # UMAP is CPU-bound
        polls = {"concurrency_limit": 4, "concurrency_id": "map_warm_poll"}  # a status read: not behind a press
        button.click(on_project, [model, langs, n], outputs, api_name="language_map", **one_map_at_a_time)
        map_upload.wire(own, state, model, outputs, show, **one_map_at_a_time)
        # opened: the cached map drawn at once (open_map), so the tab's point shows without a press
        watched = [*outputs, warm_poll]
        tab.select(on_open, [model, langs, n, result], watched, api_visibility="private", **one_map_at_a_time)
        warm_poll.tick(
            on_poll, [model, langs, n, result], watched, api_visibility="private", show_progress="hidden", **polls
        )
        table.select(on_select, [result], [*plots, details], api_name="map_highlight", concurrency_limit=4)
        clear.click(on_clear, [result], [*plots, details], api_name=False, concurrency_limit=4)
        check_inputs(n, langs)
        check_inputs(model, allowed=state.model_names)
    return [ModelPicker(model)]
