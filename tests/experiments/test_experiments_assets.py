"""``reproduce_head``: which runs it trains, and which finished runs it keeps (training stubbed out)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlse.experiments import assets


@pytest.fixture
def trained(monkeypatch, tmp_path):
    """Record the training calls; a folder counts as a finished scorer once it is "trained" (or listed in ``done``)."""
    calls: list[tuple] = []
    done: set = set()

    def stage1(backbone, *, out, **kwargs):
        calls.append(("stage1", backbone, out.name, kwargs))
        done.add(out)

    def stage2(base, *, out, **kwargs):
        assert base in done, "Stage 2 trained before its Stage 1"
        calls.append(("stage2", base.name, out.name, kwargs))
        done.add(out)

    monkeypatch.setattr(assets, "train_stage1", stage1)
    monkeypatch.setattr(assets, "train_stage2", stage2)
    monkeypatch.setattr(assets, "is_scorer_folder", lambda path: path in done)
    monkeypatch.setattr(assets, "read_scorer_json", lambda run: {"backbone_identity": "id"})
    monkeypatch.setattr(
        assets, "export", lambda kind, run, folder, manifest: SimpleNamespace(run=run, folder=folder, manifest=manifest)
    )
    monkeypatch.setattr(assets, "measure", lambda folder, data_dir=None: {})
    monkeypatch.setattr(assets, "update_scores", lambda item, scores: item)
    monkeypatch.setattr(assets, "HEADS", {"b+s1": ("b", "s1"), "b+s1+s2": ("b", "s1+s2"), "b+bad": ("b", "nope")})
    return calls, done, tmp_path


def _head(name, tmp_path):
    return assets.reproduce_head(name, runs=tmp_path / "runs", out=tmp_path / "out")


def test_stage1_head_trains_once_then_is_kept(trained):
    calls, _, tmp_path = trained
    item = _head("b+s1", tmp_path)
    assert item.run == tmp_path / "runs" / "b+s1" and item.manifest["variant"] == "s1"
    s1_settings = {"seed": 0, "data_dir": None, "max_epochs": assets.DEFAULT_S1_EPOCHS, **assets.STAGE1_VARIANTS["s1"]}
    assert calls == [("stage1", "b", "b+s1", s1_settings)]
    _head("b+s1", tmp_path)
    assert len(calls) == 1  # resumed: the finished run is kept


def test_stage2_head_trains_its_stage1_unless_present(trained):
    calls, done, tmp_path = trained
    _head("b+s1+s2", tmp_path)
    assert [c[:3] for c in calls] == [("stage1", "b", "b+s1"), ("stage2", "b+s1", "b+s1+s2")]
    assert calls[1][3] == {"seed": 0, "data_dir": None, **assets.STAGE2_VARIANTS["s1+s2"]}
    calls.clear()
    _head("b+s1+s2", tmp_path)
    assert calls == []  # both finished: nothing trains
    done.discard(tmp_path / "runs" / "b+s1+s2")
    _head("b+s1+s2", tmp_path)
    assert [c[:3] for c in calls] == [("stage2", "b+s1", "b+s1+s2")]  # its Stage 1 is reused


def test_unknown_variant_is_refused(trained):
    with pytest.raises(assets.MlseError, match="unknown seed-grid variant 'nope' for b\\+bad"):
        _head("b+bad", trained[2])
