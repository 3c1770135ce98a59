"""How the app's tables read (mlse.ui.tables): words for the library's field names, numbers as text with fixed
decimals, and every table of the Score, Tatoeba, Predicted-vs-gold and map tabs built without wrapping, with long
cells cut (a click shows all of it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mlse.serving.app_state import AppState
from mlse.ui.tables import CELL_CHARS, HEADERS, header, headers, number_text, numbers_as_text


def test_field_names_become_words():
    assert headers(["direction", "index", "sim_retrieved", "rank_of_gold"]) == [
        "direction",
        "row",
        "cosine retrieved",
        "rank of gold",
    ]
    assert header("pred_as_gold") == "cosine as gold" and header("rank_gap") == "rank gap (points)"
    assert header("a name it does not know") == "a name it does not know"
    assert not any("_" in words for words in HEADERS.values())  # no field name leaks through as a header


def test_numbers_are_text_with_fixed_decimals():
    assert number_text(0.9, 2) == "0.90" and number_text(0.8712, 3) == "0.871" and number_text(3, 1) == "3.0"
    assert number_text(-0.001, 2) == "0.00"  # never "-0.00"
    assert number_text(0.35, 2, signed=True) == "+0.35" and number_text(-0.35, 2, signed=True) == "-0.35"
    assert number_text(0.0, 2, signed=True) == "0.00"
    assert [number_text(v, 2) for v in (None, math.nan, math.inf, "x", "")] == [""] * 5


def test_a_frame_keeps_its_other_columns():
    frame = pd.DataFrame({"sentence": ["a", "b"], "cosine": [0.81234, np.nan], "diff": [0.5, -0.25]})
    out = numbers_as_text(frame, {"cosine": 3, "diff": 2, "missing": 1}, signed=("diff",))
    assert out.to_dict("list") == {"sentence": ["a", "b"], "cosine": ["0.812", ""], "diff": ["+0.50", "-0.25"]}
    assert frame["cosine"].iloc[0] == pytest.approx(0.81234)  # a copy: the input is unchanged


@pytest.mark.parametrize("tab", ["score_tab", "tatoeba_tab", "gold_tab", "map_tab"])
def test_every_table_of_a_tab_is_one_line_a_row_with_word_headers(tab, data_dir):
    import importlib

    import gradio as gr

    module = importlib.import_module(f"mlse.ui.{tab}")
    with gr.Blocks() as demo:
        module.build_tab(AppState())
    tables = [b for b in demo.blocks.values() if isinstance(b, gr.Dataframe)]
    assert tables, tab
    for table in tables:
        assert table.wrap is False, (tab, table.label)
        if table.label != "Summary (one row per model)":  # a short table of models and numbers
            assert table.max_chars == CELL_CHARS, (tab, table.label)
        assert not table.column_widths, (tab, table.label)  # fixed widths would cut headers mid-word
        for name in table.value.get("headers", []) if isinstance(table.value, dict) else []:
            assert "_" not in str(name), (tab, table.label, name)
