"""The Score tab's "Score a file" section: the handler called directly with fake encoders (exact, fast) and once with
the tiny BERT through a real AppState; the section built inside a Blocks."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.stop_signal import StopSignal
from mlse.ui import score_file as sf
from mlse.ui.score_file import StopSignals, score_file, scored_file_name
from tests.fake_encoder import FakeEncoder
from tests.paths import EXAMPLES

EXAMPLE = EXAMPLES / "pairs_to_score.tsv"
PASTED = "A cat sleeps.\tEine Katze schläft.\nThe sun is hot.\tIt rains today.\nI read a book.\tJe lis un livre.\n"
RATED = "sentence1\tsentence2\tscore\n" + "".join(
    f"pair {i} left side\tpair {i} right side {i % 3}\t{i % 5}\n" for i in range(12)
)


class CalibratedFake(FakeEncoder):
    """A fake with a cosine -> 0-5 map, as a backbone with its calibration attached."""

    def calibrate(self, cos):
        return (np.asarray(cos) + 1.0) * 2.5


class BrokenFake(FakeEncoder):
    def encode(self, texts, **kwargs):
        raise RuntimeError("weights are corrupt")


class FakeState:
    """What score_file asks of the app state: the offered names, an encoder per name, its kind."""

    def __init__(self, encoders: dict, unloadable: tuple[str, ...] = ()):
        self.encoders, self.unloadable = encoders, unloadable
        self.calibration_notes: dict[str, str] = {}

    def model_names(self) -> list[str]:
        return [*self.encoders, *self.unloadable]

    def encoder(self, name: str):
        if name in self.unloadable:
            raise MlseError(f"{name}: the run folder has no model.safetensors")
        return self.encoders[name]

    def model_kind(self, name: str) -> str:
        return "backbone"


@pytest.fixture()
def state():
    return FakeState({"fake-a": FakeEncoder("fake:a", name="fake-a"), "fake-b": CalibratedFake("fake:b", name="b")})


def read_csv(path: str) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def assert_matches_similarity(frame: pd.DataFrame, model, name: str, s1: list[str], s2: list[str]) -> None:
    cos, calibrated = similarity(model, s1, s2)
    assert np.allclose(frame[f"{name} cosine"].to_numpy(dtype=float), cos, atol=1e-6)
    if calibrated is not None:
        assert np.allclose(frame[f"{name} 0-5"].to_numpy(dtype=float), calibrated, atol=1e-5)
    else:
        assert f"{name} 0-5" not in frame.columns


def test_scores_pasted_rows_with_every_model(state):
    out = score_file(state, None, PASTED, ["fake-a", "fake-b"])
    assert list(out.summary["model"]) == ["fake-a", "fake-b"] and list(out.summary["rows scored"]) == [3, 3]
    assert out.summary.loc[0, "mean 0-5"] == "" and re.fullmatch(r"\d\.\d\d", out.summary.loc[1, "mean 0-5"])
    assert "Pearson ×100" not in out.summary.columns  # no score column, no correlation
    # The preview puts the scores first, as text with fixed decimals; the sentences follow (the CSV keeps the order).
    assert list(out.preview.columns) == ["fake-a cosine", "fake-b cosine", "fake-b 0-5", "column1", "column2"]
    # the cosine to 3 decimals and the 0-5 score to 2, as the Score tab's pair table writes them (the CSV keeps 6)
    assert out.preview["fake-a cosine"].str.fullmatch(r"-?\d\.\d{3}").all()
    assert out.preview["fake-b 0-5"].str.fullmatch(r"\d\.\d\d").all()
    assert Path(out.csv_path).name == "pasted-scored.csv"
    frame = read_csv(out.csv_path)
    s1, s2 = [r.split("\t")[0] for r in PASTED.splitlines()], [r.split("\t")[1] for r in PASTED.splitlines()]
    assert list(frame["column1"]) == s1 and list(frame["column2"]) == s2  # the input's columns first, as given
    for name in ("fake-a", "fake-b"):
        assert_matches_similarity(frame, state.encoders[name], name, s1, s2)
    mean = float(np.mean(similarity(state.encoders["fake-a"], s1, s2)[0]))
    assert out.summary.loc[0, "mean cosine"] == f"{mean:.4f}"  # fixed decimals: "0.2020", not "0.202"
    assert "Read 3 sentence pairs" in out.message and "Scored 3 row(s) with 2 model(s)" in out.message
    assert "No 0–5 score for `fake-a`:" in out.message and "`fake-b`" not in out.message


def test_scores_an_uploaded_file_and_keeps_its_columns(state, tmp_path):
    upload = tmp_path / "gradio-upload-cache" / "pairs_to_score.tsv"
    upload.parent.mkdir()
    shutil.copy(EXAMPLE, upload)
    out = score_file(state, str(upload), "ignored when a file is given", ["fake-b"])
    example = pd.read_csv(EXAMPLE, sep="\t")
    assert len(example) >= 25 and set(example["lang1"]) | set(example["lang2"]) >= {"en", "de", "fr", "es", "zh"}
    frame = read_csv(out.csv_path)
    assert Path(out.csv_path).name == "pairs_to_score-scored.csv"
    assert list(frame.columns) == ["sentence1", "sentence2", "lang1", "lang2", "fake-b cosine", "fake-b 0-5"]
    assert frame[["sentence1", "sentence2", "lang1", "lang2"]].equals(example)
    assert_matches_similarity(
        frame, state.encoders["fake-b"], "fake-b", list(example["sentence1"]), list(example["sentence2"])
    )
    assert list(out.summary["rows scored"]) == [len(example)]
    assert "pairs\\_to\\_score.tsv" in out.message or "pairs_to_score.tsv" in out.message
    assert str(tmp_path) not in out.message and "gradio-upload-cache" not in out.message


def test_a_score_column_gives_correlations(state):
    out = score_file(state, None, RATED, ["fake-a", "fake-b"])
    frame = read_csv(out.csv_path)
    gold = frame["score"].to_numpy(dtype=float)
    for i, name in enumerate(["fake-a", "fake-b"]):
        cos = frame[f"{name} cosine"].to_numpy(dtype=float)
        assert float(out.summary.loc[i, "Pearson ×100"]) == pytest.approx(100 * stats.pearsonr(cos, gold)[0], abs=0.01)
        assert float(out.summary.loc[i, "Spearman ×100"]) == pytest.approx(
            100 * stats.spearmanr(cos, gold)[0], abs=0.01
        )
    assert list(frame.columns[:3]) == ["sentence1", "sentence2", "score"]


def test_bad_rows_are_skipped_and_listed(state):
    pasted = "a b\tc d\t3\nonly one cell\nx\ty\tnope\ne\tf\t4\n"
    out = score_file(state, None, pasted, ["fake-a"])
    assert "2 row(s) skipped" in out.message and "pasted text:2" in out.message and "pasted text:3" in out.message
    assert list(out.summary["rows scored"]) == [2] and len(read_csv(out.csv_path)) == 2


def test_a_refused_file_gives_the_readers_message_and_no_csv(state, tmp_path):
    binary = tmp_path / "weights.tsv"
    binary.write_bytes(bytes(range(256)) * 4)
    out = score_file(state, str(binary), None, ["fake-a"])
    assert out.csv_path is None and out.summary.empty and out.preview.empty
    assert "weights.tsv" in out.message and str(tmp_path) not in out.message
    empty = score_file(state, None, "   ", ["fake-a"])
    assert empty.csv_path is None and "Upload a file or paste rows" in empty.message


def test_stop_after_the_first_chunk_keeps_those_rows(state, monkeypatch):
    monkeypatch.setattr(sf, "FILE_CHUNK", 2)
    stop, reports = StopSignal(), []

    def progress(step) -> None:
        if step.what == "scoring":
            reports.append((step.done, step.total))
            stop.set()  # Stop pressed while the first chunk was scored: asked before the next, it ends the run

    out = score_file(state, None, RATED, ["fake-a", "fake-b"], stop=stop, progress=progress)
    assert reports == [(2, 12)]
    assert "Stopped after 2 of 12 rows" in out.message and list(out.summary["rows scored"]) == [2, 2]
    frame = read_csv(out.csv_path)
    assert len(frame) == 12  # every row, blank where not scored
    for column in ("fake-a cosine", "fake-b cosine", "fake-b 0-5"):
        assert frame[column][:2].notna().all() and frame[column][2:].isna().all()
    assert_matches_similarity(
        frame[:2], state.encoders["fake-a"], "fake-a", list(frame["sentence1"][:2]), list(frame["sentence2"][:2])
    )
    assert out.preview["fake-a cosine"][2] == ""  # the preview shows blanks too
    expected = 100 * stats.pearsonr(frame["fake-a cosine"][:2], frame["score"][:2])[0]  # on the rows scored only
    assert float(out.summary.loc[0, "Pearson ×100"]) == pytest.approx(expected, abs=0.01)


def test_progress_reports_each_step_then_rows_and_speed(state, monkeypatch):
    monkeypatch.setattr(sf, "FILE_CHUNK", 5)
    reports = []
    score_file(
        state,
        None,
        RATED,
        ["fake-a", "fake-b"],
        progress=lambda p: reports.append((p.what, p.done, p.total, p.fraction(), p.line())),
    )
    # reading the file and loading the models are steps of their own (no bar, not "0.0 %"), then the rows
    assert reports[0] == ("reading the file", 0, 0, None, "reading the file")
    assert [r[4] for r in reports[1:3]] == [
        "loading the models (now fake-a): 0 / 2 models (0%)",
        "loading the models (now fake-b): 1 / 2 models (50%)",
    ]
    assert [(what, d, t) for what, d, t, _, _ in reports[3:]] == [
        ("scoring", 5, 12),
        ("scoring", 10, 12),
        ("scoring", 12, 12),
    ]
    assert re.fullmatch(r"scoring: 5 / 12 rows \(41%\), [\d,.]+ rows/s, ETA \d+s", reports[3][4]), reports[3]
    assert re.fullmatch(r"scoring: 12 / 12 rows \(100%\), [\d,.]+ rows/s", reports[-1][4]), reports[-1]


def test_a_failing_model_is_named_and_the_others_score():
    state = FakeState({"good": FakeEncoder("fake:good"), "broken": BrokenFake("fake:broken")}, unloadable=("gone",))
    out = score_file(state, None, PASTED, ["gone", "broken", "good"])
    assert list(out.summary["model"]) == ["good"] and list(out.summary["rows scored"]) == [3]
    assert "`gone`: gone: the run folder has no model.safetensors" in out.message
    assert "`broken`: could not be used (RuntimeError: weights are corrupt)" in out.message
    frame = read_csv(out.csv_path)
    assert [c for c in frame.columns if c.endswith("cosine")] == ["good cosine"]
    nothing = score_file(state, None, PASTED, ["gone"])
    assert nothing.csv_path is None and "Not scored" in nothing.message


def test_models_are_checked_deduplicated_and_capped(state, monkeypatch):
    out = score_file(state, None, PASTED, ["/etc/passwd", "fake-a", "fake-a"])
    assert list(out.summary["model"]) == ["fake-a"] and "not a model offered here" in out.message
    assert "Choose at least one model" in score_file(state, None, PASTED, []).message
    monkeypatch.setattr(sf, "MAX_MODELS", 1)
    capped = score_file(state, None, PASTED, ["fake-b", "fake-a"])
    assert list(capped.summary["model"]) == ["fake-b"] and "first 1 of the 2 models" in capped.message


def test_the_preview_is_capped_and_says_so(state, monkeypatch):
    monkeypatch.setattr(sf, "PREVIEW_ROWS", 5)
    out = score_file(state, None, RATED, ["fake-a"])
    assert len(out.preview) == 5 and len(read_csv(out.csv_path)) == 12
    assert "first 5 of 12 rows" in out.message


def test_no_message_names_the_temporary_folder(state, tmp_path):
    upload = tmp_path / "my pairs (v2).csv"
    upload.write_text("sentence1,sentence2\nhello there,hallo\n", encoding="utf-8")
    out = score_file(state, str(upload), None, ["fake-a"])
    folder = str(Path(out.csv_path).parent)
    assert Path(folder).name.startswith("mlse-scored-") and Path(out.csv_path).name == "my_pairs_v2-scored.csv"
    for text in (out.message, out.preview.to_csv(), out.summary.to_csv()):
        assert folder not in text and tempfile.gettempdir() not in text and str(tmp_path) not in text


def test_old_downloads_are_removed(state, monkeypatch):
    monkeypatch.setattr(sf, "KEPT_DOWNLOADS", 2)
    paths = [score_file(state, None, PASTED, ["fake-a"]).csv_path for _ in range(3)]
    assert not Path(paths[0]).exists() and Path(paths[1]).exists() and Path(paths[2]).exists()


def test_scored_file_names_are_safe():
    assert scored_file_name("pairs.tsv") == "pairs-scored.csv"
    assert scored_file_name("pasted text") == "pasted-scored.csv"
    assert scored_file_name("../../etc/x y.csv") == "x_y-scored.csv"
    assert scored_file_name("...") == "pairs-scored.csv"


def test_stop_signals_are_one_per_sessions_run():
    signals = StopSignals()
    assert not signals.stop("s1")  # nothing running: nothing to stop
    first = signals.begin("s1")
    other = signals.begin("s2")
    assert isinstance(first, StopSignal)  # the project's one stop model, as training and warm-up use
    assert signals.stop("s1") and first.should_stop() and not other.should_stop()
    signals.end("s1", first)
    assert len(signals) == 1 and not signals.begin("s1").should_stop()  # a new run starts with a clear signal
    assert not signals.stop(None) and not signals.begin(None).should_stop()


def test_scores_with_the_tiny_bert_through_the_app_state(tiny_bert, tmp_path, monkeypatch):
    from mlse.serving.app_state import AppState

    runs = tmp_path / "runs"
    shutil.copytree(tiny_bert, runs / "student" / "model")
    (runs / "student" / "finetune_config.json").write_text("{}")
    monkeypatch.setenv("MLSE_RUNS", str(runs))
    state = AppState()
    out = score_file(state, None, RATED, ["runs/student"])
    assert out.summary.loc[0, "kind"] == state.model_kind("runs/student") and out.summary.loc[0, "rows scored"] == 12
    frame = read_csv(out.csv_path)
    assert_matches_similarity(
        frame, state.encoder("runs/student"), "runs/student", list(frame["sentence1"]), list(frame["sentence2"])
    )
    assert isinstance(out.summary.loc[0, "Spearman ×100"], float | str)


def test_the_section_builds_with_its_events():
    from tests.ci import require_module

    gr = require_module("gradio")
    model = SimpleNamespace(name="fake-a", label="fake-a · backbone")
    state = FakeState({"fake-a": FakeEncoder()})
    state.models = lambda: [model]
    state.loaded_defaults = lambda: ["fake-a"]
    with gr.Blocks() as demo:
        pickers = sf.build_section(state)
    assert len(pickers) == 1 and pickers[0].multi and pickers[0].component.value == ["fake-a"]
    names = {dep.get("api_name") for dep in demo.config["dependencies"]}
    assert {"score_file", "stop_score_file"} <= names
    stop = next(dep for dep in demo.config["dependencies"] if dep.get("api_name") == "stop_score_file")
    assert stop["queue"] is False  # handled at once, not behind the scoring event


def test_stop_over_http_keeps_the_rows_scored(monkeypatch):
    """The page's own path: Score file runs in the queue, Stop (unqueued, same session) lands while it runs, and the
    answer holds the rows scored before it, with every row in the download."""
    from tests.ci import require_module

    gr = require_module("gradio")
    from gradio_client import Client

    from tests.app_server import HOST, free_port
    from tests.fake_encoder import SlowFakeEncoder

    monkeypatch.setattr(sf, "FILE_CHUNK", 4)
    state = FakeState({"slow": SlowFakeEncoder(seconds_per_text=0.02, name="slow")})  # 4 pairs: 0.16 s a chunk
    state.models = lambda: [SimpleNamespace(name="slow", label="slow")]
    state.loaded_defaults = lambda: ["slow"]
    with gr.Blocks() as demo:
        sf.build_section(state)
    demo.queue()
    port = free_port()
    demo.launch(server_name=HOST, server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(f"http://{HOST}:{port}/", verbose=False)
        rows = "".join(f"left {i}\tright {i}\n" for i in range(200))  # 50 chunks: ~8 s unless stopped
        job = client.submit(None, rows, ["slow"], api_name="/score_file")
        deadline = time.monotonic() + 20
        while not sf.STOP_SIGNALS and time.monotonic() < deadline:  # until the run has begun (its signal registered)
            time.sleep(0.01)
        client.predict(api_name="/stop_score_file")
        message, summary, preview, csv_path = job.result(timeout=30)
    finally:
        demo.close()
    done = summary["data"][0][2]
    assert 0 < done < 200 and f"Stopped after {done} of 200 rows" in message
    frame = read_csv(csv_path)
    assert len(frame) == 200 and frame["slow cosine"].notna().sum() == done
    assert len(sf.STOP_SIGNALS) == 0  # the session's signal is gone with its run
