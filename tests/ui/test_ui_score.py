"""Tab 1 "Score a pair": handlers called directly, on the tiny BERT, scorers with heads fitted on random data, and a
fake fine-tuned student, all in a private runs directory."""

from __future__ import annotations

import json
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mlse.encoders import catalogue
from mlse.encoders.catalogue import BACKBONE, STAGE1, STAGE12, STUDENT, list_runs, resolve_model
from mlse.encoders.load import load_encoder
from mlse.heads.scorer import Scorer
from mlse.heads.stage1 import Stage1Head
from mlse.heads.stage2 import Stage2Head
from mlse.models import load_model
from mlse.serving.app_state import AppState
from mlse.serving.pair_scoring import ApiBusy, DirectApi, score_api
from mlse.text.language_id import detect_language
from mlse.text.sentences import MAX_CHARS, clean_text
from mlse.ui.score_tab import COLUMNS, load_examples, model_choices, score_pair
from mlse.ui.sentence_input import detect_api, detect_handler

EN, DE = "A man is playing a flute.", "Ein Mann spielt eine Bambusflöte."


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert):
    """runs/grid/{s1, s1+s2} (scorers, nested one level as experiments write them) and runs/student (a run)."""
    root = tmp_path_factory.mktemp("score-tab")
    runs = root / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLSE_CACHE", str(root / "cache"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("MLSE_DEVICE", "cpu")
        backbone = load_encoder(str(tiny_bert))
        rng = np.random.default_rng(0)
        X_a, X_b = rng.normal(size=(2, 40, 32)).astype(np.float32)  # [40, 32] each
        stage1 = Stage1Head(max_epochs=2).fit(X_a, X_b, ["en"] * 40, ["de"] * 40)
        M1, M2 = stage1.transform(X_a), stage1.transform(X_b)  # [40, 32]
        gold = rng.uniform(0, 5, size=40).astype(np.float32)
        stage2 = Stage2Head(max_epochs=1).fit(M1[:30], M2[:30], gold[:30], dev=(M1[30:], M2[30:], gold[30:]))
        Scorer(backbone, stage1=stage1).save(runs / "grid" / "s1")
        Scorer(backbone, stage1=stage1, stage2=stage2).save(runs / "grid" / "s1+s2")
    shutil.copytree(tiny_bert, runs / "student" / "model")
    (runs / "student" / "finetune_config.json").write_text("{}")
    (runs / "student" / "metrics.json").write_text("{}")  # a finished run (without it: interrupted, never ticked)
    return SimpleNamespace(root=runs, backbone=str(tiny_bert))


@pytest.fixture()
def state(runs, monkeypatch):
    monkeypatch.setenv("MLSE_RUNS", str(runs.root))
    return AppState()


S1, S12, STU = "runs/grid/s1", "runs/grid/s1+s2", "runs/student"


