"""Tab 4: predicted vs gold similarity on an STS Multi MT pair, and the pairs where a scorer disagrees most.

Handlers are plain functions of (state, ...) returning plotly figures, DataFrames and markdown. Predictions are the
cosines of :func:`mlse.evaluation.runners.sts_pair_predictions` (through the embedding cache, the same as ``python -m
mlse eval --task sts``) and metrics come from :func:`mlse.evaluation.sts.sts_metrics`; predictions are memoised per
(model identity, pair, split).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mlse.analysis.sts_errors import bootstrap_pearson_ci, calibration_bins, isotonic_fit, rank_disagreements
from mlse.data.pairs import sts_pair_choices
from mlse.errors import DataError, MlseError
from mlse.evaluation.runners import sts_pair_predictions
from mlse.evaluation.sts import sts_metrics
from mlse.memo import MB, BytesMemo
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.text import html_text, md_escape

DEFAULT_PAIR = "en-de"
SPLITS = ("test", "dev", "train")
N_BOOT = 1000
N_BINS = 10

METRIC_COLUMNS = ["model", "n", "pearson", "pearson_lo", "pearson_hi", "spearman", "spearman_lo", "spearman_hi",
                  "pearson_calibrated", "mae_calibrated"]  # fmt: skip
DISAGREE_COLUMNS = ["index", "sentence1", "sentence2", "gold", "cosine", "pred_as_gold", "diff", "rank_gap"]
DISAGREE_TYPES = ["number", "str", "str", "number", "number", "number", "number", "number"]

_HOVER_PAIR = "pair #%{customdata}<br>gold %{x:.2f}<br>cosine %{y:.3f}"
_HOVER_BIN = "mean cosine %{x:.3f}<br>mean gold %{y:.2f}<br>%{customdata} pairs"

# (model identity, pair, files) -> cosine predictions [n]: bounded by bytes (mlse.memo)
_memo = BytesMemo("gold_tab.predictions", 16 * MB)


def sts_pairs() -> list[str]:
    """The seed paper's pairs first, then the 12 cross-lingual pairs, then every other ordered pair of languages."""
    return sts_pair_choices()


def _check_pair(pair: str, split: str) -> None:
    if not (pair or "").strip():
        raise MlseError("Choose a language pair (e.g. en-de).")
    if not (split or "").strip():
        raise MlseError("Choose a split.")


def predictions(state, pair: str, model: str, split: str = "test"):
    """(ScoredPairs, cosine predictions [n]) for one model; memoised per model identity and data file."""
    if not (model or "").strip():
        raise MlseError("Choose a model.")
    _check_pair(pair, split)
    encoder = state.encoder(model)  # ModelNotFoundError for an unknown model
    # DataError: unknown pair / split, missing data directory
    return sts_pair_predictions(encoder, pair, split, data_dir=state.data_dir, memo=_memo)


def _metrics_row(model: str, pred: np.ndarray, gold: np.ndarray, n_boot: int, calibrated: np.ndarray | None) -> dict:
    """Correlations of the cosine; with a calibrated 0-5 score, also its Pearson and mean absolute error (gold points)
    — the numbers that show whether the score means the same on every model."""
    m = sts_metrics(pred, gold, n_boot=n_boot)
    p_lo, p_hi = bootstrap_pearson_ci(pred, gold, n_boot=n_boot) if not math.isnan(m["pearson"]) else [math.nan] * 2
    s_lo, s_hi = m["spearman_ci95"]
    cal_pearson = cal_mae = math.nan
    if calibrated is not None:
        cal_pearson = sts_metrics(calibrated, gold, n_boot=0)["pearson"]
        cal_mae = float(np.mean(np.abs(calibrated - gold)))
    return {"model": model, "n": m["n"], "pearson": m["pearson"], "pearson_lo": p_lo, "pearson_hi": p_hi,
            "spearman": m["spearman"], "spearman_lo": s_lo, "spearman_hi": s_hi, "pearson_calibrated": cal_pearson,
            "mae_calibrated": cal_mae}  # fmt: skip


def calibrated_scores(state, model: str, pred: np.ndarray) -> np.ndarray | None:
    """The model's calibrated 0-5 scores for the cosines ``pred`` [n], or None when it has no calibration."""
    calibrate = getattr(state.encoder(model), "calibrated_score", None)
    scores = calibrate(pred) if calibrate is not None else None
    return None if scores is None else np.asarray(scores, dtype=np.float64)


