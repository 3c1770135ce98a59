"""The Tatoeba errors tab on the user's own bitext: reading it, scoring it like a Tatoeba language, and the handlers
(retrieval, details of a row, two scorers compared) on assets/examples/bitext.tsv with tiny models."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.data.types import ParallelCorpus
from mlse.data.user_files import read_table
from mlse.errors import DataError
from mlse.evaluation.bitext_view import bitext_digest, bitext_notes, prepare_bitext, score_bitext
from mlse.evaluation.retrieval import retrieval_accuracy, xsim_error
from mlse.memo import MB, BytesMemo
from mlse.serving.app_state import AppState
from mlse.ui.tatoeba_tab import COMPARE_COLUMNS, ERROR_COLUMNS, NO_BITEXT, bitext_compare, bitext_retrieval, details
from mlse.ui.tatoeba_upload import EXAMPLE, read_bitext, to_bitext
from mlse.ui.tatoeba_views import source_view
from tests.fake_encoder import FakeEncoder


def example_rows() -> list[list[str]]:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines[1:]]


# -- the library: scoring a user's corpus ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [4, 2])
def test_scores_equal_the_retrieval_functions_on_the_same_embeddings(k):
    rows = example_rows()
    corpus = ParallelCorpus([r[0] for r in rows], [r[1] for r in rows], "en", "de", "bitext")
    encoder = FakeEncoder()
    view = score_bitext(encoder, corpus, k=k)
    src, tgt = encoder.encode(corpus.src), encoder.encode(corpus.tgt)  # the oracle encodes on its own
    m = view.metrics
    assert m["acc_to_en"] == pytest.approx(retrieval_accuracy(src, tgt))
    assert m["acc_from_en"] == pytest.approx(retrieval_accuracy(tgt, src))
    assert m["acc_to_en_margin"] == pytest.approx(retrieval_accuracy(src, tgt, margin=True, k=k))
    assert m["acc_from_en_margin"] == pytest.approx(retrieval_accuracy(tgt, src, margin=True, k=k))
    assert m["xsim_error"] == pytest.approx(xsim_error(src, tgt, k=k))
    assert m["acc_to_en"] < 100  # random vectors: the numbers compared are not all trivially 100
    n = len(corpus)
    for direction, key in (("to_en", "acc_to_en"), ("from_en", "acc_from_en")):
        assert len(view.errors()[direction]) == round(n * (100 - m[key]) / 100)


def test_score_is_memoised_by_content_and_model():
    memo = BytesMemo("test.bitext_views", 8 * MB)
    corpus = ParallelCorpus(["a", "b", "c"], ["x", "y", "z"], "en", "de", "one")
    same = ParallelCorpus(["a", "b", "c"], ["x", "y", "z"], "en", "de", "another name")
    other = ParallelCorpus(["a", "b", "c"], ["x", "y", "w"], "en", "de", "one")
    encoder = FakeEncoder()
    first = score_bitext(encoder, corpus, memo=memo)
    assert score_bitext(encoder, same, memo=memo) is first and encoder.calls == 1
    assert score_bitext(encoder, other, memo=memo) is not first
    assert score_bitext(FakeEncoder(identity="fake:v2"), corpus, memo=memo) is not first
    assert bitext_digest(corpus) == bitext_digest(same) != bitext_digest(other)


def test_repeated_pairs_single_rows_and_identical_columns():
    repeated = ParallelCorpus(["a", "b", "a", "c"], ["x", "y", "x", "z"], "en", "de", "rep")
    kept, note = prepare_bitext(repeated)
    assert kept.src == ["a", "b", "c"] and kept.tgt == ["x", "y", "z"] and note.startswith("1 repeated pair")
    with pytest.raises(DataError, match="at least 2 different pairs.*has 1 once repeated"):
        prepare_bitext(ParallelCorpus(["a", "a"], ["x", "x"], "en", "de", "twice"))
    with pytest.raises(DataError, match="to choose among; this bitext has 1$"):
        prepare_bitext(ParallelCorpus(["a"], ["x"], "en", "de", "one"))
    same = ParallelCorpus(["a", "b", "c"], ["a", "b", "c"], "en", "de", "same")
    assert any("every row" in n for n in bitext_notes(same))
    view = score_bitext(FakeEncoder(), same)
    assert view.metrics["acc_mean"] == 100.0 and view.metrics["xsim_error"] == 0.0
    ambiguous = ParallelCorpus(["yes", "yes", "no"], ["ja", "jawohl", "nein"], "en", "de", "amb")
    (note,) = bitext_notes(ambiguous)
    assert "1 sentence(s) of the en column recur in 2 rows" in note
    metrics = score_bitext(FakeEncoder(), ambiguous).metrics
    assert all(0 <= v <= 100 for v in metrics.values())


# -- reading the user's input ---------------------------------------------------------------------------------------
def test_pasted_two_columns_without_header():
    corpus, message = read_bitext(None, "It is raining.\tEs regnet.\nThe cat sleeps.\tDie Katze schläft.\n")
    assert (corpus.src_lang, corpus.tgt_lang) == ("src", "tgt") and corpus.tgt[1] == "Die Katze schläft."
    assert "Read 2 parallel rows" in message


def test_three_language_columns_use_two_and_say_which(tmp_path):
    path = tmp_path / "three.tsv"
    path.write_text("en\tde\tfr\nYes.\tJa.\tOui.\nNo.\tNein.\tNon.\nThanks.\tDanke.\tMerci.\n", encoding="utf-8")
    corpus, message = read_bitext(str(path), None)
    assert (corpus.src_lang, corpus.tgt_lang) == ("en", "de") and "using the first two, en and de" in message
    corpus, message = read_bitext(str(path), None, "FR, en")
    assert (corpus.src_lang, corpus.tgt_lang) == ("fr", "en") and corpus.src == ["Oui.", "Non.", "Merci."]
    assert "Using columns fr and en of 3" in message
    corpus, _ = read_bitext(str(path), None, "2 3")
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "fr")
    for choice, problem in (
        ("en", "expected two column names"),
        ("en it", "no column 'it'"),
        ("de de", "the same column twice"),
        ("1 4", "no column '4'"),
    ):
        corpus, message = read_bitext(str(path), None, choice)
        assert corpus is None and problem in message and "1 = en, 2 = de, 3 = fr" in message


def test_bad_input_gives_the_readers_message():
    assert read_bitext(None, "") == (None, "Upload a file or paste rows first.")
    corpus, message = read_bitext(None, "one sentence\nanother one\n")
    assert corpus is None and "1 column(s) and no header" in message
    corpus, message = read_bitext(None, "en\tde\nYes.\tJa.\nNo.\t\n")
    assert corpus is None and "at least 2 different pairs" in message and "1 row(s) skipped" in message
    assert "pasted text:3: column 'de': empty sentence" in message
    table = read_table(text="en\tde\nYes.\tJa.\nYes.\tJa.\n", kind="parallel")
    with pytest.raises(DataError, match="2 rows read"):
        to_bitext(table)


# -- the tab's handlers on the example file, with tiny models ---------------------------------------------------------
def test_bitext_retrieval_on_the_example_file(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    text, df, corpus = bitext_retrieval(state, str(EXAMPLE), None, model)
    assert isinstance(corpus, ParallelCorpus) and len(corpus) == 40 and list(df.columns) == ERROR_COLUMNS
    assert "Read 40 parallel rows" in text and "bitext.tsv" in text
    view = source_view(state, corpus, model)
    m = view.metrics
    assert "en→de: en queries de" in text and "de→en: de queries en" in text
    assert f"{m['acc_to_en']:.1f}" in text and f"{m['acc_from_en']:.1f}" in text
    assert f"xSIM error (en as source, ratio margin): {m['xsim_error']:.1f}%" in text
    assert not df.empty and set(df.direction) <= {"en→de", "de→en"}
    for direction, key in (("en→de", "acc_to_en"), ("de→en", "acc_from_en")):
        assert len(df[df.direction == direction]) == round(40 * (100 - m[key]) / 100)
    rows = {tuple(r) for r in example_rows()}
    for _, e in df.iterrows():  # every error row points at real sentences of the file, at its own row
        en, de = (e.query, e.gold) if e.direction == "en→de" else (e.gold, e.query)
        assert (en, de) in rows and example_rows()[e["row"]] == [en, de]
        assert e.retrieved != e.gold and e.retrieved in {r[0] if e.direction == "de→en" else r[1] for r in rows}
    _, df_m, _ = bitext_retrieval(state, str(EXAMPLE), None, model, "margin")
    assert len(df_m[df_m.direction == "en→de"]) == round(40 * (100 - m["acc_to_en_margin"]) / 100)
    assert source_view(state, corpus, model) is view  # memoised per (model, content)


def test_bitext_details_of_an_error_row(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    _, df, corpus = bitext_retrieval(state, str(EXAMPLE), None, model)
    row = df.iloc[0].tolist()  # what gr.SelectData.row_value carries
    cell = dict(zip(ERROR_COLUMNS, row))
    text, nn = details(state, corpus, model, row, k=5)  # the page's row selection, on the bitext it holds
    assert list(nn["rank"]) == [1, 2, 3, 4, 5] and nn.sentence.iloc[0] == cell["retrieved"]
    assert nn.cosine.iloc[0] == cell["cosine retrieved"] and (np.diff(nn.cosine.astype(float).to_numpy()) <= 1e-6).all()
    assert f"**Query** ({cell['direction']}, #{cell['row']})" in text and "Gold translation" in text
    assert f"(rank {int(cell['rank of gold'])}), ratio margin" in text
    assert "not an errors-table row" in details(state, corpus, model, ["sideways", 1])[0]


def test_bitext_compare_two_models(tiny_bert, tiny_labse):
    state, a, b = AppState(), str(tiny_bert), str(tiny_labse)
    _, _, corpus = bitext_retrieval(state, None, EXAMPLE.read_text(encoding="utf-8"), a)
    text, df = bitext_compare(state, corpus, a, b)
    assert list(df.columns) == COMPARE_COLUMNS and text.startswith("Your bitext **pasted text**")
    err_a = sum(len(v) for v in source_view(state, corpus, a).errors().values())
    err_b = sum(len(v) for v in source_view(state, corpus, b).errors().values())
    fixed, broken = int((df.change == "fixed by B").sum()), int((df.change == "broken by B").sum())
    assert fixed - broken == err_a - err_b and f"Fixed by B: **{fixed}**" in text
    assert set(df.direction) <= {"en→de", "de→en"}
    same_text, same = bitext_compare(state, corpus, a, a)
    assert same.empty and "broken by B: **0**" in same_text
    assert bitext_compare(state, None, a, b)[0] == NO_BITEXT


def test_bitext_handlers_turn_bad_input_into_messages(tiny_bert):
    state, model = AppState(), str(tiny_bert)
    text, df, corpus = bitext_retrieval(state, None, "just one column\n", model)
    assert corpus is None and df.empty and "no header" in text
    text, df, corpus = bitext_retrieval(state, None, "Hello.\tHallo.\n", model)
    assert corpus is None and df.empty and "at least 2 different pairs" in text
    text, df, corpus = bitext_retrieval(state, None, "a\tb\nc\td\n", "no-such-model")
    assert corpus is not None and df.empty and "unknown model" in text
    text, df, corpus = bitext_retrieval(state, None, "Yes.\tYes.\nNo.\tNo.\nMaybe.\tMaybe.\n", model)
    assert "100.0" in text and "every row" in text and df.empty


def test_tab_builds_with_the_bitext_events(tiny_bert):
    import gradio as gr

    from mlse.ui import tatoeba_tab

    with gr.Blocks() as demo:
        tatoeba_tab.build_tab(AppState())
    config = str(demo.config)
    assert all(name in config for name in ("tatoeba_errors", "tatoeba_bitext_errors", "tatoeba_bitext_compare"))
    fns = {f.fn.__name__: f for f in demo.fns.values()}
    assert fns["on_run_bitext"].api_name == "tatoeba_bitext_errors"
    labels = {getattr(b, "value", None) for b in demo.blocks.values() if isinstance(b, gr.Button)}
    assert {"Show errors", "Show errors on my bitext", "Paste the example"} <= labels