def test_import_mlse_does_not_load_gradio():
    import subprocess

    code = (
        "import sys, mlse, mlse.encoders, mlse.data, mlse.text.language_id, mlse.serving.app_state, mlse.ui.score_tab; "
        "print('gradio' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


# -- model discovery ------------------------------------------------------------------------------------------------
def test_nested_runs_are_listed_and_resolve(runs, monkeypatch):
    monkeypatch.setenv("MLSE_RUNS", str(runs.root))
    assert {s.name: s.source for s in list_runs()} == {S1: "scorer", S12: "scorer", STU: "run"}
    assert resolve_model(S12).location == str(runs.root / "grid" / "s1+s2")
    assert resolve_model("grid/s1").name == S1  # without the runs/ prefix too
    assert isinstance(load_model(S12), Scorer)


def test_state_lists_models_with_their_kind(state, runs):
    kinds = {m.name: m.kind for m in state.models()}
    assert kinds[S1] == STAGE1 and kinds[S12] == STAGE12 and kinds[STU] == STUDENT
    assert kinds.get("minilm-en") == BACKBONE
    order = [m.kind for m in state.models()]
    assert order == sorted(order, key=catalogue.KIND_ORDER.index)  # backbones, +S1, +S1+2, students
    assert state.model_kind(runs.backbone) == BACKBONE  # a folder path that is not listed
    assert next(m for m in state.models() if m.name == S12).backbone == runs.backbone


def _listing(state, monkeypatch, models):
    """Make ``state`` list exactly ``models`` (ModelInfo), all loading offline."""
    monkeypatch.setattr(state, "models", lambda: list(models))


def test_default_selection_ticks_heads_that_reuse_a_ticked_backbone(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    state = AppState(default_models=("bb-a", "bb-b"))
    info = catalogue.ModelInfo
    _listing(
        state,
        monkeypatch,
        [
            info("bb-a", BACKBONE, "package", "a"),
            info("bb-b", BACKBONE, "package", "b"),
            info("runs/a+s1+s2", STAGE12, "scorer", "r1", backbone="bb-a"),
            info("shipped/a+s1+s2", STAGE12, "scorer", "s1", backbone="bb-a"),
            info("shipped/b+s1+s2", STAGE12, "scorer", "s2", backbone="bb-b"),
            info("shipped/c+s1+s2", STAGE12, "scorer", "s3", backbone="bb-c"),  # its backbone is not ticked
            info("shipped/a+s1", STAGE1, "scorer", "s4", backbone="bb-a"),
            info("shipped/student", STUDENT, "package", "s5"),
            info("runs/student", STUDENT, "run", "r2"),
        ],
    )
    chosen, note = state.default_selection(limit=4)
    # the backbones, then one of each kind in turn: shipped first, on the first ticked backbone first
    assert chosen == ["bb-a", "bb-b", "shipped/a+s1+s2", "shipped/a+s1"] and "tick more" in note
    everything, _ = state.default_selection(limit=50)
    assert everything[4:] == ["shipped/b+s1+s2", "runs/a+s1+s2"]  # students and other backbones' heads: offered only


def test_without_a_default_backbone_trained_models_of_every_kind_are_ticked(runs, monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(runs.root))
    monkeypatch.setenv("MLSE_ASSETS", str(tmp_path / "no-assets"))  # the runs' kinds only, not the shipped heads'
    state = AppState(default_models=("no-such-model",))
    chosen, _ = state.default_selection(limit=3)
    assert [state.model_kind(n) for n in chosen] == [STAGE12, STAGE1, STUDENT]  # the page never opens empty


def test_a_visitor_sees_the_backbones_and_the_heads_on_one_of_them(tmp_path, monkeypatch):
    """The repository's artifacts: the backbones and a Stage-1+2 scorer on a ticked backbone; not all 8."""
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))  # no runs: what a visitor of a fresh deployment meets
    state = AppState()
    chosen, note = state.default_selection()
    loaded = state.loaded_defaults()
    assert chosen[: len(loaded)] == loaded and len(chosen) <= catalogue.MAX_DEFAULT_MODELS
    trained = [next(m for m in state.models() if m.name == n) for n in chosen[len(loaded) :]]
    if "me5-small" in loaded and "shipped/me5-small+s1+s2" in state.model_names():
        assert [m.name for m in trained] == ["shipped/me5-small+s1+s2"]  # heads reusing me5-small's forward
    assert STUDENT not in {m.kind for m in trained}  # a student costs a forward of its own: one tick away
    if len(state.model_names()) > len(chosen):
        assert "tick more" in note


def test_defaults_come_first_and_the_app_opens_on_the_first_that_loads(state):
    assert state.default_models == ("me5-small", "muse", "minilm-en")
    loaded = state.loaded_defaults()
    assert "minilm-en" in loaded and state.preferred_model() == loaded[0]
    backbones = [m.name for m in state.models() if m.kind == BACKBONE]
    assert backbones[: len(loaded)] == loaded  # in the defaults' order, before any other backbone
    assert state.default_selection()[0][: len(loaded)] == loaded
    label = next(m.label for m in state.models() if m.name == "minilm-en")
    assert "English-only reference" in label


def test_preferred_model_falls_back_to_the_first_listed(runs, monkeypatch):
    monkeypatch.setenv("MLSE_RUNS", str(runs.root))
    state = AppState(default_models=("no-such-model",))
    assert state.loaded_defaults() == [] and state.preferred_model() == state.model_names()[0]


