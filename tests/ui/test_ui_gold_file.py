"""Tab 4 (predicted vs gold) on the user's own rated pairs: the upload handlers on assets/examples/rated_pairs.tsv
with the tiny BERT and the fake encoder, pasted rows, files without scores or with scores out of range."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from mlse.analysis.slices import LANGUAGE_PAIR, LENGTH
from mlse.data.user_files import read_pairs
from mlse.evaluation import sts_metrics
from mlse.serving.app_state import AppState
from mlse.ui.gold_file import (
    EXAMPLE,
    FILE_DISAGREE_COLUMNS,
    SLICE_HEADERS,
    compare_file,
    file_disagreements,
    file_predictions,
    load_rated,
    pair_languages,
)
from mlse.ui.gold_views import METRIC_COLUMNS
from tests.fake_encoder import FakeEncoder

FAKE = "fake-model"


class FakeState(AppState):
    """The app's state with one more model, a (counting) fake encoder."""

    fake = FakeEncoder(identity="fake:gold-file")

    def encoder(self, name: str):
        return self.fake if name == FAKE else super().encoder(name)


def _example() -> pd.DataFrame:
    return pd.read_csv(EXAMPLE, sep="\t", keep_default_na=False)


def test_compare_file_on_the_example(tiny_bert):
    state, model = FakeState(), str(tiny_bert)
    hist, scatter, calib, metrics, slices, msg = compare_file(state, str(EXAMPLE), None, [model, FAKE], n_boot=200)
    rows = _example()
    n = len(rows)
    assert list(metrics.columns) == METRIC_COLUMNS and list(metrics.model) == [model, FAKE]
    assert (metrics.n == n).all() and f"Read {n} sentence pairs" in msg and r"rated\_pairs.tsv" in msg
    table = read_pairs(EXAMPLE)
    pred = file_predictions(state, table, model)
    ref = sts_metrics(pred, rows.score.to_numpy(), n_boot=200)  # the library's numbers on the file's scores
    assert metrics.Pearson.iloc[0] == f"{ref['pearson']:.1f}" and metrics.Spearman.iloc[0] == f"{ref['spearman']:.1f}"
    first = metrics.iloc[0].replace("", np.nan)
    assert float(first["Pearson low"]) <= float(first.Pearson) <= float(first["Pearson high"])
    assert float(first["Spearman low"]) <= float(first["Spearman high"])
    # one trace per model (the histogram also has the gold one; calibration: bins + isotonic per model)
    assert [t.name for t in scatter.data] == [model, FAKE] and all(len(t.x) == n for t in scatter.data)
    assert len(hist.data) == 3 and len(calib.data) == 4
    # slices: every language pair of the file with its number of pairs, for each model; length bands add up
    assert list(slices.columns) == SLICE_HEADERS and SLICE_HEADERS[4:6] == ["Pearson", "Pearson low"]
    expected = Counter(f"{a}-{b}" for a, b in zip(rows.lang1, rows.lang2))
    for name in (model, FAKE):
        mine = slices[(slices.slice == LANGUAGE_PAIR) & (slices.model == name)]
        assert dict(zip(mine.value, mine.n)) == dict(expected)
        lengths = slices[(slices.slice == LENGTH) & (slices.model == name)]
        assert lengths.n.sum() == n and len(lengths) == 3 and lengths.value.iloc[0].startswith("short (≤ ")
    en_de = slices[(slices.value == "en-de") & (slices.model == model)].iloc[0]
    mask = ((rows.lang1 == "en") & (rows.lang2 == "de")).to_numpy()
    assert en_de.Spearman == f"{sts_metrics(pred[mask], rows.score[mask], n_boot=0)['spearman']:.1f}"
    small = slices[(slices.value == "fr-en") & (slices.model == model)].iloc[0]  # 3 pairs: a correlation, no CI
    assert small.n == 3 and small["Pearson low"] == "" and "no CI" in small.note
    assert "lang1 / lang2 columns" in msg and "detected" not in msg


def test_file_disagreements_list_the_files_pairs(tiny_bert):
    state, model = FakeState(), str(tiny_bert)
    styled, msg = file_disagreements(state, str(EXAMPLE), None, model, "", 0.0, 2.0, k=5)
    table = styled.data  # the numbers; the page shows them with fixed decimals (tests/ui/test_ui_gold.py)
    rows = _example()
    assert list(table.columns) == FILE_DISAGREE_COLUMNS and len(table) == 5
    gold = table.gold.astype(float)
    assert ((gold >= 0) & (gold <= 2)).all() and "5 of the" in msg
    for _, row in table.iterrows():  # "line" is the pair's line in the file (the header is line 1)
        source = rows.iloc[int(row.line) - 2]
        assert (row["sentence 1"], row["sentence 2"]) == (source.sentence1, source.sentence2)
        assert row.gold == pytest.approx(source.score)
    assert (np.diff(table["off by"].astype(float).abs().to_numpy()) <= 1e-9).all()
    assert "Empty score range" in file_disagreements(state, str(EXAMPLE), None, model, "", 4, 1)[1]
    assert "No pair" in file_disagreements(state, str(EXAMPLE), None, model, "", 6, 9)[1]
    assert "unknown model" in file_disagreements(state, str(EXAMPLE), None, "no-such-model")[1]


