"""Tab 3 (Tatoeba retrieval errors): handlers on the real LASER data with tiny models, and on a hand-made corpus."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.serving.app_state import AppState
from mlse.ui.tatoeba_tab import (
    COMPARE_COLUMNS,
    ERROR_COLUMNS,
    ERROR_TYPES,
    NEIGHBOUR_COLUMNS,
    compare,
    details,
    retrieval,
)
from mlse.ui.tatoeba_views import languages, tatoeba_view

SMALL = "tzl"  # the smallest LASER Tatoeba language (~100 pairs): keeps encoding fast


@pytest.fixture()
def html_corpus(tmp_path, monkeypatch):
    """A 4-pair Tatoeba-like language 'zzz' whose sentences hold HTML and markdown."""
    folder = tmp_path / "tatoeba_laser_v1"
    folder.mkdir()
    src = ["<b>bold</b> cat", "*star* dog", "[link](http://x) bird", "plain fish"]
    tgt = ["a <i>cat</i>", "a dog", "a bird", "a fish"]
    (folder / "tatoeba.zzz-eng.zzz").write_text("\n".join(src) + "\n", encoding="utf-8")
    (folder / "tatoeba.zzz-eng.eng").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    monkeypatch.setenv("MLSE_DATA", str(tmp_path))
    return src, tgt


def test_languages_list_the_laser_set(data_dir):
    langs = languages(AppState())
    assert len(langs) == 112 and "deu" in langs and SMALL in langs and "eng" not in langs


def test_retrieval_errors_match_the_accuracies(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    text, df = retrieval(state, SMALL, model)
    view = tatoeba_view(state, SMALL, model)
    n = len(view.src)
    assert list(df.columns) == ERROR_COLUMNS and "to_en" in text and "from_en" in text
    # The table speaks words, and its scores are text with three decimals (never "0.8" next to "0.812").
    assert not any("_" in c for c in df.columns) and "cosine retrieved" in df.columns
    for column in ("cosine retrieved", "cosine gold", "margin retrieved", "margin gold"):
        assert df[column].str.fullmatch(r"-?\d+\.\d{3}").all(), column
    for direction, key in (("to_en", "acc_to_en"), ("from_en", "acc_from_en")):
        rows = df[df.direction == direction]
        assert len(rows) == round(n * (100 - view.metrics[key]) / 100)
        assert f"{view.metrics[key]:.1f}" in text
    # Cosine criterion: what was retrieved is at least as close as the gold, and the gold is really the gold.
    retrieved, gold = df["cosine retrieved"].astype(float), df["cosine gold"].astype(float)
    assert (retrieved >= gold - 1e-3).all() and (df["rank of gold"] >= 2).all()
    first = df[df.direction == "to_en"].iloc[0]
    assert first.query == view.src[first["row"]] and first.gold == view.tgt[first["row"]]
    # The margin criterion lists as many errors as its own accuracy says.
    _, df_m = retrieval(state, SMALL, model, "margin")
    assert len(df_m[df_m.direction == "to_en"]) == round(n * (100 - view.metrics["acc_to_en_margin"]) / 100)


def test_view_is_memoised(tiny_bert):
    state = AppState()
    assert tatoeba_view(state, SMALL, str(tiny_bert)) is tatoeba_view(state, SMALL.upper(), str(tiny_bert))


def test_details_of_a_selected_row(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    _, df = retrieval(state, SMALL, model)
    row = df[df.direction == "from_en"].iloc[0].tolist()  # what gr.SelectData.row_value carries
    cell = dict(zip(ERROR_COLUMNS, row))
    text, nn = details(state, SMALL, model, row, k=5)
    assert len(nn) == 5 and list(nn["rank"]) == [1, 2, 3, 4, 5]
    assert nn.sentence.iloc[0] == cell["retrieved"] and nn.cosine.iloc[0] == cell["cosine retrieved"]  # 3 decimals
    assert (np.diff(nn.cosine.astype(float).to_numpy()) <= 1e-6).all()
    assert f"(rank {int(cell['rank of gold'])}), ratio margin" in text  # the gold's rank agrees with the table
    assert "Select a row" in details(state, SMALL, model, None)[0]
    msg, empty = details(state, SMALL, model, ["sideways", 3])
    assert "not an errors-table row" in msg and empty.empty


def test_bad_input_gives_messages_not_tracebacks(tiny_bert, monkeypatch, tmp_path):
    state, model = AppState(), str(tiny_bert)
    text, df = retrieval(state, "klingon", model)
    assert "unknown Tatoeba language" in text and df.empty
    text, df = retrieval(state, SMALL, "no-such-model")
    assert "unknown model" in text and df.empty
    assert "Choose a Tatoeba language" in retrieval(state, "", model)[0]
    monkeypatch.setenv("MLSE_DATA", str(tmp_path / "missing"))
    text, df = retrieval(state, SMALL, model)
    assert "does not exist" in text and df.empty
    assert languages(state) == []


def test_html_in_sentences_stays_text(tiny_bert, html_corpus):
    src, tgt = html_corpus
    state, model = AppState(), str(tiny_bert)
    _, df = retrieval(state, "zzz", model)
    nn_text, _ = details(state, "zzz", model, ["to_en", 0])
    assert "<b>" not in nn_text and "<i>" not in nn_text
    assert "&lt;b&gt;bold&lt;/b&gt;" in nn_text and "a &lt;i&gt;cat&lt;/i&gt;" in nn_text
    # Table cells keep the raw text; their datatype "str" makes gradio render them as text, not HTML/markdown.
    assert all(ERROR_TYPES[ERROR_COLUMNS.index(c)] == "str" for c in ("query", "retrieved", "gold"))
    assert set(df["query"]) <= set(src) | set(tgt)


def test_compare_a_model_with_itself_changes_nothing(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    text, df = compare(state, SMALL, model, model)
    assert df.empty and list(df.columns) == COMPARE_COLUMNS
    assert "Fixed by B: **0**" in text and "broken by B: **0**" in text


def test_compare_two_models_counts_add_up(tiny_bert, tiny_labse):
    state, a, b = AppState(), str(tiny_bert), str(tiny_labse)
    text, df = compare(state, SMALL, a, b)
    err_a = sum(len(v) for v in tatoeba_view(state, SMALL, a).errors().values())
    err_b = sum(len(v) for v in tatoeba_view(state, SMALL, b).errors().values())
    fixed, broken = int((df.change == "fixed by B").sum()), int((df.change == "broken by B").sum())
    assert fixed - broken == err_a - err_b
    assert f"Fixed by B: **{fixed}**" in text and f"broken by B: **{broken}**" in text
    fixed_rows = df[df.change == "fixed by B"]
    by_a, by_b = fixed_rows["retrieved by A"], fixed_rows["retrieved by B"]
    assert (by_b == fixed_rows.gold).all() and (by_a != fixed_rows.gold).all()


def test_tab_builds(tiny_bert):
    import gradio as gr
    from gradio.utils import get_type_hints

    from mlse.ui import tatoeba_tab

    with gr.Blocks() as demo:
        tatoeba_tab.build_tab(AppState())
    assert "tatoeba_errors" in str(demo.config)
    on_select = next(f.fn for f in demo.fns.values() if f.fn.__name__ == "on_select")
    assert get_type_hints(on_select).get("evt") is gr.SelectData  # else gradio would not pass the selected row


def test_the_scores_come_before_the_sentences():
    """At 1400 px three sentence columns first pushed the scores off-screen (issue 48): the row, then the scores."""
    assert ERROR_COLUMNS == [
        "direction",
        "row",
        "cosine retrieved",
        "cosine gold",
        "margin retrieved",
        "margin gold",
        "rank of gold",
        "query",
        "retrieved",
        "gold",
    ]
    assert len(ERROR_TYPES) == len(ERROR_COLUMNS) and ERROR_TYPES[ERROR_COLUMNS.index("rank of gold")] == "number"
    assert NEIGHBOUR_COLUMNS.index("cosine") < NEIGHBOUR_COLUMNS.index("sentence")
