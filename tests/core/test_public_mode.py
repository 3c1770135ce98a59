"""Public deployment: no remote code, hub downloads only from the allow-list, capped fine-tunes one at a time, capped
uploads. Plain calls of the functions and handlers; no server, no hub."""

from __future__ import annotations

import ast
import threading

import pytest

from mlse import public_mode
from mlse.encoders.catalogue import materialise
from mlse.encoders.registry import ModelSpec
from mlse.errors import ModelNotFoundError
from tests.paths import REPO_ROOT as ROOT

# Calls that would run code shipped with a model when told to trust it.
LOADERS = {"SentenceTransformer", "from_pretrained", "AutoModel", "AutoTokenizer", "AutoConfig", "pipeline"}


@pytest.fixture()
def public_env(monkeypatch):
    monkeypatch.setenv(public_mode.PUBLIC_ENV, "1")
    monkeypatch.delenv(public_mode.HUB_ALLOW_ENV, raising=False)
    monkeypatch.delenv(public_mode.SPACE_ENV, raising=False)


# --- never trust_remote_code -----------------------------------------------------------------------------------


def test_every_model_loader_in_mlse_passes_trust_remote_code_false():
    found = []
    for path in (ROOT / "mlse").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in LOADERS:
                trust = [k.value for k in node.keywords if k.arg == "trust_remote_code"]
                found.append(path.name)
                assert trust and isinstance(trust[0], ast.Constant) and trust[0].value is False, (
                    f"{path}:{node.lineno}: {name}(...) must pass trust_remote_code=False"
                )
    assert "torch.py" in found and "export.py" in found  # the walk saw the loaders it guards (encoders/, onnx/)


def test_load_sentence_transformer_refuses_remote_code(monkeypatch, tmp_path):
    import sentence_transformers

    from mlse.encoders.torch import load_sentence_transformer

    seen = {}

    def fake(path, **kwargs):
        seen.update(kwargs)
        return "model"

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", fake)
    assert load_sentence_transformer(tmp_path, device="cpu") == "model"
    assert seen["trust_remote_code"] is False and seen["local_files_only"] is True


# --- the hub allow-list ----------------------------------------------------------------------------------------


@pytest.fixture()
def downloads(monkeypatch, tmp_path):
    """snapshot_download stand-in: records the ids asked for, returns an empty folder."""
    import huggingface_hub

    asked = []

    def fake_snapshot_download(repo_id, **kwargs):
        if kwargs.get("local_files_only"):
            raise FileNotFoundError(repo_id)  # nothing is in the local HF cache
        asked.append(repo_id)
        return str(tmp_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return asked


def test_public_mode_refuses_a_hub_id_off_the_allow_list(public_env, downloads):
    spec = ModelSpec("evil/model", "hub", "evil/model")
    with pytest.raises(ModelNotFoundError) as caught:
        materialise(spec)
    message = str(caught.value)
    assert "'evil/model' from the hub is not allowed on this public deployment" in message
    assert "sentence-transformers/LaBSE" in message and "--allow-hub-model" in message
    assert downloads == []  # refused before any request


def test_public_mode_downloads_registry_and_operator_ids(public_env, downloads, monkeypatch):
    materialise(ModelSpec("labse", "hub", "sentence-transformers/LaBSE"))
    public_mode.allow_hub_models(["org/extra", " "])
    materialise(ModelSpec("org/extra", "hub", "org/extra"))
    assert downloads == ["sentence-transformers/LaBSE", "org/extra"]


def test_space_id_turns_public_mode_on_and_the_cli_is_free_without_it(downloads, monkeypatch):
    monkeypatch.delenv(public_mode.PUBLIC_ENV, raising=False)
    monkeypatch.delenv(public_mode.SPACE_ENV, raising=False)
    materialise(ModelSpec("any/model", "hub", "any/model"))  # a user's own machine: any id
    assert downloads == ["any/model"]
    monkeypatch.setenv(public_mode.SPACE_ENV, "someone/mlse")
    assert public_mode.public_mode()
    with pytest.raises(ModelNotFoundError, match="not allowed on this public deployment"):
        materialise(ModelSpec("any/model", "hub", "any/model"))


# --- fine-tunes: capped, one at a time, listed models only, no overwrite --------------------------------------


@pytest.fixture()
def public_state(public_env, monkeypatch):
    """An app state whose jobs wait for Stop instead of training (the limits, not training, are under test)."""
    from mlse.serving.app_state import AppState
    from mlse.ui import finetune_tab as ft

    def waiting_job(req, **_):
        def job(report, stop: threading.Event):
            stop.event.wait(30)

        return job

    monkeypatch.setattr(ft, "training_job", waiting_job)
    return AppState()


def form(**overrides) -> dict:
    values = dict(
        method="hard",
        model="minilm-en",
        teacher=None,
        pairs=["en-de"],
        max_pairs=500,
        budget_minutes=5,
        name="visitor-run",
        overwrite=False,
        batch_size=32,
    )
    values.update(overrides)
    return values


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"budget_minutes": 30},
            "Time budget (minutes): 30 is over this public deployment's limit; expected at most 10",
        ),  # noqa: E501
        ({"max_pairs": 20000}, "Max pairs per language pair: 20000 is over"),
        ({"max_pairs": None}, "empty means all pairs"),
        ({"batch_size": 256}, "Batch size: 256 is over"),
        ({"overwrite": True}, "never replaces an existing run"),
        ({"model": "/home/user/secret-model"}, "model '/home/user/secret-model' is not one of the models"),
        ({"method": "mse", "teacher": "org/any"}, "teacher 'org/any' is not one of the models"),
    ],
)
def test_public_fine_tune_limits_are_refused_with_the_field_and_limit(public_state, overrides, expected):
    from mlse.ui import finetune_tab as ft

    message = ft.start_run(public_state, **form(**overrides))
    assert expected in message.replace("&#x27;", "'")
    assert ft.runner(public_state).latest() is None  # nothing was queued


