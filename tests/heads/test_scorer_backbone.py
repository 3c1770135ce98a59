"""The scorer's backbone is looked up in one place (mlse.heads.scorer.backbone_name): the model factory and the app's
model pool both ask it."""

from __future__ import annotations

import shutil

import pytest

from mlse.errors import ModelNotFoundError
from mlse.heads.scorer import backbone_name
from tests.paths import FIXTURES

RUNS_V0 = FIXTURES / "runs-v0" / "mlse-runs"


def test_backbone_name_reads_the_manifest_of_old_and_new_runs(tmp_path):
    assert backbone_name(RUNS_V0 / "micro+s1+s2") == "runs/micro-bert"
    assert backbone_name(str(RUNS_V0 / "micro+s1")) == "runs/micro-bert"
    with pytest.raises(ModelNotFoundError, match="not a readable scorer run"):
        backbone_name(tmp_path)


class _Loaded(Exception):
    """Raised by the stand-in loader with the name of the model it was asked for."""


def test_the_factory_and_the_app_load_the_backbone_it_names(tmp_path, monkeypatch):
    import mlse.models
    from mlse.encoders.registry import ModelSpec
    from mlse.serving import model_pool

    run = tmp_path / "micro+s1"
    shutil.copytree(RUNS_V0 / "micro+s1", run)

    def resolve(name: str) -> ModelSpec:
        return ModelSpec(name, "scorer", str(run)) if name == "runs/micro+s1" else ModelSpec(name, "local", "/x")

    def load(spec: ModelSpec, **_):
        raise _Loaded(spec.name)

    monkeypatch.setattr(mlse.models, "resolve_model", resolve)
    monkeypatch.setattr(mlse.models, "encoder_from_spec", load)
    with pytest.raises(_Loaded, match="^runs/micro-bert$"):
        mlse.models.load_model("runs/micro+s1")
    assert model_pool.backbone_name is backbone_name  # the app's pool asks the same function
