"""Tab 4: predicted vs gold similarity on an STS Multi MT pair or on the user's own rated pairs, and the pairs where a
scorer disagrees most.

STS Multi MT is scored as ``python -m mlse eval --task sts`` does, the user's file in :mod:`mlse.ui.gold_file`; both
are measured and drawn by :mod:`mlse.ui.gold_views`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlse.data.pairs import sts_pair_choices
from mlse.encoders.catalogue import chosen_models
from mlse.errors import DataError, MlseError
from mlse.evaluation.runners import sts_pair_predictions
from mlse.memo import MB, BytesMemo
from mlse.serving.procmem import releases_memory
from mlse.ui import gold_file
from mlse.ui.explain_sections import build_pair_section
from mlse.ui.gold_views import (
    CALIBRATED_NOTE,
    DISAGREE_COLUMNS,
    DISAGREE_TYPES,
    METRIC_COLUMNS,
    N_BOOT,
    compare,
    disagreement_request,
    disagreement_table,
    empty_figures,
    model_rated_languages,
)
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.preparing import with_preparing_note
from mlse.ui.text import md_code, md_escape
from mlse.ui.widgets import read_only_table, show_for_choice

DEFAULT_PAIR = "en-de"
SPLITS = ("test", "dev", "train")
STS_SOURCE, FILE_SOURCE = "STS Multi MT", "Your file"

# (model identity, pair, files) -> cosine predictions [n]: bounded by bytes (mlse.memo)
_memo = BytesMemo("gold_tab.predictions", 16 * MB)


@releases_memory
def predictions(state, pair: str, model: str, split: str = "test"):
    """(ScoredPairs, cosine predictions [n]) for one model; memoised per model identity and data file."""
    if not (model or "").strip():
        raise MlseError("Choose a model.")
    if not (pair or "").strip():
        raise DataError("Choose a language pair (e.g. en-de).")
    if not (split or "").strip():
        raise DataError("Choose a split.")
    encoder = state.encoder(model)  # ModelNotFoundError for an unknown model
    # DataError: unknown pair / split, missing data directory
    return sts_pair_predictions(encoder, pair, split, data_dir=state.data_dir, memo=_memo)


def predicted_vs_gold(state, pair: str, models: list[str] | str, split: str = "test", n_boot: int = N_BOOT):
    """Distributions, scatter, calibration and metrics of each model's cosine against the gold scores -> (histograms,
    scatter, calibration figure, metrics DataFrame, message); a model that fails to load is named, the others shown."""
    models = chosen_models(models)[0]  # the ticked names, once each
    empty = pd.DataFrame(columns=METRIC_COLUMNS)
    if not models:
        return *empty_figures(), empty, "Choose at least one model."
    ds, preds, problems = None, {}, []
    for name in models:
        try:
            ds, preds[name] = predictions(state, pair, name, split)  # [n]
        except DataError as exc:  # the pair or its data, not the model: the same for every model
            return *empty_figures(), empty, md_escape(str(exc))
        except MlseError as exc:
            problems.append(md_escape(str(exc)))
    if not preds:
        return *empty_figures(), empty, " ".join(problems)
    gold = np.asarray(ds.scores, dtype=np.float64)  # [n]
    hist, scatter, calib, table, calibrated = compare(state, gold, preds, f"{pair} ({split})", n_boot)
    notes = [f"{len(gold)} pairs of {md_escape(ds.name)}; correlations x 100, 95% bootstrap CIs."]
    if calibrated:
        dev = " Dev pairs were used to fit it." if split == "dev" else ""
        notes.append(f"{CALIBRATED_NOTE}gold; blank for models without one.{dev}")
    notes += rated_notes(state, pair, list(preds))
    return hist, scatter, calib, table, with_preparing_note("gold", " ".join([*notes, *problems]))


def rated_notes(state, pair: str, models: list[str]) -> list[str]:
    """For each model trained on rated pairs of only some languages (the leave-languages-out protocol): whether
    ``pair`` is *rated* for it (it learnt from rated pairs in both languages) or *unrated*, naming the missing ones."""
    notes = []
    for name, rated in model_rated_languages(state, models).items():
        missing = [lang for lang in dict.fromkeys(pair.split("-")) if lang not in rated]
        split = (
            f"**unrated** for it: trained without rated pairs in {', '.join(missing)}"
            if missing
            else "**rated** for it: trained with rated pairs in both languages"
        )
        notes.append(f"`{md_code(name)}`: {md_escape(pair)} is {split} (rated: {md_escape(', '.join(rated))}).")
    return notes


def disagreements(
    state, pair: str, model: str, split: str = "test", low: float = 0.0, high: float = 5.0, k: int = 20
) -> tuple[pd.DataFrame, str]:
    """The k pairs of the split with **gold** score in [low, high] whose predicted rank disagrees most with the gold
    rank (:func:`mlse.ui.gold_views.disagreement_table`)."""
    request = disagreement_request(low, high, k)
    if isinstance(request, str):
        return pd.DataFrame(columns=DISAGREE_COLUMNS), request
    try:
        ds, pred = predictions(state, pair, model, split)
    except MlseError as exc:
        return pd.DataFrame(columns=DISAGREE_COLUMNS), md_escape(str(exc))
    return disagreement_table(pred, ds.scores, ds.s1, ds.s2, *request, name=ds.name)


def build_tab(state) -> list[ModelPicker]:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    names = state.model_names()
    preferred = state.preferred_model()  # me5-small on a full install
    pairs = sts_pair_choices()  # the seed paper's pairs first, then the cross-lingual ones, then every other
    with gr.Tab("Predicted vs gold"):
        source = gr.Radio(
            [STS_SOURCE, FILE_SOURCE],
            value=STS_SOURCE,
            label="Data",
            info="STS Multi MT, or your own pairs rated by people",
        )
        with gr.Row(visible=True) as sts_inputs:
            pair = gr.Dropdown(pairs, value=DEFAULT_PAIR, label="STS Multi MT pair (sentence1 lang - sentence2 lang)")
            split = gr.Radio(list(SPLITS), value="test", label="Split")
        file_inputs = gold_file.build_inputs()
        models = gr.CheckboxGroup(names, value=[preferred] if preferred else [], label="Scorers")
        with gr.Row():
            run = gr.Button("Compare with gold", variant="primary")
            run_file = gr.Button("Compare file with gold", variant="primary", visible=False)
        message = gr.Markdown(latex_delimiters=[])
        metrics = read_only_table(headers=METRIC_COLUMNS, label="Pearson / Spearman x 100 (95% bootstrap CI)")
        slices = read_only_table(
            headers=gold_file.SLICE_HEADERS,
            label="Slices: Pearson / Spearman x 100 per language pair and length",
            visible=False,
        )
        hist = gr.Plot(label="Distributions")
        with gr.Row():
            scatter = gr.Plot(label="Predicted vs gold")
            calib = gr.Plot(label="Calibration")
        gr.Markdown(
            "### Largest disagreements\nPairs whose **gold** score lies in the range, ranked by how far the "
            "model's rank puts them from their gold rank."
        )
        with gr.Row():
            model = gr.Dropdown(names, value=preferred, label="Scorer")
            low = gr.Number(value=0.0, step=0.2, label="gold from")
            high = gr.Number(value=5.0, step=0.2, label="gold to")
            k = gr.Number(value=20, minimum=1, maximum=500, precision=0, label="pairs")
            find = gr.Button("List")
            find_file = gr.Button("List file pairs", visible=False)
        dis_msg = gr.Markdown(latex_delimiters=[])
        dis_table = read_only_table(
            headers=DISAGREE_COLUMNS,
            datatype=DISAGREE_TYPES,
            label="Select a row to explain its pair; a click on a sentence shows all of it",
        )
        build_pair_section(state, dis_table, model)  # a selected row's pair explained (mlse.ui.explain_view)

        def on_run(language_pair, scorers, split, progress=gr.Progress(track_tqdm=True)):
            return predicted_vs_gold(state, language_pair, scorers, split)

        def on_find(language_pair, scorer, split, gold_from, gold_to, pairs, progress=gr.Progress(track_tqdm=True)):
            return disagreements(state, language_pair, scorer, split, gold_from, gold_to, pairs)

        show_for_choice(source, FILE_SOURCE, [sts_inputs, run, find], [file_inputs.group, run_file, slices, find_file])
        run.click(
            on_run,
            [pair, models, split],
            [hist, scatter, calib, metrics, message],
            api_name="predicted_vs_gold",
            concurrency_limit=1,
        )
        listed = [dis_table, dis_msg]
        find.click(on_find, [pair, model, split, low, high, k], listed, api_name="disagreements", concurrency_limit=1)
        gold_file.wire(
            state,
            file_inputs,
            models,
            model,
            low,
            high,
            k,
            outputs=(hist, scatter, calib, metrics, slices, message),
            listed=listed,
            buttons=(run_file, find_file),
        )
        check_inputs(pair, split, low, high, k, source)
        check_inputs(models, model, allowed=state.model_names)
    return [ModelPicker(models, multi=True), ModelPicker(model)]
