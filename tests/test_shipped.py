"""Shipped artifacts (mlse.shipped) on tiny models: export in float16 with a manifest, discovery, file checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.heads.scorer import Scorer
from mlse.shipped import MANIFEST, check_files, export, list_shipped, read_manifest, total_bytes, update_scores
from mlse.train.heads import train_stage1


@pytest.fixture()
def scorer_run(tmp_path, tiny_bert, data_dir):
    run = tmp_path / "runs" / "tiny+s1"
    train_stage1(str(tiny_bert), out=run, pairs=["eng-deu"], max_pairs=30, data_dir=data_dir, probe=False,
                 max_epochs=2)  # fmt: skip
    return run


def _manifest(backbone: str) -> dict:
    return {"backbone": backbone, "backbone_identity": "x", "command": "python -m mlse reproduce assets",
            "data": {"f": "0" * 64}, "scores": {}}  # fmt: skip


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
    assert read_manifest(item.folder)["scores"] == {"cross-12": 12.5} and updated.manifest["scores"]["cross-12"] == 12.5
    assert "cross-12 12.5" in updated.description
    (root / "heads" / "broken").mkdir()
    (root / "heads" / "broken" / MANIFEST).write_text(json.dumps({"name": "broken"}))
    with pytest.raises(MlseError, match="missing"):
        read_manifest(root / "heads" / "broken")
    assert [a.name for a in list_shipped(root)] == ["shipped/h"]  # the broken one is skipped, not fatal


def test_unknown_kind_is_refused(scorer_run, tmp_path):
    with pytest.raises(MlseError, match="unknown artifact kind"):
        export("weights", scorer_run, tmp_path / "x", _manifest("b"))
