"""The public API behind ``import mlse``: score_pairs on tuples, a DataFrame and a path gives the input's columns then
each model's; its cosine is the Score tab's for the same pair; load_model calibrates; import mlse stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlse
from mlse.errors import DataError, MlseError
from mlse.serving.app_state import AppState
from mlse.serving.pair_scoring import score_one
from mlse.stop_signal import StopSignal
from tests.fake_encoder import FakeEncoder, fake_vector
from tests.paths import REPO_ROOT as ROOT

PAIRS = [
    ("A man is playing a flute.", "Ein Mann spielt Flöte.", 4.2),
    ("The cat sleeps.", "It is raining.", 0.4),
    ("Two dogs run.", "Dogs are running.", 3.5),
]


class OneModelState(AppState):
    """The app's state whose every model name gives ``model`` (the Score tab's path: micro-batcher, similarity)."""

    def __init__(self, model):
        super().__init__()
        self._model = model

    def encoder(self, name: str):
        return self._model


@pytest.fixture()
def fake() -> FakeEncoder:
    return FakeEncoder(identity="fake:api", name="fake")


def _tab_cosines(model, pairs) -> list[float]:
    state = OneModelState(model)
    return [score_one(state, "any", s1, s2)[0] for s1, s2, *_ in pairs]


def test_tuples_give_named_columns_then_the_models_cosine_equal_to_the_score_tabs(fake):
    frame = mlse.score_pairs(PAIRS, [fake])
    assert list(frame.columns) == ["sentence1", "sentence2", "score", "fake cosine"]
    assert frame["sentence1"].tolist() == [p[0] for p in PAIRS] and frame["score"].tolist() == [4.2, 0.4, 3.5]
    assert frame["fake cosine"].tolist() == _tab_cosines(FakeEncoder(identity="fake:api"), PAIRS)
    assert frame.attrs["run"].done == 3 and not frame.attrs["run"].stopped
    unscored = mlse.score_pairs([p[:2] for p in PAIRS], [fake])
    assert list(unscored.columns) == ["sentence1", "sentence2", "fake cosine"]
    np.testing.assert_array_equal(unscored["fake cosine"], frame["fake cosine"])


def test_a_dataframe_keeps_its_columns_dtypes_and_index(fake):
    df = pd.DataFrame(
        {
            "id": [7, 8, 9],
            "Text_A": [p[0] for p in PAIRS],
            "TEXT_B": [p[1] for p in PAIRS],
            "Score": [p[2] for p in PAIRS],
        },
        index=["x", "y", "z"],
    )
    frame = mlse.score_pairs(df, [fake])
    assert list(frame.columns) == ["id", "Text_A", "TEXT_B", "Score", "fake cosine"]
    assert frame["id"].dtype == df["id"].dtype and list(frame.index) == ["x", "y", "z"]
    assert frame["fake cosine"].tolist() == _tab_cosines(fake, PAIRS)
    assert list(df.columns) == ["id", "Text_A", "TEXT_B", "Score"]  # the caller's frame is left as it was
    positional = mlse.score_pairs(pd.DataFrame([p[:2] for p in PAIRS]), [fake])
    assert list(positional.columns) == [0, 1, "fake cosine"]
    assert positional["fake cosine"].tolist() == frame["fake cosine"].tolist()
    own_names = mlse.score_pairs(pd.DataFrame([p[:2] for p in PAIRS], columns=["premise", "claim"]), [fake])
    assert own_names["fake cosine"].tolist() == frame["fake cosine"].tolist()  # columns of other names by position


def test_a_path_gives_the_files_columns_then_the_models(fake, tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text(
        "sentence1\tsentence2\tscore\tnote\n" + "".join(f"{a}\t{b}\t{s}\tn{i}\n" for i, (a, b, s) in enumerate(PAIRS)),
        encoding="utf-8",
    )
    frame = mlse.score_pairs(path, [fake])
    assert list(frame.columns) == ["sentence1", "sentence2", "score", "note", "fake cosine"]
    assert frame["note"].tolist() == ["n0", "n1", "n2"]
    assert frame["fake cosine"].tolist() == _tab_cosines(fake, PAIRS)
    assert mlse.score_pairs(str(path), [fake])["fake cosine"].tolist() == frame["fake cosine"].tolist()
    table = mlse.read_pairs(path)
    assert mlse.score_pairs(table, [fake])["fake cosine"].tolist() == frame["fake cosine"].tolist()


def test_sentences_are_scored_exactly_as_given(fake):
    """A tab or a line break inside a sentence is part of it: nothing is joined into a file and split again."""
    frame = mlse.score_pairs([("one\ttwo", "three\nfour"), (" padded ", "x\u2028y")], [fake])
    assert frame["sentence1"].tolist() == ["one\ttwo", " padded "]
    assert set(fake.seen) == {"one\ttwo", "three\nfour", " padded ", "x\u2028y"}
    assert frame["fake cosine"].tolist() == _tab_cosines(fake, [("one\ttwo", "three\nfour"), (" padded ", "x\u2028y")])


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([("a", "b"), ("c", " ")], "pairs:2: column 'sentence2': empty sentence"),
        ([("a", "b", 1), ("c", "d", "high")], "pairs:2: column 'score': expected a number, got 'high'"),
        (
            [("a", "b", 1), ("c", "d")],
            "pairs:2: column 'score': missing (the row has 2 field(s), expected 3: sentence1, sentence2, score)",
        ),
        (
            [("a", "b"), "cd"],
            "score_pairs: pair 2: expected (sentence1, sentence2) or (sentence1, sentence2, score), got a str",
        ),
        (
            [("a",)],
            "score_pairs: pair 1: expected (sentence1, sentence2) or (sentence1, sentence2, score), got 1 value(s)",
        ),
        ([], "pairs: no rows found (expected rows of sentence1, sentence2 and an optional score)"),
        (
            pd.DataFrame({"sentence1": ["a", None], "sentence2": ["b", "c"]}),
            "DataFrame:2: column 'sentence1': empty sentence",
        ),
        (
            pd.DataFrame({"sentence1": ["a"], "sentence2": ["b"], "score": [float("nan")]}),
            "DataFrame:1: column 'score': expected a number, got ''",
        ),
        (
            pd.DataFrame([list("abcd")], columns=list("ABCD")),
            "DataFrame: the header has 'A', 'B', 'C', 'D'; expected "
            "columns named sentence1 and sentence2 (optional: score, "
            "lang1, lang2)",
        ),
    ],
)
def test_bad_pairs_are_refused_with_one_message(fake, pairs, message):
    with pytest.raises(MlseError) as info:
        mlse.score_pairs(pairs, [fake])
    assert str(info.value) == message
    assert fake.calls == 0  # refused before any encoding


def test_other_refusals(fake, tmp_path):
    with pytest.raises(MlseError, match=r"^score_pairs: name at least one model$"):
        mlse.score_pairs(PAIRS, [])
    sentences = mlse.read_table(text="sentence\nHello\n", kind="sentences")
    with pytest.raises(MlseError, match=r"^pasted text: a sentences table, expected sentence pairs$"):
        mlse.score_pairs(sentences, [fake])
    with pytest.raises(DataError, match=r"^gone\.tsv: file not found$"):
        mlse.score_pairs(tmp_path / "gone.tsv", [fake])


def test_a_stop_signal_ends_the_run_between_chunks_keeping_the_rows_scored(fake):
    """score_pairs asks the job's one stop model (mlse.stop_signal.StopSignal): Stop pressed during the first chunk
    keeps that chunk's rows and leaves the rest NaN; a spent budget stops before any row; no signal scores all."""
    pairs = PAIRS * 3  # 9 pairs, chunks of 2
    stop = StopSignal()
    seen = []

    def progress(done, total, _rate):
        seen.append(done)
        stop.set()  # Stop pressed while the first chunk was scored

    frame = mlse.score_pairs(pairs, [fake], chunk=2, progress=progress, stop=stop)
    run = frame.attrs["run"]
    assert seen == [2] and run.stopped and (run.done, run.total) == (2, 9)
    whole = mlse.score_pairs(pairs, [fake], chunk=2, stop=None)
    assert not whole.attrs["run"].stopped and whole.attrs["run"].done == 9
    np.testing.assert_array_equal(frame["fake cosine"][:2], whole["fake cosine"][:2])
    assert frame["fake cosine"][2:].isna().all() and len(frame) == 9
    spent = mlse.score_pairs(pairs, [fake], chunk=2, stop=StopSignal(budget_s=0))
    assert spent.attrs["run"].stopped and spent.attrs["run"].done == 0 and spent["fake cosine"].isna().all()


