"""Why this score? in the app (mlse.ui.explain_view): the handlers of the Score, Tatoeba and predicted-vs-gold tabs
called directly on the tiny BERT, checked against mlse.explain itself; refusals as messages; the sections' wiring."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.explain import align_tokens, default_layer, explain_pair
from mlse.explain.backbones import attributable
from mlse.serving.app_state import AppState
from mlse.ui import gold_file
from mlse.ui.explain_figures import alignment_marks
from mlse.ui.explain_view import (
    DEFAULT_LAYER,
    MAX_CHARS,
    TEACHING,
    default_explained,
    explain_and_keep,
    explain_listed_pair,
    explain_retrieval_error,
    explainable_models,
    layer_choices,
    picked_error,
    picked_pair,
    top_pairs_text,
    unavailable_note,
)
from mlse.ui.tatoeba_tab import ERROR_COLUMNS, bitext_retrieval
from mlse.ui.tatoeba_upload import EXAMPLE as BITEXT
from mlse.ui.text import md_escape
from tests.fake_encoder import FakeEncoder

S1, S2 = "A man is playing a flute.", "Ein Mann spielt Flöte."
STEPS, LAYER = 4, 1  # few steps on a shallow layer: the tiny BERT explains in milliseconds


@pytest.fixture(scope="module")
def bert(tiny_bert):
    """(the app's state, the tiny BERT's name there, its loaded encoder): the handler and the oracle share weights."""
    state = AppState()
    return state, str(tiny_bert), state.encoder(str(tiny_bert))


def _ticks(fig) -> tuple[list[str], list[str]]:
    return [list(fig.layout.yaxis.ticktext), list(fig.layout.xaxis.ticktext)]


# -- Score a pair -------------------------------------------------------------------------------------------------
def test_heatmap_is_the_explanations_matrix_with_the_words_as_labels(bert):
    state, model, encoder = bert
    expected = explain_pair(encoder, S1, S2, steps=STEPS, layer=LAYER)
    fig, align_fig, text, _ = explain_and_keep(state, model, S1, S2, STEPS, LAYER, show_special=True)
    heat = fig.data[0]
    assert heat.type == "heatmap" and heat.zmid == 0
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float), expected.matrix, atol=1e-6)
    assert _ticks(fig) == [list(expected.words1), list(expected.words2)]
    # Positions as axes: a word written twice ("a" in S1 after lower-casing, [CLS]/[SEP]) keeps its own row.
    assert list(heat.y) == list(range(len(expected.words1))) and list(heat.x) == list(range(len(expected.words2)))
    # Without the special tokens (the default) the heatmap is the words-only part of the same matrix.
    words1, words2, matrix = expected.words_only()
    fig_words, *_ = explain_and_keep(state, model, S1, S2, STEPS, LAYER)
    np.testing.assert_allclose(np.asarray(fig_words.data[0].z, dtype=float), matrix, atol=1e-6)
    assert _ticks(fig_words) == [list(words1), list(words2)] and len(words1) < len(expected.words1)
    # The text: the score, the top pairs in order, the reference terms and the residual with its share.
    top = expected.top_pairs(5)
    assert top_pairs_text(expected) in text and f"{top[0][2]:+.3f}" in text
    assert f"{expected.score:.4f}" in text and f"{expected.reference_terms:+.4f}" in text
    share = round(100 * expected.residual / (expected.score - expected.reference_terms), 1)
    shown = f"{share:+.1f} %" if share else "0.0 %"  # a residual that rounds to 0 is not shown as "-0.0 %"
    assert f"| **residual** (integration error) | {expected.residual:+.4f} | {shown} |" in text
    assert f"layer {LAYER}" in text and f"{STEPS} steps" in text
    # The words carrying the most: the largest word total of each sentence, first in its list.
    first1, first2 = (ranked[0] for ranked in expected.top_words(3))
    assert first1[1] == max(v for w, v, sp in zip(expected.words1, expected.word_totals1, expected.special1) if not sp)
    assert f"sentence 1: {first1[0]} **{first1[1]:+.3f}**" in text and f"{first2[0]} **{first2[1]:+.3f}**" in text
    # The alignment beside it: its own words, labelled as not an explanation, best matches marked.
    alignment = align_tokens(encoder, S1, S2)
    assert _ticks(align_fig) == [list(alignment.words1), list(alignment.words2)]
    np.testing.assert_allclose(np.asarray(align_fig.data[0].z, dtype=float), alignment.similarity, atol=1e-6)
    assert "not an explanation of the score" in align_fig.layout.title.text and "not an explanation" in text
    marks = np.asarray(align_fig.data[0].text)
    assert (marks != "").sum(axis=1).min() >= 1  # every word of sentence 1 has its best match marked
    assert "positive" in TEACHING and "negative" in TEACHING


def test_alignment_marks_mutual_and_one_way_matches():
    marks = alignment_marks(best1=(0, 0), best2=(0, 1, 1), shape=(2, 3))
    assert marks.tolist() == [["●", "", ""], ["→", "↓", "↓"]]


def test_empty_input_and_bad_settings_come_back_as_messages(bert):
    state, model, encoder = bert
    assert explain_and_keep(state, model, "  ", S2)[2] == "Enter two non-empty sentences to explain."
    assert explain_and_keep(state, None, S1, S2)[2] == "Choose a model to explain."
    fig, align, text, _ = explain_and_keep(state, model, S1, S2, steps=0)
    assert fig is None and align is None and "steps must be a whole number from 1 to 64" in text
    assert "layer must be a whole number" in explain_and_keep(state, model, S1, S2, layer=1.5)[2]
    assert "layer must be a whole number" in explain_and_keep(state, model, S1, S2, layer="top")[2]
    default = explain_and_keep(state, model, S1, S2, STEPS, layer=DEFAULT_LAYER)[2]  # the picker's first choice
    assert f"layer {default_layer(attributable(encoder))} (0 = " in default
    too_deep = explain_and_keep(state, model, S1, S2, layer=99)[2]  # the library names the model's depth
    assert "layer must be 0" in too_deep and "got 99" in too_deep
    assert explain_and_keep(state, "no-such-model", S1, S2)[2].startswith("unknown model 'no-such-model'")
    long = "word " * 200
    fig, _, text, _ = explain_and_keep(state, model, long, S2, STEPS, LAYER)
    assert fig is not None and f"cut to its first {MAX_CHARS} characters" in text


def test_a_model_that_cannot_be_explained_gives_the_librarys_message():
    state = SimpleNamespace(encoder=lambda name: FakeEncoder(name=name), backend="torch")
    with pytest.raises(MlseError) as refused:
        explain_pair(FakeEncoder(name="fake"), S1, S2)
    for fig, other, text, *_ in (
        explain_and_keep(state, "fake", S1, S2),
        explain_retrieval_error(state, "fake", S1, S2, S2),
        explain_listed_pair(state, "fake", S1, S2, 3.0, 0.5),
    ):
        assert fig is None and other is None
        assert text == md_escape(str(refused.value)) and "cannot be explained" in text

    def broken(name):
        raise RuntimeError("weights file truncated")

    text = explain_and_keep(SimpleNamespace(encoder=broken), "bad", S1, S2)[2]
    assert text == "bad could not be explained (RuntimeError: weights file truncated)"


def test_models_offered_for_explaining():
    listed = (("me5-small", "registry"), ("grid/s1", "scorer"), ("student", "run"), ("minilm-en", "registry"))
    models = [SimpleNamespace(name=n, source=s) for n, s in listed]
    state = SimpleNamespace(models=lambda: models, backend="torch")
    assert explainable_models(state) == ["me5-small", "student", "minilm-en"] and unavailable_note(state) == ""
    assert default_explained(state, ["grid/s1", "minilm-en"]) == "minilm-en"  # the first ticked one it can explain
    assert default_explained(state, ["grid/s1"]) == "me5-small"
    assert default_explained(state, ["minilm-en"], current="student") == "student"  # the user's choice stays
    onnx = SimpleNamespace(models=lambda: models, backend="onnx")
    assert explainable_models(onnx) == [] and "--backend torch" in unavailable_note(onnx)
    assert default_explained(onnx, ["minilm-en"]) is None


# -- Tatoeba errors -----------------------------------------------------------------------------------------------
def test_a_tatoeba_error_is_explained_side_by_side(bert):
    state, model, encoder = bert
    _, table, corpus = bitext_retrieval(state, str(BITEXT), None, model)
    assert corpus is not None and len(table) > 0  # the tiny BERT retrieves wrongly: there are errors to explain
    row = table.iloc[0].tolist()  # what gr.SelectData.row_value carries
    cell = dict(zip(ERROR_COLUMNS, row))
    picked = picked_error((corpus, model), row, ERROR_COLUMNS)
    assert picked == {
        "model": model,
        "query": cell["query"],
        "retrieved": cell["retrieved"],
        "gold": cell["gold"],
        "label": f"{cell['direction']} #{cell['row']}",
    }
    wrong_fig, gold_fig, summary, wrong_text, gold_text = explain_retrieval_error(
        state, model, picked["query"], picked["retrieved"], picked["gold"], picked["label"]
    )
    wrong = explain_pair(encoder, cell["query"], cell["retrieved"])
    right = explain_pair(encoder, cell["query"], cell["gold"])
    assert _ticks(wrong_fig) == [list(wrong.words_only()[0]), list(wrong.words_only()[1])]
    assert _ticks(gold_fig) == [list(right.words_only()[0]), list(right.words_only()[1])]
    np.testing.assert_allclose(np.asarray(gold_fig.data[0].z, dtype=float), right.words_only()[2], atol=1e-6)
    # The scores explained are the ones the errors table shows (written there with 3 decimals).
    assert wrong.score == pytest.approx(float(cell["cosine retrieved"]), abs=6e-4)
    assert right.score == pytest.approx(float(cell["cosine gold"]), abs=6e-4)
    assert wrong.score >= right.score - 1e-4  # an error under the cosine criterion
    assert f"the retrieved sentence scores {wrong.score:.4f}, the gold {right.score:.4f}" in summary
    assert picked["label"] in summary.replace("\\", "")  # "en→de #3" (markdown-escaped)
    assert wrong_text.startswith(f"**Query vs retrieved** — cosine **{wrong.score:.4f}**")
    assert gold_text.startswith(f"**Query vs gold** — cosine **{right.score:.4f}**") and "residual" in gold_text
    assert picked_error(None, row, ERROR_COLUMNS) is None  # no table shown yet
    assert picked_error((corpus, model), dict(zip(ERROR_COLUMNS, row)), ERROR_COLUMNS) == picked
    assert "Select a row" in explain_retrieval_error(state, model, None, None, None)[2]


def test_layer_choices_start_with_the_models_default():
    choices = layer_choices(3)
    assert choices[0][1] == DEFAULT_LAYER and [v for _, v in choices[1:]] == ["0", "1", "2", "3"]


# -- Predicted vs gold --------------------------------------------------------------------------------------------
def test_a_disagreement_row_opens_its_pairs_explanation(bert):
    state, model, encoder = bert
    styled, _ = gold_file.file_disagreements(state, str(gold_file.EXAMPLE), None, model, k=3)
    table = styled.data  # as the page sends a selected row back: numbers and sentences
    row = table.iloc[0].tolist()  # line, gold, cosine, cosine as gold, off by, rank gap, sentence 1, sentence 2
    picked = picked_pair(row, list(table.columns))
    assert picked["sentence1"] == row[6] and picked["sentence2"] == row[7] and picked["label"] == f"line {row[0]}"
    fig, align_fig, text = explain_listed_pair(
        state, model, picked["sentence1"], picked["sentence2"], picked["gold"], picked["cosine"], picked["label"]
    )
    expected = explain_pair(encoder, row[6], row[7])
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), expected.words_only()[2], atol=1e-6)
    assert expected.score == pytest.approx(float(row[2]), abs=1e-3)  # the cosine the table listed (3 decimals)
    assert text.startswith(f"From the largest disagreements: pair line {row[0]}, gold **{row[1]:.2f}**")
    assert align_fig is not None
    assert picked_pair([1, 2, 3], list(table.columns)) is None  # not a row of sentences
    assert "Select a row" in explain_listed_pair(state, model, None, None)[2]


# -- the sections -------------------------------------------------------------------------------------------------
def test_sections_wire_named_events_and_check_the_model(tiny_bert):
    import gradio as gr

    from mlse.ui.explain_sections import build_error_section, build_pair_section, build_score_section

    state = AppState()
    with gr.Blocks() as demo:
        s1, s2 = gr.Textbox(), gr.Textbox()
        models = gr.CheckboxGroup(state.model_names(), value=[])
        build_score_section(state, s1, s2, models)
        build_error_section(state, gr.Dataframe(), gr.State(None), ERROR_COLUMNS)
        build_pair_section(state, gr.Dataframe(), gr.Dropdown(["x"], value="x"))
    names = {d.get("api_name") for d in demo.config["dependencies"]}
    assert {"explain_pair", "explain_tatoeba_error", "explain_disagreement"} <= names
    picker = next(b for b in demo.blocks.values() if getattr(b, "label", None) == "Model to explain")
    with pytest.raises(gr.Error, match="Model to explain: 'nope' is not offered"):
        picker.preprocess("nope")
