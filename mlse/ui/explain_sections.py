"""The "Why this score?" sections of three tabs: widgets wired to the handlers of :mod:`mlse.ui.explain_view`.

Every Explain button shares one slot (``concurrency_id="explain"``): an explanation keeps both cores busy, so a
second one waits. No ``from __future__ import annotations``: gradio must see the real ``gr.SelectData`` class.
"""

from mlse.explain import DEFAULT_STEPS
from mlse.ui.explain_view import (
    DEFAULT_LAYER,
    MAX_STEPS,
    TEACHING,
    default_explained,
    explain_and_keep,
    explain_listed_pair,
    explain_retrieval_error,
    explainable_models,
    layer_choices,
    picked_error,
    picked_pair,
    unavailable_note,
)
from mlse.ui.inputs import check_inputs
from mlse.ui.what_if_view import INTRO as WHAT_IF_INTRO
from mlse.ui.what_if_view import drop_picked, start_what_if, what_if_pair
from mlse.ui.widgets import PAGE_EVENT, reporter

EXPLAIN_EVENTS = {"concurrency_limit": 1, "concurrency_id": "explain"}
PRIVATE = {"show_progress": "hidden", "api_visibility": "private"}  # the page's own bookkeeping, not in the API
INTRO = (
    "### Why this score?\nSplit one model's cosine of the two sentences above into **word pairs** (integrated "
    "Jacobians; takes a few seconds). The word pairs plus the reference terms add up to the score, up to the residual "
    "shown below; a later layer is faster but mixes each word with its context."
)


def build_score_section(state, sentence1, sentence2, models) -> None:
    """Under the Score tab's table, then What if? (:mod:`mlse.ui.what_if_view`): ``sentence1`` / ``sentence2`` are
    its text boxes, ``models`` its ticked models (the picker opens on the first that can be explained)."""
    import gradio as gr  # lazy: handlers are tested without gradio

    note = unavailable_note(state)
    with gr.Group():
        gr.Markdown(INTRO + (f"\n\n{note}" if note else ""))
        with gr.Row(equal_height=True):
            model = gr.Dropdown(
                explainable_models(state),
                value=default_explained(state, models.value),
                label="Model to explain",
                scale=3,
            )
            steps = gr.Slider(1, MAX_STEPS, value=DEFAULT_STEPS, step=1, label="Integration steps", scale=2)
            layer = gr.Dropdown(layer_choices(), value=DEFAULT_LAYER, label="Attribute at layer", scale=2)
            special = gr.Checkbox(False, label="Show special tokens and prefix", scale=1)
            button = gr.Button("Explain", variant="primary", scale=1)
        attribution, alignment, summary = _results(gr)
    kept = gr.State(None)  # the explained pair What if? edits: {"model", "explanation"}

    def explain_pair(model, sentence1, sentence2, steps, layer, show_special_tokens, progress=gr.Progress()):
        """Explain one model's cosine of two sentences: (attribution heatmap, alignment heatmap, markdown)."""
        return explain_and_keep(
            state, model, sentence1, sentence2, steps, layer, show_special_tokens, progress=reporter(progress)
        )

    def follow_models(ticked, current):
        return gr.update(choices=explainable_models(state), value=default_explained(state, ticked, current))

    explained = button.click(
        explain_pair,
        [model, sentence1, sentence2, steps, layer, special],
        [attribution, alignment, summary, kept],
        api_name="explain_pair",
        **EXPLAIN_EVENTS,
    )
    _what_if_section(gr, state, kept, explained, special)
    models.change(follow_models, [models, model], model, show_progress="hidden", **PAGE_EVENT)
    check_inputs(steps, layer)
    check_inputs(model, allowed=lambda: explainable_models(state))