def test_minilm_en_loads_calibrated_and_scores_as_the_score_tab():
    model = mlse.load_model("minilm-en")
    assert model.calibrate(np.array([0.5])) is not None  # minilm-en ships a cosine -> 0-5 calibration
    frame = mlse.score_pairs(PAIRS, "minilm-en")
    assert list(frame.columns) == ["sentence1", "sentence2", "score", "minilm-en cosine", "minilm-en 0-5"]
    state = OneModelState(model)
    tab = [score_one(state, "minilm-en", s1, s2) for s1, s2, _ in PAIRS]
    np.testing.assert_allclose(frame["minilm-en cosine"], [cos for cos, _ in tab], atol=1e-5)
    np.testing.assert_allclose(frame["minilm-en 0-5"], [cal for _, cal in tab], atol=1e-4)
    assert frame["minilm-en cosine"].iloc[0] > frame["minilm-en cosine"].iloc[1]  # flute pair above the unrelated one
    assert ((frame["minilm-en 0-5"] >= 0) & (frame["minilm-en 0-5"] <= 5)).all()
    plain = mlse.load_model("minilm-en", calibrated=False)
    assert plain.calibrate(np.array([0.5])) is None and plain.similarity(["a"], ["b"])[1] is None


def test_import_mlse_is_cheap_and_exports_the_api_lazily():
    code = (
        "import sys, json, mlse; heavy = ('torch', 'gradio', 'sentence_transformers', 'transformers'); "
        "before = [m for m in heavy if m in sys.modules]; "
        "fns = [callable(mlse.read_pairs), callable(mlse.score_pairs), callable(mlse.load_model), "
        "callable(mlse.read_table), callable(mlse.read_rows), mlse.UserTable.__name__ == 'UserTable']; "
        "after = [m for m in heavy if m in sys.modules]; "
        "api = {'load_model', 'score_pairs', 'read_pairs'}; "
        "print(json.dumps([before, fns, after, sorted(set(dir(mlse)) & api)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    before, fns, after, listed = json.loads(out.stdout)
    assert before == [] and all(fns) and after == [], out.stdout
    assert listed == ["load_model", "read_pairs", "score_pairs"]
    with pytest.raises(AttributeError, match="module 'mlse' has no attribute 'nope'"):
        mlse.nope  # noqa: B018


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(pairs=st.lists(st.tuples(st.text(max_size=15), st.text(max_size=15)), max_size=6))
def test_any_tuples_give_a_frame_row_for_row_or_one_message(pairs):
    fake = FakeEncoder(identity="fake:api", name="fake")
    try:
        frame = mlse.score_pairs(pairs, [fake])
    except MlseError as exc:
        assert str(exc).startswith("pairs") and (not pairs or any(not a.strip() or not b.strip() for a, b in pairs))
        return
    assert frame[["sentence1", "sentence2"]].to_records(index=False).tolist() == pairs
    expected = [
        float(np.clip(fake_vector(a, identity="fake:api") @ fake_vector(b, identity="fake:api"), -1, 1))
        for a, b in pairs
    ]
    np.testing.assert_allclose(frame["fake cosine"], expected, atol=1e-6)