def test_refresh_finds_new_runs_without_restart(state, runs, tiny_bert):
    before = state.model_names()
    new = runs.root / "late-student"
    shutil.copytree(tiny_bert, new / "model")
    try:
        assert "runs/late-student" not in state.model_names()  # cached list ...
        assert "runs/late-student" in [m.name for m in state.refresh()]  # ... rescanned on demand
        assert "runs/late-student" in state.model_names()
        assert len(state.model_names()) == len(before) + 1
    finally:
        shutil.rmtree(new)


def test_unloadable_scorer_is_skipped_with_a_reason(state, runs):
    broken = runs.root / "grid" / "broken"
    shutil.copytree(runs.root / "grid" / "s1", broken)
    manifest = json.loads((broken / "scorer.json").read_text())
    (broken / "scorer.json").write_text(json.dumps({**manifest, "backbone": "/no/such/backbone"}))
    try:
        state.refresh()
        assert "runs/grid/broken" not in state.model_names()
        assert any(name == "runs/grid/broken" and "not available offline" in why for name, why in state.skipped)
        choices, _, note = model_choices(state)
        assert "runs/grid/broken" in note and all(value != "runs/grid/broken" for _, value in choices)
    finally:
        shutil.rmtree(broken)


def test_encoders_are_loaded_once_and_scorers_share_the_backbone(state, runs):
    scorer = state.encoder(S12)
    assert state.encoder(S12) is scorer
    assert state.encoder(S1).backbone is scorer.backbone is state.encoder(runs.backbone)


# -- scoring ----------------------------------------------------------------------------------------------------------
def test_score_pair_one_row_per_model(state, runs):
    table, status = score_pair(state, EN, DE, [runs.backbone, S1, S12, STU])
    assert isinstance(table, pd.DataFrame) and list(table.columns) == COLUMNS
    assert list(table["model"]) == [runs.backbone, S1, S12, STU]
    assert list(table["kind"]) == [BACKBONE, STAGE1, STAGE12, STUDENT]
    assert all(-1.0 <= float(c) <= 1.0 for c in table["cosine"])
    assert all(len(c.split(".")[1]) == 3 for c in table["cosine"])  # text with 3 decimals: "0.870", never wrapped
    calibrated = dict(zip(table["model"], table["calibrated 0-5"], strict=True))
    assert 0.0 <= float(calibrated[S12]) <= 5.0 and len(calibrated[S12].split(".")[1]) == 2  # only S12 is calibrated
    assert calibrated[runs.backbone] == calibrated[S1] == calibrated[STU] == ""
    # the student is a copy of the backbone; the heads change the similarity
    cos = dict(zip(table["model"], table["cosine"], strict=True))
    assert cos[STU] == cos[runs.backbone] and cos[S1] != cos[runs.backbone]
    assert "English (`en`, detected" in status and "German (`de`, detected" in status
    assert "Not scored" not in status


def test_calibrated_score_matches_the_scorer(state):
    table, _ = score_pair(state, EN, DE, [S12])
    scorer = state.encoder(S12)
    emb = scorer.encode([EN, DE])
    expected = float(scorer.calibrate(np.array([emb[0] @ emb[1]]))[0])
    assert float(table["calibrated 0-5"][0]) == pytest.approx(expected, abs=0.005 + 1e-9)  # 2 decimals


@pytest.mark.parametrize(("s1", "s2"), [("", DE), ("   ", DE), (EN, None), ("\x00\x07", DE)])
def test_empty_sentences_give_a_message(state, runs, s1, s2):
    table, status = score_pair(state, s1, s2, [runs.backbone])
    assert table.empty and list(table.columns) == COLUMNS and status.startswith("Enter two non-empty sentences.")


@pytest.mark.parametrize("models", [[], None, ["  "]])
def test_no_model_gives_a_message(state, models):
    table, status = score_pair(state, EN, DE, models)
    assert table.empty and status == "Choose at least one model."


