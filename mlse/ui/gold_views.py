"""What the predicted-vs-gold tab shows for any rated pairs, STS Multi MT or the user's file: the metrics table, the
distribution / scatter / calibration figures, and the table of largest disagreements.

Both data sources go through :func:`compare` and :func:`disagreement_table`, so they are measured alike. No gradio.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mlse.analysis.slices import CORRELATION_FIELDS
from mlse.analysis.sts_errors import bootstrap_pearson_ci, calibration_bins, isotonic_fit, rank_disagreements
from mlse.data.pairs import ISO_639_3
from mlse.evaluation.sts import sts_metrics
from mlse.runs.folders import rated_languages
from mlse.ui.tables import header, headers, number_text, numbers_as_text, sortable
from mlse.ui.text import html_text, md_escape

N_BOOT = 1000
N_BINS = 10

METRIC_FIELDS = ["model", *CORRELATION_FIELDS, "pearson_calibrated", "mae_calibrated"]
METRIC_COLUMNS = headers(METRIC_FIELDS)  # model, n, Pearson, Pearson low, ..., mean error, 0-5 score
# Correlations x 100 with one decimal (their 95% intervals are wider than that), the calibrated score's error with two
METRIC_PLACES = {**dict.fromkeys(METRIC_FIELDS[2:-1], 1), "mae_calibrated": 2}
# A disagreement's scores first (they are the point), then its two sentences
DISAGREE_FIELDS = ["index", "gold", "cosine", "pred_as_gold", "diff", "rank_gap", "sentence1", "sentence2"]
DISAGREE_COLUMNS = headers(DISAGREE_FIELDS)  # row, gold, cosine, cosine as gold, off by, rank gap, sentence 1, 2
DISAGREE_TYPES = ["number", "number", "number", "number", "number", "number", "str", "str"]
# The note under a metrics table with a calibrated model; the caller ends it with what the scores are set against
CALIBRATED_NOTE = (
    f"*{header('pearson_calibrated')}* / *{header('mae_calibrated')}*: the model's calibrated 0–5 score (fitted on "
    "STS dev) against "
)
# shown with these decimals, differences signed, while the cells keep their numbers ("off by" sorts -1.20 below +0.35)
DISAGREE_PLACES = {
    "gold": 2,
    "cosine": 3,
    "cosine as gold": 2,
    "off by": lambda v: number_text(v, 2, signed=True),
    "rank gap (points)": lambda v: number_text(v, 1, signed=True),
}

RATED_SLICE = "rated / unrated languages"  # the slice of a model trained on rated pairs of only some languages
RATED, UNRATED, UNKNOWN = "rated", "unrated", "language unknown"
# ISO 639-3 (and a macrolanguage) -> the STS Multi MT code: a file's lang1 / lang2 may use either
_TO_STS = {three: two for two, three in ISO_639_3.items()} | {"cmn": "zh"}

_HOVER_PAIR = "pair #%{customdata}<br>gold %{x:.2f}<br>cosine %{y:.3f}"
_HOVER_BIN = "mean cosine %{x:.3f}<br>mean gold %{y:.2f}<br>%{customdata} pairs"


def metrics_row(model: str, pred: np.ndarray, gold: np.ndarray, n_boot: int, calibrated: np.ndarray | None) -> dict:
    """Correlations of the cosine; with a calibrated 0-5 score, also its Pearson and mean absolute error (gold points)
    — whether the score means the same on every model."""
    m = sts_metrics(pred, gold, n_boot=n_boot)
    p_lo, p_hi = bootstrap_pearson_ci(pred, gold, n_boot=n_boot) if not math.isnan(m["pearson"]) else [math.nan] * 2
    s_lo, s_hi = m["spearman_ci95"]
    cal_pearson = cal_mae = math.nan
    if calibrated is not None:
        cal_pearson = sts_metrics(calibrated, gold, n_boot=0)["pearson"]
        cal_mae = float(np.mean(np.abs(calibrated - gold)))
    values = (model, m["n"], m["pearson"], p_lo, p_hi, m["spearman"], s_lo, s_hi, cal_pearson, cal_mae)
    return dict(zip(METRIC_FIELDS, values, strict=True))


def compare(state, gold: np.ndarray, preds: dict[str, np.ndarray], title: str, n_boot: int = N_BOOT):
    """(histograms, scatter, calibration figures, metrics table as text, whether any model is calibrated) of each
    model's cosine ``preds[name]`` [n] against ``gold`` [n]; ``title``: plain text naming the data in the figures."""
    scores = {name: state.encoder(name).calibrate(p) for name, p in preds.items()}  # None: the model has no calibration
    calibrated = {n: None if c is None else np.asarray(c, dtype=np.float64) for n, c in scores.items()}  # 0-5, [n]
    rows = [metrics_row(n, p, gold, n_boot, calibrated[n]) for n, p in preds.items()]
    # as the page shows them: words for the field names, numbers as text
    table = numbers_as_text(pd.DataFrame(rows, columns=METRIC_FIELDS), METRIC_PLACES).set_axis(METRIC_COLUMNS, axis=1)
    maps = {n: _curve(p, c) for n, p in preds.items() if (c := calibrated[n]) is not None}
    return *figures(title, gold, preds, maps), table, bool(maps)


