"""Shipped artifacts (mlse.runs.shipped) on tiny models: export in float16 with a manifest, discovery, file checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.heads.scorer import Scorer
from mlse.runs.shipped import (
    MANIFEST,
    check_files,
    export,
    list_shipped,
    read_shipped_manifest,
    total_bytes,
    update_scores,
)
from mlse.train.head_training import train_stage1


@pytest.fixture()
def scorer_run(tmp_path, tiny_bert, data_dir):
    run = tmp_path / "runs" / "tiny+s1"
    train_stage1(str(tiny_bert), out=run, pairs=["eng-deu"], max_pairs=30, data_dir=data_dir, probe=False, max_epochs=2)
    return run


def _manifest(backbone: str) -> dict:
    return {
        "backbone": backbone,
        "backbone_identity": "x",
        "command": "python -m mlse reproduce assets",
        "data": {"f": "0" * 64},
        "scores": {},
    }


def test_export_writes_float16_heads_that_load_and_score_like_the_run(scorer_run, tiny_bert, tmp_path):
    root = tmp_path / "assets"
    item = export("scorer", scorer_run, root / "heads" / "tiny+s1", _manifest(str(tiny_bert)))
    assert item.name == "shipped/tiny+s1" and item.kind == "scorer" and check_files(item) == []
    assert set(item.manifest["files"]) == {"scorer.json", "stage1.json", "stage1.safetensors"}
    from safetensors.torch import load_file

    assert {str(t.dtype) for t in load_file(str(item.folder / "stage1.safetensors")).values()} == {"torch.float16"}
    texts = ["A man is playing a flute.", "Ein Mann spielt Flöte.", "Eine Frau schneidet eine Zwiebel."]
    original = Scorer.load(scorer_run).encode(texts)
    shipped = Scorer.load(item.folder).encode(texts)
    assert np.abs(original - shipped).max() < 5e-3  # float16 rounding only
    assert [a.name for a in list_shipped(root)] == ["shipped/tiny+s1"] and total_bytes(root) > 0
    weights = [f for f in item.folder.rglob("*.safetensors")]
    assert weights and all(f.stat().st_mode & 0o044 == 0o044 for f in weights)  # readable by the app's user


def test_check_files_names_a_changed_an_extra_and_a_missing_file(scorer_run, tiny_bert, tmp_path):
    item = export("scorer", scorer_run, tmp_path / "assets" / "heads" / "h", _manifest(str(tiny_bert)))
    (item.folder / "stage1.json").write_text("{}")
    (item.folder / "notes.txt").write_text("hello")
    (item.folder / "scorer.json").unlink()
    problems = check_files(item)
    assert any("stage1.json differs" in p for p in problems)
    assert any("notes.txt is not in the manifest" in p for p in problems)
    assert any("scorer.json is missing" in p for p in problems)


def test_update_scores_and_broken_manifests(scorer_run, tiny_bert, tmp_path):
    root = tmp_path / "assets"
    item = export("scorer", scorer_run, root / "heads" / "h", _manifest(str(tiny_bert)))
    updated = update_scores(item, {"cross-12": 12.5})
    assert read_shipped_manifest(item.folder)["scores"] == {"cross-12": 12.5}
    assert updated.manifest["scores"]["cross-12"] == 12.5
    assert "cross-12 12.5" in updated.description
    (root / "heads" / "broken").mkdir()
    (root / "heads" / "broken" / MANIFEST).write_text(json.dumps({"name": "broken"}))
    with pytest.raises(MlseError, match="missing"):
        read_shipped_manifest(root / "heads" / "broken")
    assert [a.name for a in list_shipped(root)] == ["shipped/h"]  # the broken one is skipped, not fatal


def test_unknown_kind_is_refused(scorer_run, tmp_path):
    with pytest.raises(MlseError, match="unknown artifact kind"):
        export("weights", scorer_run, tmp_path / "x", _manifest("b"))


# ----------------------------------------------------------------------------------- offered by the model registry
@pytest.fixture()
def shipped_assets(tmp_path, monkeypatch, scorer_run, tiny_bert):
    """An assets folder with a tiny shipped scorer and a tiny shipped LoRA student (both on tiny_bert)."""
    from mlse.dirs import runs_dir
    from mlse.encoders.identity import folder_fingerprint
    from mlse.train.finetune import finetune
    from tests.train.test_train_finetune import tiny_config

    root = tmp_path / "assets"
    monkeypatch.setenv("MLSE_ASSETS", str(root))
    identity = f"{tiny_bert}:{folder_fingerprint(tiny_bert)[:16]}"
    manifest = _manifest(str(tiny_bert)) | {"backbone_identity": identity}
    export("scorer", scorer_run, root / "heads" / "tiny+s1", manifest)
    finetune(tiny_config("lora-student", None, tiny_bert, method="hard", lora_r=2, eval_at_start=False))
    run = runs_dir() / "lora-student"
    export("lora-student", run / "adapter", root / "students" / "tiny-student", manifest)
    return root, run


def test_shipped_artifacts_are_listed_resolved_and_loaded(shipped_assets):
    from mlse.encoders.catalogue import available_models, resolve_model
    from mlse.models import load_model

    root, run = shipped_assets
    listed = {m.name: m for m in available_models()}
    assert {"shipped/tiny+s1", "shipped/tiny-student"} <= set(listed)
    assert listed["shipped/tiny-student"].status.startswith("available")
    assert resolve_model("shipped/tiny+s1").source == "scorer"
    texts = ["Hello world.", "Hallo Welt.", "A man plays a flute."]
    assert load_model("shipped/tiny+s1", cache=False).encode(texts).shape[0] == 3
    student = load_model("shipped/tiny-student", cache=False).encode(texts)  # merged into tiny_bert on first use
    trained = load_model(str(run / "model"), cache=False).encode(texts)
    assert np.abs(student - trained).max() < 2e-3  # the float16 adapter, merged in float32


def test_a_shipped_student_on_other_weights_is_refused(shipped_assets):
    from mlse.errors import ModelNotFoundError
    from mlse.models import load_model

    root, _ = shipped_assets
    manifest_path = root / "students" / "tiny-student" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["backbone_identity"] = manifest["backbone_identity"].rsplit(":", 1)[0] + ":0123456789abcdef"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ModelNotFoundError, match="0123456789abcdef"):
        load_model("shipped/tiny-student", cache=False)


def test_the_app_ticks_shipped_artifacts_after_the_defaults(shipped_assets):
    from mlse.serving.app_state import AppState

    state = AppState(default_models=())  # none of the real defaults: the shipped ones come first
    chosen, _ = state.default_selection()
    assert chosen[:2] == ["shipped/tiny+s1", "shipped/tiny-student"] and "runs/lora-student" in chosen
    labels = {m.name: m.label for m in state.models()}
    assert "(shipped)" in labels["shipped/tiny+s1"] and "student" in labels["shipped/tiny-student"]


# ---------------------------------------------------------------------------------------------- reproduce assets
def test_reproduce_assets_trains_exports_and_measures_heads(tmp_path, tiny_bert, data_dir, monkeypatch, capsys):
    from functools import partial

    from mlse.cli.main import main
    from mlse.experiments import assets

    monkeypatch.setattr(assets, "HEADS", {"tiny+s1": (str(tiny_bert), "s1"), "tiny+s1+s2": (str(tiny_bert), "s1+s2")})
    monkeypatch.setattr(assets, "STUDENTS", {})  # the real one trains 20 CPU-minutes; its path is tested below
    monkeypatch.setattr(assets, "DEFAULT_S1_EPOCHS", 2)
    monkeypatch.setattr(
        assets, "train_stage1", partial(assets.train_stage1, pairs=["eng-deu"], max_pairs=30, probe=False)
    )
    monkeypatch.setattr(assets, "train_stage2", partial(assets.train_stage2, pairs=["en-de"], max_epochs=1))
    out = tmp_path / "assets"
    assert main(["reproduce", "assets", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    items = list_shipped(out)
    assert [i.name for i in items] == ["shipped/tiny+s1", "shipped/tiny+s1+s2"]
    for item in items:
        assert check_files(item) == [] and item.manifest["command"].startswith("python -m mlse reproduce assets")
        scores = item.manifest["scores"]
        assert len(scores["sts_test_spearman"]) == 17 and f"{item.name}: cross-12 {scores['cross-12']:.2f}" in printed
        assert item.manifest["data"] and item.manifest["backbone_identity"].endswith(
            json.loads((item.folder / "scorer.json").read_text())["backbone_identity"].rsplit(":", 1)[1]
        )
    assert read_shipped_manifest(out / "heads" / "tiny+s1+s2")["variant"] == "s1+s2"
    assert main(["reproduce", "assets", "--only", "nope", "--out", str(out)]) == 2


def test_reproduce_student_exports_the_adapter_and_measures_the_exported_files(
    tmp_path, tiny_bert, data_dir, monkeypatch
):
    """The student path of ``reproduce assets`` on a tiny LoRA run: the measured scores and the calibration come from
    the adapter written to ``--out`` (not from whatever ships in assets/models)."""
    from mlse.dirs import runs_dir
    from mlse.experiments import assets
    from mlse.models import load_model
    from mlse.train.finetune import finetune
    from tests.train.test_train_finetune import tiny_config

    monkeypatch.setenv("MLSE_ASSETS", str(tmp_path / "elsewhere"))  # nothing ships there: measuring it would fail

    def tiny_recipe(name, recipe, *, runs, out, data_dir=None, progress=None):
        assert recipe["lora_r"]  # the shipped recipe is a LoRA one
        finetune(tiny_config("tiny-student-run", None, tiny_bert, method="hard", lora_r=2, eval_at_start=False))
        return {"run": str(runs_dir() / "tiny-student-run")}

    monkeypatch.setattr(assets, "run_recipe", tiny_recipe)
    monkeypatch.setattr(assets, "STUDENTS", {"tiny-student": "ema-frozen+lora"})
    monkeypatch.setattr(assets, "TATOEBA_LANGS", ("deu",))  # the retrieval check on one language, for speed
    out = tmp_path / "assets"
    item = assets.reproduce_student("tiny-student", runs=tmp_path / "runs", out=out, data_dir=data_dir)
    assert item.folder == out / "students" / "tiny-student" and check_files(item) == []
    scores = read_shipped_manifest(item.folder)["scores"]
    assert len(scores["sts_test_spearman"]) == 17 and scores["en-en"] == scores["sts_test_spearman"]["en-en"]
    assert 0 <= scores["tatoeba-14"] <= 100 and 0 <= scores["xsim-14"] <= 100
    assert read_shipped_manifest(item.folder)["backbone_identity"].startswith(str(tiny_bert))
    assert list((out / "calibration").glob("*tiny-student*.json"))
    monkeypatch.setenv("MLSE_ASSETS", str(out))  # the exported adapter scores what its manifest says
    texts = ["A man is playing a flute.", "Ein Mann spielt Flöte."]
    assert load_model("shipped/tiny-student", cache=False).encode(texts).shape[0] == 2


def test_a_soup_student_ships_its_members_stacked_into_one_adapter(tmp_path, tiny_bert, data_dir, monkeypatch):
    """A :class:`Soup` in STUDENTS: each member recipe trains (here: tiny runs of two methods), their adapters are
    stacked into one of the summed rank, and the exported student encodes as the weight soup of its members."""
    from mlse.dirs import runs_dir
    from mlse.encoders.load import load_encoder
    from mlse.encoders.weight_soup import build_soup
    from mlse.experiments import assets
    from mlse.models import load_model
    from mlse.train.finetune import finetune
    from tests.train.test_train_finetune import tiny_config

    methods = {"ema-frozen+lora": ("hard", 2), "hard-t0.01-cosent+lora": ("mse", 3)}

    def tiny_recipe(name, recipe, *, runs, out, data_dir=None, progress=None):
        method, rank = methods[name]
        run = f"tiny-soup-{method}"
        teacher = tiny_bert if method == "mse" else None
        finetune(tiny_config(run, teacher, tiny_bert, method=method, lora_r=rank, eval_at_start=False))
        return {"run": str(runs_dir() / run)}

    monkeypatch.setattr(assets, "run_recipe", tiny_recipe)
    monkeypatch.setattr(assets, "STUDENTS", {"tiny-soup": assets.Soup(tuple(methods), (0.5, 0.5))})
    monkeypatch.setattr(assets, "TATOEBA_LANGS", ("deu",))
    out = tmp_path / "assets"
    item = assets.reproduce_student("tiny-soup", runs=tmp_path / "runs", out=out, data_dir=data_dir)
    manifest = read_shipped_manifest(item.folder)
    assert check_files(item) == [] and manifest["soup"] == {"members": list(methods), "weights": [0.5, 0.5]}
    assert json.loads((item.folder / "adapter_config.json").read_text())["r"] == 5
    assert manifest["recipe"] == "soup 0.5 x ema-frozen+lora + 0.5 x hard-t0.01-cosent+lora"

    members = [runs_dir() / "tiny-soup-hard" / "model", runs_dir() / "tiny-soup-mse" / "model"]
    build_soup(tiny_bert, members, [0.5, 0.5], tmp_path / "dense-soup")
    monkeypatch.setenv("MLSE_ASSETS", str(out))
    texts = ["A man is playing a flute.", "Ein Mann spielt Flöte."]
    shipped = load_model("shipped/tiny-soup", cache=False).encode(texts)
    dense = load_encoder(str(tmp_path / "dense-soup"), cache=False).encode(texts)
    np.testing.assert_allclose(shipped, dense, atol=2e-3)  # float16 adapter against the float32 weight soup