def test_languages_are_detected_without_lang_columns(tiny_bert):
    state = FakeState()
    rows = _example()
    pasted = rows[["sentence1", "sentence2", "score"]].to_csv(sep="\t", index=False)
    *_, metrics, slices, msg = compare_file(state, None, pasted, [FAKE], n_boot=0)
    assert metrics.n.iloc[0] == len(rows) and "detected" in msg and "pasted text" in msg
    table, _ = load_rated(None, pasted)
    lang1, lang2, detected = pair_languages(table)
    assert detected == 2 * len(rows)
    agree = np.mean([a == x and b == y for a, b, x, y in zip(lang1, lang2, rows.lang1, rows.lang2)])
    assert agree >= 0.85  # the example's labels, mostly recovered by langid
    pairs = slices[slices.slice == LANGUAGE_PAIR]
    assert dict(zip(pairs.value, pairs.n)) == dict(Counter(f"{a}-{b}" for a, b in zip(lang1, lang2)))
    assert pairs.n.sum() == len(rows)


def test_a_file_without_scores_is_refused_with_a_message(tmp_path):
    state = FakeState()
    path = tmp_path / "unrated.tsv"
    path.write_text("sentence1\tsentence2\nA cat.\tEine Katze.\nA dog.\tUn chien.\nA car.\tUn coche.\n")
    *figures, metrics, slices, msg = compare_file(state, str(path), None, [FAKE])
    assert "no score column" in msg and "scores files without gold" in msg and "unrated.tsv" in msg.replace("\\", "")
    assert metrics.empty and slices.empty and all(len(f.data) == 0 for f in figures)
    table, msg = file_disagreements(state, None, "one\ttwo\nthree\tfour\nfive\tsix\n", FAKE)
    assert table.empty and "no score column" in msg


def test_scores_outside_the_range_are_skipped_and_listed():
    state = FakeState()
    rows = _example()
    text = EXAMPLE.read_text(encoding="utf-8") + "A bad row.\tAnother.\t7\ten\ten\nOne more.\tAnd one.\t-1\ten\ten\n"
    *_, metrics, _, msg = compare_file(state, None, text, [FAKE], gold_range="0:5", n_boot=0)
    assert metrics.n.iloc[0] == len(rows) and "2 row(s) skipped" in msg
    assert f"pasted text:{len(rows) + 2}: column 'score': score 7 is outside" in msg
    *_, metrics, _, msg = compare_file(state, None, text, [FAKE], n_boot=0)  # no range: every row counts
    assert metrics.n.iloc[0] == len(rows) + 2 and "skipped" not in msg
    assert "score range '5:0'" in compare_file(state, None, text, [FAKE], gold_range="5:0")[-1]
    table, msg = file_disagreements(state, None, text, FAKE, "0:5", 0, 5, 3)
    assert len(table.data) == 3 and "2 row(s) skipped" in msg


def test_bad_input_and_one_bad_model():
    state = FakeState()
    assert compare_file(state, str(EXAMPLE), None, [])[-1] == "Choose at least one model."
    assert compare_file(state, None, "  ", [FAKE])[-1] == "Upload a file or paste rows first."
    assert "At least 3" in compare_file(state, None, "a\tb\t1\nc\td\t2\n", [FAKE])[-1]
    *_, metrics, slices, msg = compare_file(state, str(EXAMPLE), None, [FAKE, "no-such-model"], n_boot=0)
    assert list(metrics.model) == [FAKE] and "unknown model" in msg and set(slices.model) == {FAKE}
    assert "Ask for at least one" in file_disagreements(state, str(EXAMPLE), None, FAKE, "", 0, 5, 0)[1]


def test_predictions_are_memoised_and_a_read_table_is_reused():
    state = FakeState()
    table, msg = load_rated(str(EXAMPLE), None)
    assert table is not None and load_rated(table, None)[1] == msg  # the page passes the table it read
    file_predictions(state, table, FAKE)
    calls = state.fake.calls
    compare_file(state, table, None, [FAKE], n_boot=0)
    file_disagreements(state, table, None, FAKE)
    assert state.fake.calls == calls  # same model identity, same pairs: nothing encoded again


def test_tab_builds_with_both_sources(tiny_bert):
    import gradio as gr

    from mlse.ui import gold_tab

    with gr.Blocks() as demo:
        gold_tab.build_tab(AppState())
    config = str(demo.config)
    for name in ("predicted_vs_gold", "disagreements", "compare_file_with_gold", "file_disagreements"):
        assert f"'{name}'" in config
    labels = [b.value for b in demo.blocks.values() if isinstance(b, gr.Button)]
    assert "Compare with gold" in labels and "Compare file with gold" in labels
