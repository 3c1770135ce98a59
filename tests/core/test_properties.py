"""Property tests (hypothesis): arbitrary strings, numbers and files fed to every tab handler and CLI parser.

Each call must return a result or refuse with one clear message (an MlseError, a gr.Error, argparse's exit 2), never
raise anything else. Plain function calls, no server; models are the deterministic fake encoder (tests/fake_encoder.py)
so that a hundred calls take seconds. A found failure is a bug in the handler, not in the test.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pandas.io.formats.style import Styler

from mlse.cli.main import build_parser, main
from mlse.data.tsv import load_parallel_tsv, load_scored_tsv
from mlse.errors import MlseError
from mlse.serving import pair_scoring
from mlse.serving.app_state import AppState
from mlse.train.runner import Job, JobRunner
from mlse.ui import finetune_tab, gold_tab, map_tab, results_tab, score_tab, sentence_input, tatoeba_tab
from tests.fake_encoder import FakeEncoder

FAKE = "fake-model"
FEW = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
VERY_FEW = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))

# Text that reaches the handlers in practice: anything, plus names that mean something to them.
texts = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "",
            " ",
            FAKE,
            "deu",
            "en-de",
            "cosine",
            "test",
            "runs/x",
            ".",
            "..",
            "/",
            "~",
            "-1",
            "nan",
            "1e309",
            "\x00",
            "\u202e",
        ]
    ),
)
numbers = st.one_of(
    st.none(), st.integers(-(10**12), 10**12), st.floats(allow_nan=True, allow_infinity=True), texts, st.booleans()
)
text_lists = st.one_of(st.none(), texts, st.lists(texts, max_size=4))


class NotRunning(JobRunner):
    """Takes a submitted job and never runs it: the handler's checks are what is under test, not training."""

    def submit(self, name, fn, description="", meta=None):
        return Job(1, name, fn, description, dict(meta or {}))


class FakeState(AppState):
    """The app's state with one extra model, the fake encoder; every other name resolves as in the app."""

    def encoder(self, name: str):
        if name == FAKE:
            return FakeEncoder(identity="fake:props")
        return super().encoder(name)

    def model_names(self) -> list[str]:
        return [FAKE]


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> FakeState:
    app_state = FakeState()
    app_state.jobs = NotRunning()
    return app_state


def answers_or_refuses(call) -> None:
    """Run ``call``; a clear refusal (MlseError, gr.Error) is fine, any other exception fails the property."""
    import gradio as gr

    try:
        call()
    except (MlseError, gr.Error):
        pass


@VERY_FEW
@given(s1=texts, s2=texts, models=text_lists, lang1=texts, lang2=texts, gold=numbers)
@example(
    s1="A man plays a flute.", s2="Ein Mann spielt Flöte.", models=[FAKE, "nope"], lang1="en", lang2="xx", gold="3.8"
)  # the path that scores, next to one that refuses
def test_score_tab(state, s1, s2, models, lang1, lang2, gold):
    table, status = score_tab.score_pair(state, s1, s2, models, lang1, lang2, gold)
    assert isinstance(table, pd.DataFrame) and isinstance(status, str) and status
    assert isinstance(sentence_input.detect_handler(s1), str)
    code, confidence = sentence_input.detect_api(s2)
    assert isinstance(code, str) and 0.0 <= confidence <= 1.0
    answer = pair_scoring.score_api(state, s1, s2, models, lang1, lang2)  # the direct API: JSON, never an exception
    assert set(answer) == {"scores", "languages", "notices", "not_scored"}
    json.dumps(answer)


@VERY_FEW
@given(model=st.one_of(st.just(FAKE), texts), langs=text_lists, n=numbers, sentence=numbers)
@example(model=FAKE, langs=["eng_Latn", "deu_Latn", None], n="12", sentence=3)
def test_map_tab(state, model, langs, n, sentence):
    out = map_tab.project_map(state, model, langs, n, method="pca")
    assert isinstance(out.note, str)
    figures, details = map_tab.highlight(out.result, sentence)
    assert len(figures) == len(map_tab.SPACES) and isinstance(details, str)


@FEW
@given(lang=texts, model=st.one_of(st.just(FAKE), texts), criterion=texts, row=st.one_of(numbers, text_lists))
@example(lang="deu", model=FAKE, criterion="margin", row=["to_en", "2"])
def test_tatoeba_tab(state, lang, model, criterion, row):
    summary, table = tatoeba_tab.retrieval(state, lang, model, criterion)
    assert isinstance(summary, str) and isinstance(table, pd.DataFrame)
    text, neighbours = tatoeba_tab.details(state, lang, model, row)
    assert isinstance(text, str) and isinstance(neighbours, pd.DataFrame)
    text, changes = tatoeba_tab.compare(state, lang, model, FAKE, criterion)
    assert isinstance(text, str) and isinstance(changes, pd.DataFrame)