def _what_if_section(gr, state, kept, explained, special) -> None:
    """What if? under the explanation: the words to drop, the two edit boxes, the two heatmaps and the numbers."""
    with gr.Group():
        gr.Markdown(WHAT_IF_INTRO)
        picker = gr.CheckboxGroup([], value=[], label="Drop words (sentence · word)")
        with gr.Row(equal_height=True):
            edited1 = gr.Textbox(label="Sentence 1, edited", lines=2, scale=3)
            edited2 = gr.Textbox(label="Sentence 2, edited", lines=2, scale=3)
            button = gr.Button("What if?", variant="primary", scale=1)
        with gr.Row():
            before = gr.Plot(label="Before: the explained pair")
            after = gr.Plot(label="After: the edited pair")
        numbers = gr.Markdown(latex_delimiters=[])

    def open_what_if(kept_pair):
        sentence1, sentence2, choices = start_what_if(kept_pair)
        return sentence1, sentence2, gr.update(choices=choices, value=[])

    def what_if(kept_pair, sentence1_edited, sentence2_edited, show_special_tokens, progress=gr.Progress()):
        """The edited pair scored (shown at once), then explained: (before heatmap, after heatmap, markdown)."""
        edit = (state, kept_pair, sentence1_edited, sentence2_edited, show_special_tokens)
        numbers = what_if_pair(*edit, explain_new=False)
        yield numbers
        if numbers[0] is not None:  # scored: now the heatmap (a refusal was said already)
            yield what_if_pair(*edit, progress=reporter(progress))

    explained.then(open_what_if, [kept], [edited1, edited2, picker], **PRIVATE)
    picker.input(drop_picked, [kept, picker], [edited1, edited2], **PRIVATE)
    button.click(
        what_if, [kept, edited1, edited2, special], [before, after, numbers], api_visibility="private", **EXPLAIN_EVENTS
    )


def _results(gr):
    """The attribution heatmap and the alignment side by side, the teaching text under them, then the numbers."""
    with gr.Row():
        left_plot = gr.Plot(label="Attribution: which word pairs make up the cosine")
        right_plot = gr.Plot(label="Alignment (not an explanation of the score)")
    gr.Markdown(TEACHING)
    return left_plot, right_plot, gr.Markdown(latex_delimiters=[])


def build_error_section(state, table, shown, columns: list[str]) -> None:
    """Under the Tatoeba tab's neighbours, query vs retrieved and query vs gold side by side: ``table`` is its errors
    table, ``shown`` the (source, scorer) it was computed for."""
    import gradio as gr  # lazy: handlers are tested without gradio

    picked = gr.State(None)  # the selected error: scorer and the three sentences
    button = gr.Button("Explain this error")
    message = gr.Markdown(latex_delimiters=[])
    with gr.Row():
        with gr.Column():
            retrieved_plot = gr.Plot(label="Query vs retrieved (wrong)")
            retrieved_text = gr.Markdown(latex_delimiters=[])
        with gr.Column():
            gold_plot = gr.Plot(label="Query vs gold (right)")
            gold_text = gr.Markdown(latex_delimiters=[])
    gr.Markdown(TEACHING)

    def remember_error(shown_, evt: gr.SelectData):
        return picked_error(shown_, evt.row_value, columns)

    def explain_tatoeba_error(selected_error, progress=gr.Progress()):
        """Query vs retrieved and query vs gold of the selected error: (two heatmaps, summary, their two texts)."""
        e = selected_error or {}  # nothing selected: the handler says to select a row
        error = [e.get(key) for key in ("model", "query", "retrieved", "gold")]
        return explain_retrieval_error(state, *error, e.get("label", ""), progress=reporter(progress))

    table.select(remember_error, [shown], [picked], **PRIVATE)
    table.change(lambda: None, None, [picked], **PRIVATE)  # a new table
    button.click(
        explain_tatoeba_error,
        [picked],
        [retrieved_plot, gold_plot, message, retrieved_text, gold_text],
        api_name="explain_tatoeba_error",
        **EXPLAIN_EVENTS,
    )


def build_pair_section(state, table, model) -> None:
    """Under the predicted-vs-gold tab's largest disagreements: ``table`` (STS rows or the file's, whose first column
    differs), ``model`` the scorer picker the table was listed with."""
    import gradio as gr  # lazy: handlers are tested without gradio

    picked = gr.State(None)  # the selected pair: its sentences, gold and cosine
    button = gr.Button("Explain this pair")
    attribution, alignment, message = _results(gr)

    def remember_pair(listed, evt: gr.SelectData):
        return picked_pair(evt.row_value, [str(c) for c in getattr(listed, "columns", [])])

    def explain_disagreement(selected_pair, scorer, progress=gr.Progress()):
        """The selected disagreement's pair explained with the scorer: (attribution, alignment, markdown)."""
        p = selected_pair or {}
        pair = [p.get(key) for key in ("sentence1", "sentence2", "gold", "cosine")]
        return explain_listed_pair(state, scorer, *pair, p.get("label", ""), progress=reporter(progress))

    table.select(remember_pair, [table], [picked], **PRIVATE)
    table.change(lambda: None, None, [picked], **PRIVATE)
    button.click(
        explain_disagreement,
        [picked, model],
        [attribution, alignment, message],
        api_name="explain_disagreement",
        **EXPLAIN_EVENTS,
    )
