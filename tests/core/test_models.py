"""mlse.models.load_model, the one factory; and run folders and result files written before the package split
(tests/fixtures/runs-v0, made by tests/fixtures/make_runs_v0.py with the old code) still load, encode to
the same numbers and are listed as before."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from mlse.encoders.cache import CachedEncoder
from mlse.encoders.catalogue import STAGE1, STAGE12, STUDENT, list_runs
from mlse.encoders.load import load_encoder
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts
from mlse.heads.scorer import Scorer
from mlse.models import load_model
from mlse.runs.results_index import build_index
from mlse.serving.app_state import AppState
from tests.paths import FIXTURES

OLD = FIXTURES / "runs-v0"
EXPECTED = json.loads((OLD / "expected.json").read_text())


@pytest.fixture()
def old_runs(tmp_path, monkeypatch) -> Path:
    """A copy of the old runs directory (a test may write beside it), as MLSE_RUNS."""
    runs = shutil.copytree(OLD / "mlse-runs", tmp_path / "runs")
    for record in runs.rglob("*.safetensors.json"):  # weights are kept as text; written back byte for byte
        write_safetensors(record)
    monkeypatch.setenv("MLSE_RUNS", str(runs))
    return runs


def write_safetensors(record: Path) -> None:
    """``x.safetensors.json`` (metadata, and each float32 tensor's shape and values) -> ``x.safetensors``; the bytes
    equal the file the old code wrote, so weight fingerprints (identities) match."""
    import numpy as np
    from safetensors.numpy import save_file

    data = json.loads(record.read_text())
    tensors = {
        name: np.asarray(t["values"], dtype=np.float32).reshape(t["shape"]) for name, t in data["tensors"].items()
    }
    save_file(tensors, str(record.with_suffix("")), metadata=data["metadata"])
    record.unlink()


def test_old_runs_are_listed_with_their_kinds(old_runs):
    assert {s.name: s.source for s in list_runs()} == {
        "runs/micro-bert": "run",
        "runs/micro+hard": "run",
        "runs/micro+s1": "scorer",
        "runs/micro+s1+s2": "scorer",
    }
    kinds = {m.name: m.kind for m in AppState().models()}
    assert kinds["runs/micro+s1"] == STAGE1 and kinds["runs/micro+s1+s2"] == STAGE12
    assert kinds["runs/micro+hard"] == STUDENT


@pytest.mark.parametrize("run", ["runs/micro+s1", "runs/micro+s1+s2", "runs/micro+hard"])
def test_old_runs_load_and_encode_as_they_did(old_runs, run):
    model = load_model(run, cache=False)
    assert model.identity == EXPECTED["identities"][run]
    assert isinstance(model, Scorer) == ("+s1" in run)
    np.testing.assert_allclose(model.encode(EXPECTED["texts"]), np.array(EXPECTED[run]), atol=1e-5)


def test_an_old_result_file_is_indexed_and_reproduced(old_runs, data_dir):
    frame, warnings = build_index([OLD / "results"])
    assert warnings == []
    spearman = frame[(frame.task == "sts") & (frame.key == "en-de") & (frame.metric == "spearman")]
    assert spearman.value.tolist() == pytest.approx([EXPECTED["sts_spearman"]])
    again = run_sts(load_model("runs/micro-bert", cache=False), pairs=["en-de"], data_dir=data_dir, n_boot=0)
    assert again.scores["en-de"]["spearman"] == pytest.approx(EXPECTED["sts_spearman"], abs=1e-9)


def test_run_files_hold_no_module_paths():
    """What mlse writes into a run or result is data: renaming modules cannot break reading it."""
    for path in [*OLD.rglob("*.json"), *OLD.rglob("*.jsonl")]:
        assert not re.search(r"\bmlse\.[a-z_]+", path.read_text()), path


def test_load_encoder_refuses_a_scorer_and_load_model_takes_any(old_runs):
    with pytest.raises(MlseError, match="is a scorer .*: load it with mlse.models.load_model"):
        load_encoder("runs/micro+s1")
    assert isinstance(load_model("runs/micro-bert"), CachedEncoder)  # a plain model: the encoder, cached
    assert not isinstance(load_model("runs/micro-bert", cache=False), CachedEncoder)


def test_a_scorer_takes_the_backbone_it_is_given(old_runs):
    backbone = load_model("runs/micro-bert")
    scorer = load_model("runs/micro+s1+s2", backbone=backbone)
    assert scorer.backbone is backbone and scorer.name == "micro+s1+s2"
    assert load_model("runs/micro+s1+s2", cache=False).backbone is not backbone


def test_a_scorer_refuses_another_backbone(old_runs, tiny_bert):
    from mlse.heads.scorer import BackboneMismatchError

    with pytest.raises(BackboneMismatchError, match="retrain the heads"):
        load_model("runs/micro+s1", backbone=load_model(str(tiny_bert)))
