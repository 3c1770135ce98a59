"""Pieces of layout several tabs build alike, written once: a read-only table, the inputs of a visitor's file, a data
source's switch, and a progress bar as the handlers report to it. Each builds its components where it is called and
returns them for the caller to wire; labels are the caller's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from mlse.ui.tables import TABLE_OPTIONS
from mlse.ui.text import md_escape
from mlse.ui.uploads import limits_note

FILE_TYPES = [".tsv", ".csv", ".jsonl", ".txt"]  # what the upload's file picker offers (the reader takes these)
# An event of the page alone (showing, hiding or filling widgets): not in the API, and a few at once
PAGE_EVENT = {"concurrency_limit": 4, "api_visibility": "private"}


def reporter(progress):
    """A ``gr.Progress`` as the handlers' ``progress(fraction, message)``."""
    return lambda fraction, message: progress(fraction, desc=message)


def show_for_choice(radio, choice: str, hidden_by: list, shown_by: list) -> None:
    """Choosing ``choice`` in ``radio`` shows the components of ``shown_by`` and hides those of ``hidden_by``; any
    other choice does the reverse (a tab's data source: the benchmark's inputs and buttons, or the visitor's file's)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    def on_choice(chosen):
        mine = chosen == choice
        return [gr.update(visible=not mine) for _ in hidden_by] + [gr.update(visible=mine) for _ in shown_by]

    radio.change(on_choice, radio, [*hidden_by, *shown_by], **PAGE_EVENT)


def read_only_table(value=None, **options):
    """A ``gr.Dataframe`` the visitor reads but does not edit, as every table of the app (:data:`TABLE_OPTIONS`)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    return gr.Dataframe(value, interactive=False, **TABLE_OPTIONS, **options)


def _pastes(button, path: Path, file, pasted, **event) -> None:
    """``button`` pastes the shipped example at ``path`` into ``pasted`` ("" when the file is missing) and clears
    ``file``, so the pasted text is what gets read; ``event``: the click's settings."""

    def paste() -> tuple[None, str]:
        try:
            return None, path.read_text(encoding="utf-8")
        except OSError:
            return None, ""

    button.click(paste, None, [file, pasted], **event)


def upload_with_option(
    file_label: str,
    paste_label: str,
    placeholder: str,
    *,
    option: str,
    option_placeholder: str,
    option_info: str,
    example: str,
    example_file: Path,
    example_size: str = "lg",
) -> tuple[object, object, object]:
    """A file beside a box for pasted rows; below them a text box for an option (a score range, the columns to use) and
    a button that pastes the example file; then the upload limits -> (the gr.File, the pasted rows, the option)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    with gr.Row():
        file = gr.File(label=file_label, type="filepath", file_types=FILE_TYPES)
        pasted = gr.Textbox(label=paste_label, lines=6, max_lines=12, placeholder=placeholder)
    with gr.Row():
        choice = gr.Textbox(label=option, placeholder=option_placeholder, scale=1, info=option_info)
        button = gr.Button(example, size=example_size, scale=0)
    gr.Markdown(md_escape(limits_note()))
    _pastes(button, example_file, file, pasted, **PAGE_EVENT)
    return file, pasted, choice


def upload_with_examples(
    file_label: str, paste_label: str, examples: dict[str, Path], lines: int, max_lines: int
) -> tuple[object, object]:
    """A file beside a column of a box for pasted rows over small buttons that paste examples (button text -> example
    file; in a row when there are several); then the upload limits -> (the gr.File, the gr.Textbox)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    with gr.Row():
        upload = gr.File(label=file_label, file_types=FILE_TYPES, type="filepath")
        with gr.Column():
            pasted = gr.Textbox(label=paste_label, lines=lines, max_lines=max_lines)
            with gr.Row() if len(examples) > 1 else contextlib.nullcontext():
                buttons = [gr.Button(text, size="sm") for text in examples]
    gr.Markdown(md_escape(limits_note()))
    for button, path in zip(buttons, examples.values()):
        _pastes(button, path, upload, pasted, api_visibility="private", queue=False)
    return upload, pasted