def test_unknown_and_broken_models_are_reported_not_raised(state, runs, tmp_path):
    bad = tmp_path / "bad-scorer"
    bad.mkdir()
    (bad / "scorer.json").write_text("{not json")
    table, status = score_pair(state, EN, DE, ["no-such-model", str(bad), runs.backbone, "<b>x</b>"])
    assert list(table["model"]) == [runs.backbone]
    assert "Not scored" in status and "unknown model" in status and "not a readable scorer" in status
    assert "<b>" not in status and "&lt;b&gt;" in status and "Traceback" not in status


def test_long_input_is_truncated_with_a_notice(state, runs):
    table, status = score_pair(state, "word " * 20_000, DE, [runs.backbone])  # 100,000 characters
    assert len(table) == 1 and "Sentence 1: truncated from" in status and f"{MAX_CHARS:,}" in status


def test_control_characters_and_html_are_neutralised(state, runs):
    text = "<script>alert(1)</script> **bold** \x00\x1b[31m A man\u202e plays."
    cleaned, notice = clean_text(text)
    assert "\x00" not in cleaned and "\x1b" not in cleaned and "\u202e" not in cleaned and "control" in notice
    table, status = score_pair(state, text, DE, [runs.backbone])
    assert len(table) == 1 and "removed 3 control character(s)" in status
    assert "<script>" not in status and "&lt;script&gt;" in status and "\\*\\*bold\\*\\*" in status


def test_clean_text_truncates():
    text, notice = clean_text("a\x00b\x07c" + "x" * (MAX_CHARS + 10))
    assert text.startswith("abc") and len(text) == MAX_CHARS and "truncated" in notice


def test_language_override_is_shown_and_unknown_override_ignored(state, runs):
    _, status = score_pair(state, EN, DE, [runs.backbone], lang1="auto", lang2="nl")
    assert "Dutch (`nl`, set by you; detector said de)" in status
    _, status = score_pair(state, EN, DE, [runs.backbone], lang1="<i>xx</i>", lang2="de")
    assert "English (`en`, detected" in status and "unknown language" in status and "<i>" not in status
    assert "German (`de`, set by you)" in status


def test_gold_is_shown_only_when_given(state, runs):
    status = score_pair(state, EN, DE, [runs.backbone], gold=3.8)[1]
    assert "Reference score for this example: **3.8**" in status and "own rating" in status
    for gold in (None, "", float("nan"), "abc"):
        assert "Reference score" not in score_pair(state, EN, DE, [runs.backbone], gold=gold)[1]


def test_progress_is_reported_per_model(state, runs):
    seen = []
    score_pair(state, EN, DE, [runs.backbone, S12], progress=lambda f, d: seen.append((f, d)))
    assert [f for f, _ in seen] == [0.0, 0.5] and S12 in seen[1][1]


def test_duplicate_models_are_scored_once(state, runs):
    table, _ = score_pair(state, EN, DE, [runs.backbone, runs.backbone, f" {runs.backbone} "])
    assert len(table) == 1


# -- language labels and examples -------------------------------------------------------------------------------------
def test_detect_handler_and_api():
    assert detect_handler("") == "" and detect_handler(None) == ""
    assert "**German** (`de`" in detect_handler(DE)
    assert detect_handler("1234") == "Detected language: undetermined"
    assert detect_api("Кошка спит на диване.")[0] == "ru"


def test_examples_cover_many_languages_and_keep_the_seed_pair():
    examples = load_examples()
    assert len(examples) >= 20
    languages = {e["lang1"] for e in examples} | {e["lang2"] for e in examples}
    assert {"en", "de", "fr", "es", "ru", "zh", "pl", "pt", "it", "nl"} <= languages
    seed = [e for e in examples if "flute" in e["sentence1"] and "bambou" in e["sentence2"]]
    assert seed and seed[0]["gold"] == 3.8
    assert all(e["gold"] is None or 0.0 <= e["gold"] <= 5.0 for e in examples)
    for e in examples:  # the declared languages are what the detector finds (the examples double as a check)
        assert detect_language(e["sentence1"])[0] == e["lang1"], e
        assert detect_language(e["sentence2"])[0] == e["lang2"], e