def _curve(pred: np.ndarray, calibrated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The calibration curve over the range of these cosines: (sorted cosines, their calibrated scores)."""
    order = np.argsort(pred, kind="stable")
    return pred[order], calibrated[order]


def figures(title: str, gold: np.ndarray, preds: dict[str, np.ndarray], maps: dict[str, tuple[np.ndarray, np.ndarray]]):
    """(histograms, scatter, calibration) plotly figures, titles and legend names HTML-escaped. ``maps``: each
    calibrated model's own cosine -> 0-5 curve."""
    import plotly.express as px  # lazy: plotly is slow to import; only figures need it
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    title = html_text(title)
    hist = make_subplots(rows=1, cols=2, subplot_titles=("predicted cosine", "gold score"))
    scatter, calib = go.Figure(), go.Figure()
    palette = px.colors.qualitative.Plotly
    for i, (name, pred) in enumerate(preds.items()):
        label, color = html_text(name), palette[i % len(palette)]
        hist.add_histogram(
            x=pred,
            name=label,
            nbinsx=40,
            histnorm="probability density",
            opacity=0.55,
            marker_color=color,
            legendgroup=label,
            row=1,
            col=1,
        )
        scatter.add_scattergl(
            x=gold,
            y=pred,
            mode="markers",
            name=label,
            customdata=np.arange(len(gold)),
            marker={"size": 4, "opacity": 0.45, "color": color},
            hovertemplate=_HOVER_PAIR,
        )
        bins = calibration_bins(pred, gold, N_BINS)
        calib.add_scatter(
            x=bins["mean_pred"],
            y=bins["mean_gold"],
            mode="lines+markers",
            name=label,
            error_y={"type": "data", "array": bins["sem_gold"]},
            line={"color": color},
            legendgroup=label,
            customdata=bins["count"],
            hovertemplate=_HOVER_BIN,
        )
        curves = [("isotonic", isotonic_fit(pred, gold), {"dash": "dot", "width": 1})]  # the best monotone fit here
        if name in maps:
            curves.append(("its calibration", maps[name], {"width": 2}))
        for what, (x, y), style in curves:
            line = {"color": color, **style}
            calib.add_scatter(
                x=x, y=y, mode="lines", name=f"{label} ({what})", legendgroup=label, line=line, hoverinfo="skip"
            )
    hist.add_trace(
        go.Histogram(
            x=gold, name="gold", nbinsx=26, histnorm="probability density", marker_color="#444", showlegend=False
        ),
        row=1,
        col=2,
    )
    hist.update_layout(title=f"Score distributions, {title}", barmode="overlay")
    scatter.update_layout(title=f"Predicted vs gold, {title}", xaxis_title="gold score", yaxis_title="cosine")
    calib.update_layout(
        title=f"Calibration: mean gold per {N_BINS} equal-count bins of cosine, {title}",
        xaxis_title="cosine (bin mean)",
        yaxis_title="gold score (bin mean, ±1 s.e.)",
    )
    return hist, scatter, calib


def empty_figures():
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    return go.Figure(), go.Figure(), go.Figure()


def disagreement_request(low, high, k) -> tuple[float, float, int] | str:
    """(low, high, k) as numbers, or the message that says what is wrong with them."""
    if low is None or high is None or k is None:
        return "Give a score range and a number of pairs."
    try:
        low, high, k = float(low), float(high), int(k)
    except (TypeError, ValueError, OverflowError):
        return "The score range and the number of pairs must be numbers."
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return f"Empty score range [{low:g}, {high:g}]: choose low <= high (gold scores are 0 to 5)."
    if k < 1:
        return "Ask for at least one pair."
    return low, high, k


def disagreement_table(
    pred: np.ndarray,
    gold: np.ndarray,
    s1: list[str],
    s2: list[str],
    low: float,
    high: float,
    k: int,
    name: str,
    index: tuple[str, list[int]] | None = None,
):
    """The k pairs with **gold** score in [low, high] whose predicted rank disagrees most with the gold rank -> (table,
    message); sorted by |pred_as_gold - gold|, then |rank_gap|. ``index``: (column name, values) of the first column."""
    column, positions = index if index is not None else ("index", None)
    columns = [header(column), *DISAGREE_COLUMNS[1:]]
    found = rank_disagreements(pred, gold, low=low, high=high, k=k)
    n_in = int(found["n_in_range"])
    if n_in == 0:
        return pd.DataFrame(columns=columns), f"No pair of {md_escape(name)} has a gold score in [{low:g}, {high:g}]."
    numbers = zip(*(found[key] for key in ("gold", "pred", "pred_as_gold", "diff", "rank_gap")))
    rows = [
        [int(i) if positions is None else int(positions[i]), *map(float, values), s1[i], s2[i]]
        for i, values in zip(found["index"], numbers)
    ]
    table = sortable(pd.DataFrame(rows, columns=columns), DISAGREE_PLACES)
    message = (
        f"{len(rows)} of the {n_in} pairs with gold score in [{low:g}, {high:g}], farthest off first. *Cosine as "
        "gold*: the gold score at the cosine's percentile; *off by*: that minus the gold score; *rank gap*: the "
        "cosine's percentile minus the gold score's, in points."
    )
    return table, message


# -- rated / unrated languages (the leave-languages-out protocol, mlse.experiments.unrated) ---------------------------
def model_rated_languages(state, models: list[str]) -> dict[str, tuple[str, ...]]:
    """The models among ``models`` trained on rated pairs of known languages (a fine-tuned run with the STS term, a
    scorer the protocol trained): name -> those languages."""
    locations = {m.name: m.location for m in state.models()}
    return {name: rated for name in models if (rated := rated_languages(locations.get(name, name))) is not None}


def sts_code(lang) -> str:
    """A language code as STS Multi MT writes it: "deu", "de_DE", "deu_Latn" -> "de"; blank or "und" -> ""."""
    text = str(lang or "").strip().lower().replace("-", "_").split("_")[0]
    return "" if text in ("", "und") else _TO_STS.get(text, text)


def rated_labels(lang1, lang2, rated) -> np.ndarray:
    """Per pair [n]: "rated" when the model learnt from rated pairs in both languages, "unrated" when one of them had
    none, "language unknown" when a language is blank or undetected."""
    rated = set(rated)
    codes = [{sts_code(a), sts_code(b)} for a, b in zip(lang1, lang2)]
    return np.array([UNKNOWN if "" in c else (RATED if c <= rated else UNRATED) for c in codes], dtype=object)