def _figures(pair: str, split: str, gold: np.ndarray, preds: dict[str, np.ndarray],
             maps: dict[str, tuple[np.ndarray, np.ndarray]] | None = None):  # fmt: skip
    """(histograms, scatter, calibration) plotly figures; legend names are HTML-escaped (plotly renders tags).

    ``maps``: each calibrated model's own cosine -> 0-5 curve (fitted on dev), drawn over this split's bins."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it
    from plotly.subplots import make_subplots

    title = f"{html_text(pair)} ({html_text(split)})"
    hist = make_subplots(rows=1, cols=2, subplot_titles=("predicted cosine", "gold score (0-5)"))
    scatter, calib = go.Figure(), go.Figure()
    for i, (name, pred) in enumerate(preds.items()):
        label = html_text(name)
        color = _color(i)
        hist.add_trace(go.Histogram(x=pred, name=label, nbinsx=40, histnorm="probability density", opacity=0.55,
                                    marker_color=color, legendgroup=label), row=1, col=1)  # fmt: skip
        scatter.add_trace(go.Scattergl(x=gold, y=pred, mode="markers", name=label, customdata=np.arange(len(gold)),
                                       marker={"size": 4, "opacity": 0.45, "color": color},
                                       hovertemplate=_HOVER_PAIR))  # fmt: skip
        bins = calibration_bins(pred, gold, N_BINS)
        calib.add_trace(go.Scatter(x=bins["mean_pred"], y=bins["mean_gold"], mode="lines+markers", name=label,
                                   error_y={"type": "data", "array": bins["sem_gold"]}, line={"color": color},
                                   legendgroup=label, customdata=bins["count"],
                                   hovertemplate=_HOVER_BIN))  # fmt: skip
        x_iso, y_iso = isotonic_fit(pred, gold)
        calib.add_trace(go.Scatter(x=x_iso, y=y_iso, mode="lines", name=f"{label} (isotonic)", legendgroup=label,
                                   line={"color": color, "dash": "dot", "width": 1}, hoverinfo="skip"))  # fmt: skip
        if maps and name in maps:
            x_map, y_map = maps[name]
            calib.add_trace(go.Scatter(x=x_map, y=y_map, mode="lines", name=f"{label} (its calibration)",
                                       legendgroup=label, line={"color": color, "width": 2},
                                       hoverinfo="skip"))  # fmt: skip
    hist.add_trace(go.Histogram(x=gold, name="gold", nbinsx=26, histnorm="probability density",
                                marker_color="#444", showlegend=False), row=1, col=2)  # fmt: skip
    hist.update_layout(title=f"Score distributions, {title}", barmode="overlay")
    scatter.update_layout(title=f"Predicted vs gold, {title}", xaxis_title="gold score", yaxis_title="cosine")
    calib.update_layout(title=f"Calibration: mean gold per {N_BINS} equal-count bins of cosine, {title}",
                        xaxis_title="cosine (bin mean)", yaxis_title="gold score (bin mean, ±1 s.e.)")  # fmt: skip
    return hist, scatter, calib


def _color(i: int) -> str:
    import plotly.express as px  # lazy: plotly is slow to import; only figures need it

    palette = px.colors.qualitative.Plotly
    return palette[i % len(palette)]


def _empty_figures():
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    return go.Figure(), go.Figure(), go.Figure()


def predicted_vs_gold(state, pair: str, models: list[str] | str, split: str = "test", n_boot: int = N_BOOT):
    """Distributions, scatter, calibration and metrics of each model's cosine against the gold scores.

    Returns (histograms figure, scatter figure, calibration figure, metrics DataFrame, message). Pearson and
    Spearman are x 100 with 95% percentile-bootstrap CIs (``n_boot`` resamples of the pairs). A model that fails
    to load is reported in the message; the others are still shown.
    """
    if isinstance(models, str):
        models = [models]
    models = [m for m in (models or []) if m and m.strip()]
    empty = pd.DataFrame(columns=METRIC_COLUMNS)
    if not models:
        return *_empty_figures(), empty, "Choose at least one model."
    try:
        _check_pair(pair, split)
    except MlseError as exc:
        return *_empty_figures(), empty, md_escape(str(exc))
    ds, preds, problems = None, {}, []
    for name in dict.fromkeys(models):
        try:
            ds, preds[name] = predictions(state, pair, name, split)  # [n]
        except DataError as exc:  # the pair's data, not the model: the same for every model
            return *_empty_figures(), empty, md_escape(str(exc))
        except MlseError as exc:
            problems.append(md_escape(str(exc)))
    if not preds:
        return *_empty_figures(), empty, " ".join(problems)
    gold = np.asarray(ds.scores, dtype=np.float64)  # [n]
    calibrated = {name: calibrated_scores(state, name, p) for name, p in preds.items()}
    table = pd.DataFrame([_metrics_row(n, p, gold, n_boot, calibrated[n]) for n, p in preds.items()],
                         columns=METRIC_COLUMNS)  # fmt: skip
    maps = {n: _curve(p, c) for n, p in preds.items() if (c := calibrated[n]) is not None}
    notes = [f"{len(gold)} pairs of {md_escape(ds.name)}; correlations x 100, 95% bootstrap CIs."]
    if maps:
        notes.append("pearson_calibrated / mae_calibrated: the model's calibrated 0–5 score (fitted on STS dev) "
                     "against gold; blank for models without one." + (" Dev pairs were used to fit it."
                                                                       if split == "dev" else ""))  # fmt: skip
    message = " ".join([*notes, *problems])
    return *_figures(pair, split, gold, preds, maps), table.round(2), message


def _curve(pred: np.ndarray, calibrated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The calibration curve over the range of this split's cosines: (sorted cosines, their calibrated scores)."""
    order = np.argsort(pred, kind="stable")
    return pred[order], calibrated[order]


