"""How the app's tables read (mlse.ui.tables): words for the library's field names, numbers as text with fixed
decimals, and every table of the Score, Tatoeba, Predicted-vs-gold and map tabs built without wrapping, with long
cells cut (a click shows all of it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mlse.serving.app_state import AppState
from mlse.ui.tables import (
    CELL_CHARS,
    HEADERS,
    header,
    headers,
    number_text,
    numbers_as_text,
    significant_text,
    sortable,
)


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


def test_a_small_number_keeps_two_significant_digits():
    assert [significant_text(v) for v in (52.09125, 0.00123, -0.0012, 2e-5, 0, 40)] == [
        "52.09",
        "0.0012",
        "-0.0012",
        "2e-05",
        "0.00",
        "40.00",
    ]
    assert [significant_text(v) for v in (None, math.nan, "interrupted")] == ["", "", "interrupted"]


def test_a_sortable_table_shows_text_and_keeps_its_numbers():
    """gradio shows a Styler's text (``display_value``) and sorts its cells, which stay numbers: "-0.50" before
    "0.10", "0.0012" before "0.01", which text would not give."""
    import gradio as gr

    frame = pd.DataFrame({"model": ["a", "b", "c"], "value": [0.1, -0.5, 0.0012], "gap": [1.5, np.nan, 2.0]})
    sent = gr.Dataframe(interactive=False).postprocess(sortable(frame, {"value": significant_text, "gap": 2}))
    assert [row[1] for row in sent.data] == [0.1, -0.5, 0.0012]  # numbers: a header click sorts by value
    assert [row[1:] for row in sent.metadata["display_value"]] == [["0.10", "1.50"], ["-0.50", ""], ["0.0012", "2.00"]]


def test_the_results_tables_show_two_decimals_and_sort_by_number():
    import gradio as gr

    from mlse.ui.results_rated import SPLIT_COLUMNS, split_shown
    from mlse.ui.results_tab import shown

    rows = pd.DataFrame(
        {
            "model": ["m"] * 5,
            "metric": ["spearman", "loss", "steps", "stage1_best_epoch", "weight_average.from_step"],
            "value": [66.7, -0.25, 40.0, 7.0, 1200.0],
        }
    )
    sent = gr.Dataframe(interactive=False).postprocess(shown(rows))
    assert [r[2] for r in sent.data] == [66.7, -0.25, 40.0, 7.0, 1200.0]  # numbers: sorting stays by value
    # a count reads as a whole number ("40", not "40.00"); everything else with 2 decimals
    assert [r[2] for r in sent.metadata["display_value"]] == ["66.70", "-0.25", "40", "7", "1200"]
    split = pd.DataFrame([["m", "en-de", 70.0, None, None, "", "x"]], columns=SPLIT_COLUMNS)
    assert split_shown(split).to_html().count(">70.00<") == 1  # the rated Spearman with 2 decimals, the rest blank


@pytest.mark.parametrize("tab", ["score_tab", "tatoeba_tab", "gold_tab", "map_tab", "results_tab"])
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