@FEW
@given(pair=texts, models=text_lists, split=texts, low=numbers, high=numbers, k=numbers)
@example(pair="en-de", models=[FAKE], split="dev", low="1", high=4.5, k=3.0)
def test_gold_tab(state, pair, models, split, low, high, k):
    *figures, table, message = gold_tab.predicted_vs_gold(state, pair, models, split, n_boot=10)
    assert len(figures) == 3 and isinstance(table, pd.DataFrame) and isinstance(message, str)
    model = models[0] if isinstance(models, list) and models else models
    table, message = gold_tab.disagreements(state, pair, model, split, low, high, k)
    # a table found is a Styler (numbers kept, text shown: mlse.ui.tables.sortable); none, an empty frame
    assert isinstance(table, (pd.DataFrame, Styler)) and isinstance(message, str)


@FEW
@given(
    method=texts,
    model=texts,
    teacher=st.one_of(st.none(), texts),
    pairs=text_lists,
    max_pairs=numbers,
    budget=numbers,
    name=texts,
    batch=numbers,
    lr=numbers,
    every=numbers,
    steps=numbers,
    epochs=numbers,
    dev=numbers,
    vocab=numbers,
    precision=texts,
)
def test_finetune_tab(
    state,
    method,
    model,
    teacher,
    pairs,
    max_pairs,
    budget,
    name,
    batch,
    lr,
    every,
    steps,
    epochs,
    dev,
    vocab,
    precision,
):
    message = finetune_tab.start_run(
        state,
        method,
        model,
        teacher,
        pairs,
        max_pairs,
        budget,
        name,
        batch_size=batch,
        lr=lr,
        eval_every=every,
        max_steps=steps,
        max_epochs=epochs,
        dev_max_pairs=dev,
        extend_vocab=vocab,
        precision=precision,
    )
    assert isinstance(message, str) and message


@FEW
@given(task=texts, model=texts, metric=texts, text=st.one_of(st.none(), texts), key=st.one_of(st.none(), texts))
@example(task="sts", model="m", metric="", text=None, key=None)  # the frame's one row: a bar
@example(task="sts", model="m", metric="spearman", text=None, key="avg:en")  # another key: none
def test_results_tab(task, model, metric, text, key):
    frame = pd.DataFrame(
        [
            {
                "model": "m",
                "task": "sts",
                "split": "test",
                "key": "avg:all",
                "metric": "spearman",
                "value": 80.123,
                "kind": "eval",
                "experiment": "e",
                "date": "",
                "source": "s",
            }
        ]
    )
    assert isinstance(results_tab.filter_table(frame, task, model, metric, text), pd.DataFrame)
    options = results_tab.plot_options(frame, task)
    assert isinstance(options["keys"], list)
    fig = results_tab.metric_plot(frame, task, key, metric)
    matches = task == "sts" and (metric or "spearman") == "spearman" and key in (None, "", "avg:all")
    assert len(fig.data) == int(matches) and fig.layout.title.text  # the one bar, or a title saying there is none


CLI_WORDS = [
    "eval",
    "models",
    "train",
    "finetune",
    "data",
    "experiment",
    "--model",
    "--task",
    "--pairs",
    "--split",
    "--pairs-file",
    "--budget-minutes",
    "--max-pairs",
    "--batch-size",
    "--backend",
    "sts",
    "tatoeba",
    "-h",
]


@FEW
@given(argv=st.lists(st.one_of(st.sampled_from(CLI_WORDS), texts), max_size=6))
def test_cli_parser(argv):
    """Any argument list parses or exits with argparse's usage error (code 2), or help (code 0)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        assert exc.code in (0, 2)
    else:
        assert args.command in argv  # a command is required, and it is one of the words given


@FEW
@given(model=texts, pairs=texts, task=st.sampled_from(["sts", "tatoeba", "mining"]), content=st.binary(max_size=200))
def test_cli_eval_with_arbitrary_files_and_names(tmp_path_factory, capsys, model, pairs, task, content):
    """``eval`` with any model name, pair list and pairs file ends with 0 or the one-line error (2)."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_bytes(content)
    argv = ["eval", "--model", model or "x", "--task", task, "--pairs", pairs or "x", "--pairs-file", str(path)]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusing e.g. an empty value
        code = exc.code
    assert code in (0, 2)
    capsys.readouterr()


@FEW
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-8", "replace"))))
def test_tsv_loaders(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("tsv") / "f.tsv"
    path.write_bytes(content)
    for load in (load_scored_tsv, load_parallel_tsv):
        try:
            loaded = load(path)
        except MlseError as exc:
            assert str(path) in str(exc)
        else:
            assert len(loaded) > 0