def test_missing_examples_file_gives_no_examples(tmp_path):
    assert load_examples(tmp_path / "nope.tsv") == []


def test_build_tab_wires_the_events(state):
    from tests.ci import require_module

    gr = require_module("gradio")
    from mlse.ui import score_tab

    with gr.Blocks() as demo:
        score_tab.build_tab(state)
    names = {d.api_name for d in demo.fns.values()}
    assert {"score_pair", "score_refresh_models", "detect_language", "score"} <= names
    direct = next(d for d in demo.fns.values() if d.api_name == "score")
    assert direct.queue is False  # one POST, one JSON answer: scripts skip the queue and the event stream
    # No example picked: the reference box is empty with a hint (a gr.Number without a placeholder would show 0)
    reference = next(
        b for b in demo.blocks.values() if getattr(b, "label", "") == "Reference score of the example (0–5)"
    )
    assert reference.value is None and reference.placeholder
    # The similarity table: one line a row; its calibrated column is spelled as the scored CSV spells it
    similarity = next(b for b in demo.blocks.values() if getattr(b, "label", "") == "Similarity")
    assert similarity.wrap is False and COLUMNS[-1] == "calibrated 0-5"


# -- the direct JSON API --------------------------------------------------------------------------------------------
def test_score_api_gives_the_tables_numbers_as_json(state, runs):
    answer = score_api(state, EN, DE, [STU, S12, "no-such-model"])
    table, _ = score_pair(state, EN, DE, [STU, S12])
    assert [r["model"] for r in answer["scores"]] == list(table["model"])
    # the API's 4 decimals; the table writes 3
    assert [float(c) for c in table["cosine"]] == pytest.approx([r["cosine"] for r in answer["scores"]], abs=6e-4)
    assert answer["scores"][0]["calibrated"] is None and 0.0 <= answer["scores"][1]["calibrated"] <= 5.0
    assert [r["kind"] for r in answer["scores"]] == [STUDENT, STAGE12]
    assert answer["not_scored"][0]["model"] == "no-such-model"
    assert "not a model offered here" in answer["not_scored"][0]["why"]
    assert [lang["code"] for lang in answer["languages"]] == ["en", "de"]
    json.dumps(answer)  # plain JSON: no numpy scalars


def test_score_api_scores_only_the_models_the_page_offers(state, runs):
    """A path on disk that loads (the tiny backbone's folder) is refused unless offered, as by the page's API."""
    answer = score_api(state, EN, DE, [runs.backbone, STU])
    assert [r["model"] for r in answer["scores"]] == [STU]
    assert [f["model"] for f in answer["not_scored"]] == [runs.backbone]
    assert "not a model offered here" in answer["not_scored"][0]["why"]


def test_score_api_without_models_uses_the_pages_default_selection(state):
    answer = score_api(state, EN, DE)
    assert [r["model"] for r in answer["scores"]] == state.default_selection()[0]


@pytest.mark.parametrize(("s1", "s2"), [("", DE), (None, DE), (EN, 12), ("\x00", DE)])
def test_score_api_bad_input_is_a_notice(state, runs, s1, s2):
    answer = score_api(state, s1, s2, [runs.backbone])
    assert answer["scores"] == [] and "enter two non-empty sentences" in answer["notices"]


def test_direct_api_refuses_past_its_limit_at_once(state, runs):
    direct = DirectApi(state, max_in_flight=1)
    assert direct.score(EN, DE, [STU])["scores"]
    direct._slots.acquire()  # one call in flight
    try:
        with pytest.raises(ApiBusy, match="busy: 1 requests"):
            direct.score(EN, DE, [STU])
    finally:
        direct._slots.release()
    assert direct.score(EN, DE, [STU])["scores"]  # the slot came back


def test_detector_is_warmed_up_in_the_background():
    from mlse.text import language_id
    from mlse.ui.sentence_input import warm_up_detector

    thread = warm_up_detector()
    thread.join(30)
    assert not thread.is_alive() and language_id._loaded  # loaded: the first request does not pay for it
