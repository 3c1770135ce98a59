"""Tab 4 (predicted vs gold): handlers on STS Multi MT with a tiny model, and the pure helpers on hand-made data."""

from __future__ import annotations

import gradio as gr
import numpy as np
import pandas as pd
import pytest

from mlse.data import load_sts
from mlse.data.pairs import sts_pair_choices
from mlse.evaluation import sts_metrics
from mlse.serving.app_state import AppState
from mlse.ui.gold_tab import (
    DISAGREE_COLUMNS,
    DISAGREE_TYPES,
    METRIC_COLUMNS,
    disagreements,
    predicted_vs_gold,
    predictions,
)

PAIR, SPLIT = "en-de", "dev"


def test_pair_list_starts_with_the_seed_pairs():
    pairs = sts_pair_choices()  # the gold tab's pair list
    assert pairs[:2] == ["en-en", "en-de"] and "de-fr" in pairs and len(pairs) == len(set(pairs)) == 121


def test_predicted_vs_gold_handler(tiny_bert, data_dir):
    state, model = AppState(), str(tiny_bert)
    hist, scatter, calib, table, msg = predicted_vs_gold(state, PAIR, [model], SPLIT, n_boot=200)
    gold = load_sts(PAIR, SPLIT).scores
    assert list(table.columns) == METRIC_COLUMNS and len(table) == 1 and table.n.iloc[0] == len(gold)
    _, pred = predictions(state, PAIR, model, SPLIT)
    ref = sts_metrics(pred, gold, n_boot=200)  # the library's numbers, not a re-implementation
    row = table.iloc[0]
    assert row["Spearman"] == f"{ref['spearman']:.1f}" and row["Pearson"] == f"{ref['pearson']:.1f}"  # x 100, as text
    low, pearson, high = (float(row[c]) for c in ("Pearson low", "Pearson", "Pearson high"))
    assert low <= pearson <= high and float(row["Spearman low"]) <= float(row["Spearman high"])
    assert not any("_" in c for c in table.columns)
    assert len(hist.data) == 2 and len(scatter.data) == 1 and len(calib.data) == 2  # model + gold; bins + isotonic
    assert len(scatter.data[0].x) == len(gold) and str(len(gold)) in msg


def test_predicted_vs_gold_bad_input(tiny_bert, monkeypatch, tmp_path):
    state, model = AppState(), str(tiny_bert)
    *figs, table, msg = predicted_vs_gold(state, "en-xx", [model], SPLIT)
    assert "unknown STS Multi MT language" in msg and table.empty and all(len(f.data) == 0 for f in figs)
    assert predicted_vs_gold(state, PAIR, [], SPLIT)[-1] == "Choose at least one model."
    assert "unknown STS split" in predicted_vs_gold(state, PAIR, [model], "validation")[-1]
    # One bad model among good ones: the good one is still shown, the bad one is named.
    *_, table, msg = predicted_vs_gold(state, PAIR, [model, "no-such-model"], SPLIT, n_boot=0)
    assert len(table) == 1 and "unknown model" in msg
    monkeypatch.setenv("MLSE_DATA", str(tmp_path / "missing"))
    assert "does not exist" in predicted_vs_gold(state, PAIR, [model], SPLIT)[-1]