def test_public_fine_tunes_run_one_at_a_time_with_no_queue(public_state):
    from mlse.ui import finetune_tab as ft

    jobs = ft.runner(public_state)
    try:
        assert ft.start_run(public_state, **form()).startswith("Started **visitor-run**")
        second = ft.start_run(public_state, **form(name="second-visitor"))
        assert "A training run is in progress: 'visitor-run'" in second.replace("&#x27;", "'")
        active = [j.name for j in [jobs.running(), *jobs.queued()] if j is not None]
        assert "The queue is full" in second and active == ["visitor-run"]
    finally:
        jobs.stop()
        assert jobs.wait(30)


def test_private_mode_keeps_its_queue(monkeypatch):
    from mlse.serving.app_state import AppState
    from mlse.ui import finetune_jobs
    from mlse.ui import finetune_tab as ft

    monkeypatch.delenv(public_mode.PUBLIC_ENV, raising=False)
    monkeypatch.delenv(public_mode.SPACE_ENV, raising=False)
    assert ft.runner(AppState()).max_queued == finetune_jobs.QUEUE_SIZE > 0


def test_public_sliders_stop_at_the_limits(public_env):
    from mlse.ui import finetune_tab as ft

    assert ft.slider_max(60, "Time budget (minutes)", True) == 10
    assert ft.slider_max(60, "Time budget (minutes)", False) == 60
    assert "no run waits in a queue" in ft.public_note() and "time budget (minutes) at most 10" in ft.public_note()


# --- uploads -------------------------------------------------------------------------------------------------


def test_public_launch_caps_uploads(public_env, monkeypatch):
    from mlse.ui.app import SESSION_CAPACITY, launch_options

    def without_head() -> dict:  # the <head> script is the same in both modes (tests/ui/test_plotly_preload.py)
        return {k: v for k, v in launch_options().items() if k != "head"}

    expected = {"max_file_size": public_mode.MAX_UPLOAD_BYTES, "state_session_capacity": SESSION_CAPACITY}
    assert without_head() == expected
    monkeypatch.delenv(public_mode.PUBLIC_ENV)
    assert without_head() == {"state_session_capacity": SESSION_CAPACITY}


def test_every_file_input_is_read_through_the_capped_reader():
    """A tab that takes a file reads it with mlse.ui.uploads.read_upload (rows and bytes capped, the upload deleted in
    public mode, no path echoed): a new file input that bypassed it would have no limits."""
    for path in (ROOT / "mlse" / "ui").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        names = {getattr(n.func, "attr", None) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert not names & {"Files", "UploadButton", "Image", "Audio", "Video"}, path
        if "File" in names:
            imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
            readers = [
                m
                for m in imported
                if m.startswith("mlse.ui.")
                and "read_upload(" in (ROOT / (m.replace(".", "/") + ".py")).read_text(encoding="utf-8")
            ]
            assert "read_upload(" in text or readers, (
                f"{path.name} builds a gr.File but does not read it with read_upload"
            )