def disagreements(state, pair: str, model: str, split: str = "test", low: float = 0.0, high: float = 5.0,
                  k: int = 20) -> tuple[pd.DataFrame, str]:  # fmt: skip
    """The k pairs with **gold** score in [low, high] whose predicted rank disagrees most with the gold rank.

    Each cosine is mapped to the gold score at the same percentile over the whole split (``pred_as_gold``); pairs
    are sorted by |pred_as_gold - gold| (``diff``, gold units), then by |rank_gap| (percentile points). Filtering on
    the gold score (not the prediction) answers "which pairs of this gold band does the model misplace?".
    """
    empty = pd.DataFrame(columns=DISAGREE_COLUMNS)
    if low is None or high is None or k is None:
        return empty, "Give a score range and a number of pairs."
    try:
        low, high, k = float(low), float(high), int(k)
    except (TypeError, ValueError):
        return empty, "The score range and the number of pairs must be numbers."
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return empty, f"Empty score range [{low:g}, {high:g}]: choose low <= high (gold scores are 0 to 5)."
    if k < 1:
        return empty, "Ask for at least one pair."
    try:
        ds, pred = predictions(state, pair, model, split)
    except MlseError as exc:
        return empty, md_escape(str(exc))
    found = rank_disagreements(pred, ds.scores, low=low, high=high, k=k)
    n_in = int(found["n_in_range"])
    if n_in == 0:
        return empty, f"No pair of {md_escape(ds.name)} has a gold score in [{low:g}, {high:g}]."
    rows = [[int(i), ds.s1[i], ds.s2[i], float(g), float(p), float(a), float(d), float(r)]
            for i, g, p, a, d, r in zip(found["index"], found["gold"], found["pred"], found["pred_as_gold"],
                                        found["diff"], found["rank_gap"])]  # fmt: skip
    table = pd.DataFrame(rows, columns=DISAGREE_COLUMNS).round({"gold": 2, "cosine": 4, "pred_as_gold": 2, "diff": 2,
                                                                 "rank_gap": 1})  # fmt: skip
    message = (f"{len(rows)} of the {n_in} pairs with gold score in [{low:g}, {high:g}], largest |diff| first "
               "(diff = gold score at the cosine's percentile minus the gold score).")  # fmt: skip
    return table, message


def build_tab(state) -> list[ModelPicker]:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    names = state.model_names()
    preferred = state.preferred_model()  # me5-small on a full install
    pairs = sts_pairs()
    with gr.Tab("Predicted vs gold"):
        with gr.Row():
            pair = gr.Dropdown(pairs, value=DEFAULT_PAIR, label="STS Multi MT pair (sentence1 lang - sentence2 lang)")
            split = gr.Radio(list(SPLITS), value="test", label="Split")
        models = gr.CheckboxGroup(names, value=[preferred] if preferred else [], label="Scorers")
        run = gr.Button("Compare with gold", variant="primary")
        message = gr.Markdown(latex_delimiters=[])
        metrics = gr.Dataframe(headers=METRIC_COLUMNS, label="Pearson / Spearman x 100 (95% bootstrap CI)",
                               interactive=False)  # fmt: skip
        hist = gr.Plot(label="Distributions")
        with gr.Row():
            scatter = gr.Plot(label="Predicted vs gold")
            calib = gr.Plot(label="Calibration")
        gr.Markdown("### Largest disagreements\nPairs whose **gold** score lies in the range, ranked by how far the "
                    "model's rank puts them from their gold rank.")  # fmt: skip
        with gr.Row():
            model = gr.Dropdown(names, value=preferred, label="Scorer")
            low = gr.Number(value=0.0, minimum=0.0, maximum=5.0, step=0.2, label="gold from")
            high = gr.Number(value=5.0, minimum=0.0, maximum=5.0, step=0.2, label="gold to")
            k = gr.Number(value=20, minimum=1, maximum=500, precision=0, label="pairs")
            find = gr.Button("List")
        dis_msg = gr.Markdown(latex_delimiters=[])
        dis_table = gr.Dataframe(headers=DISAGREE_COLUMNS, datatype=DISAGREE_TYPES, interactive=False, wrap=True)

        def on_run(pair_, models_, split_, progress=gr.Progress(track_tqdm=True)):
            h, s, c, table, msg = predicted_vs_gold(state, pair_, models_, split_)
            return h, s, c, table, msg

        def on_find(pair_, model_, split_, low_, high_, k_, progress=gr.Progress(track_tqdm=True)):
            return disagreements(state, pair_, model_, split_, low_, high_, k_)

        run.click(on_run, [pair, models, split], [hist, scatter, calib, metrics, message],
                  api_name="predicted_vs_gold", concurrency_limit=1)  # fmt: skip
        find.click(on_find, [pair, model, split, low, high, k], [dis_table, dis_msg], api_name="disagreements",
                   concurrency_limit=1)  # fmt: skip
        check_inputs(pair, split, low, high, k)
        check_inputs(models, model, allowed=state.model_names)
    return [ModelPicker(models, multi=True), ModelPicker(model)]
