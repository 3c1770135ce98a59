"""The map tab's "your own sentences" section: a visitor's file or pasted sentences projected like the FLORES sample.

Sentences one per row (an optional ``lang`` column, else each language is detected; an optional ``id`` / ``group``:
rows sharing an id are translations of one meaning), or parallel columns, one per language. :func:`project_upload`
returns the same :class:`~mlse.ui.map_views.MapOutput` as the FLORES handler, so the same panels and table show it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from mlse.analysis.projection import language_map
from mlse.analysis.user_sample import user_sample
from mlse.dirs import assets_dir
from mlse.errors import MlseError
from mlse.ui.map_views import MapOutput, empty_output, render
from mlse.ui.text import md_escape
from mlse.ui.uploads import read_upload
from mlse.ui.widgets import reporter, upload_with_examples

KINDS = ("sentences", "parallel")
EXAMPLES = assets_dir() / "examples"
EXAMPLE_FILES = {  # the paste buttons' text -> the example each pastes
    "Paste example: sentences with lang and id": EXAMPLES / "sentences.tsv",
    "Paste example: parallel columns": EXAMPLES / "parallel.tsv",
}
MIN_SENTENCES = 2

HELP = (
    "**Your own sentences.** Upload or paste sentences: one per line, or `sentence<TAB>lang`, or a table with "
    "columns `sentence`, `lang` and `id` (rows with the same id are translations of one another); or parallel "
    "columns with a header of language codes (`en de fr …`), one meaning per row. Without a language, each "
    "sentence's language is detected. Uses the model chosen above."
)


def project_upload(
    state, model_name: str, file, pasted: str | None, progress=None, *, method: str = "umap"
) -> MapOutput:
    """Project a visitor's sentences (an uploaded file, else pasted text) in every space of the chosen model."""
    if not model_name or not isinstance(model_name, str):
        return empty_output("Choose a model.")
    table, message = read_upload(file, pasted, kind=KINDS)
    if table is None:
        return empty_output(f"⚠️ {message}")
    try:
        sample = user_sample(table)
        if len(sample.texts) < MIN_SENTENCES:
            return empty_output(
                f"{message}\n\n⚠️ One sentence makes no map: give at least {MIN_SENTENCES} (for the "
                "numbers, sentences in 2 languages, and translations marked with an id)."
            )
        model = state.encoder(model_name)
        result = language_map(model, sample=sample, method=method, progress=progress)
    except MlseError as exc:
        return empty_output(f"{message}\n\n⚠️ {md_escape(str(exc))}")
    return render(result, model_name, read_note=message)


class Section(NamedTuple):
    upload: object  # gr.File
    pasted: object  # gr.Textbox
    button: object  # gr.Button "Project my sentences"


def build_section() -> Section:
    """The section's widgets, where the map tab places them (below its FLORES controls); :func:`wire` connects them."""
    import gradio as gr  # lazy: importing the handlers (tests) must not load gradio

    with gr.Accordion("Map your own sentences", open=False):
        gr.Markdown(HELP)
        upload, pasted = upload_with_examples(
            "Sentences file (TSV, CSV or JSONL)",
            "…or paste sentences: one per line, or sentence <TAB> lang",
            EXAMPLE_FILES,
            lines=6,
            max_lines=15,
        )
        button = gr.Button("Project my sentences", variant="primary")
    return Section(upload, pasted, button)


def wire(section: Section, state, model, outputs: list, show: Callable[[MapOutput], list], **event) -> None:
    """The "Project my sentences" button -> :func:`project_upload` with the tab's model picker, into the components
    the FLORES "Project" button fills (``show`` turns a MapOutput into their values)."""
    import gradio as gr  # lazy: importing the handlers (tests) must not load gradio

    def map_my_sentences(model_name: str, sentences_file, pasted_text: str, progress=gr.Progress()):
        return show(project_upload(state, model_name, sentences_file, pasted_text, progress=reporter(progress)))

    section.button.click(
        map_my_sentences, [model, section.upload, section.pasted], outputs, api_name="map_my_sentences", **event
    )