def test_disagreements_range_filter(tiny_bert, data_dir):
    state, model = AppState(), str(tiny_bert)
    gold = load_sts(PAIR, SPLIT).scores  # float32: 3.8 is stored as 3.7999999523
    value = 3.8
    n_exact = int(np.isclose(gold, value, atol=1e-6).sum())
    assert n_exact > 0
    table, msg = disagreements(state, PAIR, model, SPLIT, value, value, k=500)
    assert len(table.data) == n_exact and np.allclose(table.data.gold, value)  # an inclusive range hits float32 values
    styled, msg = disagreements(state, PAIR, model, SPLIT, 2.0, 3.0, k=15)
    table = styled.data  # the numbers (a header click sorts by them); the page shows the Styler's text
    assert list(table.columns) == DISAGREE_COLUMNS and len(table) == 15
    # The scores come first and read as words with fixed decimals; the sentences follow.
    assert DISAGREE_COLUMNS[:6] == ["row", "gold", "cosine", "cosine as gold", "off by", "rank gap (points)"]
    shown = pd.DataFrame(gr.Dataframe(interactive=False).postprocess(styled).metadata["display_value"])
    shown.columns = DISAGREE_COLUMNS
    assert shown.cosine.str.fullmatch(r"-?\d\.\d{3}").all() and shown.gold.str.fullmatch(r"\d\.\d\d").all()
    assert shown["off by"].str.fullmatch(r"[+-]\d\.\d\d|0\.00").all(), shown["off by"]  # signed: "+0.35", "-1.20"
    assert (table["off by"] < 0).any() and (table["off by"] > 0).any()  # both signs, as numbers (sorted by value)
    gold = table.gold.astype(float)
    assert ((gold >= 2.0) & (gold <= 3.0)).all()
    assert (np.diff(table["off by"].astype(float).abs().to_numpy()) <= 1e-9).all()  # largest disagreement first
    ds = load_sts(PAIR, SPLIT)
    i = int(table["row"].iloc[0])
    assert table["sentence 1"].iloc[0] == ds.s1[i] and table["sentence 2"].iloc[0] == ds.s2[i]
    assert DISAGREE_TYPES[DISAGREE_COLUMNS.index("sentence 1")] == "str"  # rendered as text, never as HTML


def test_disagreements_bad_input(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    table, msg = disagreements(state, PAIR, model, SPLIT, 4.0, 1.0)
    assert table.empty and "Empty score range" in msg
    table, msg = disagreements(state, PAIR, model, SPLIT, 5.5, 9.0)
    assert table.empty and "No pair" in msg
    assert "Give a score range" in disagreements(state, PAIR, model, SPLIT, None, 3.0)[1]
    assert "unknown model" in disagreements(state, PAIR, "no-such-model", SPLIT, 0, 5)[1]
    assert "at least one" in disagreements(state, PAIR, model, SPLIT, 0, 5, 0)[1]


def test_tab_builds(tiny_bert):
    import gradio as gr

    from mlse.ui import gold_tab

    with gr.Blocks() as demo:
        gold_tab.build_tab(AppState())
    assert "predicted_vs_gold" in str(demo.config) and "disagreements" in str(demo.config)


def test_predicted_vs_gold_uses_a_backbones_calibration(tiny_bert, data_dir):
    from mlse.calibration import backbone as bc
    from mlse.calibration.isotonic import IsotonicMap
    from mlse.encoders.identity import weights_identity
    from mlse.encoders.load import load_encoder

    model = str(tiny_bert)
    identity = weights_identity(load_encoder(model).identity)
    mapping = IsotonicMap((-1.0, 1.0), (0.0, 5.0))  # a straight line: calibrated = 2.5 * (cosine + 1)
    bc.save_calibration(bc.BackboneCalibration(model, identity, mapping), {}, bc.local_dir(), command="test")
    state = AppState()
    _, _, calib, table, msg = predicted_vs_gold(state, PAIR, [model], SPLIT, n_boot=0)
    _, pred = predictions(state, PAIR, model, SPLIT)
    gold = load_sts(PAIR, SPLIT).scores
    row = table.iloc[0]
    assert row["Pearson, 0-5 score"] == row["Pearson"]  # a linear map keeps Pearson
    assert float(row["mean error, 0-5 score"]) == pytest.approx(np.mean(np.abs(2.5 * (pred + 1) - gold)), abs=0.006)
    assert len(calib.data) == 3 and "its calibration" in calib.data[2].name and "Pearson, 0-5 score" in msg
