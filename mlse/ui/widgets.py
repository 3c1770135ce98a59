"""Pieces of layout several tabs build alike, written once: a read-only table, the inputs of a visitor's file (upload
it or paste its rows, paste the shipped example, the deployment's upload limits underneath), and a progress bar as the
handlers report to it.

Each builds its gradio components where it is called (inside the caller's ``gr.Tab`` / ``gr.Column``) and returns
them for the caller to wire; labels are the caller's.
"""

from __future__ import annotations

from typing import NamedTuple

from mlse.ui.tables import TABLE_OPTIONS
from mlse.ui.text import md_escape
from mlse.ui.uploads import limits_note

FILE_TYPES = [".tsv", ".csv", ".jsonl", ".txt"]  # what the upload's file picker offers (the reader takes these)


def reporter(progress):
    """A ``gr.Progress`` as the handlers' ``progress(fraction, message)``."""
    return lambda fraction, message: progress(fraction, desc=message)


def read_only_table(value=None, **options):
    """A ``gr.Dataframe`` the visitor reads but does not edit, as every table of the app (:data:`TABLE_OPTIONS`)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    return gr.Dataframe(value, interactive=False, **TABLE_OPTIONS, **options)


class OptionUpload(NamedTuple):
    file: object  # gr.File
    pasted: object  # gr.Textbox
    option: object  # gr.Textbox: how to read the rows (a score range, the columns to use)
    example: object  # gr.Button that pastes the example


def upload_with_option(
    file_label: str,
    paste_label: str,
    placeholder: str,
    *,
    option: str,
    option_placeholder: str,
    option_info: str,
    example: str,
    example_size: str = "lg",
) -> OptionUpload:
    """A file beside a box for pasted rows; below them a text box for an option (labelled ``option``) and a button,
    ``example``, that pastes the example; then the upload limits."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    with gr.Row():
        file = gr.File(label=file_label, type="filepath", file_types=FILE_TYPES)
        pasted = gr.Textbox(label=paste_label, lines=6, max_lines=12, placeholder=placeholder)
    with gr.Row():
        choice = gr.Textbox(label=option, placeholder=option_placeholder, scale=1, info=option_info)
        button = gr.Button(example, size=example_size, scale=0)
    gr.Markdown(md_escape(limits_note()))
    return OptionUpload(file, pasted, choice, button)


def upload_with_examples(
    file_label: str, paste_label: str, examples: list[str], lines: int, max_lines: int
) -> tuple[object, object, list]:
    """A file beside a column of a box for pasted rows over small buttons that paste examples (in a row when there are
    several); then the upload limits -> (the gr.File, the gr.Textbox, the buttons)."""
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    with gr.Row():
        upload = gr.File(label=file_label, file_types=FILE_TYPES, type="filepath")
        with gr.Column():
            pasted = gr.Textbox(label=paste_label, lines=lines, max_lines=max_lines)
            if len(examples) == 1:
                buttons = [gr.Button(examples[0], size="sm")]
            else:
                with gr.Row():
                    buttons = [gr.Button(text, size="sm") for text in examples]
    gr.Markdown(md_escape(limits_note()))
    return upload, pasted, buttons
