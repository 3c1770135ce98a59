"""Memory-bounded loading: sizes parsed and estimated, least recently used encoders evicted, a scorer's backbone shared
(fake encoders of known size; the app state's loader is replaced so no model is read)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from mlse.errors import MlseError
from mlse.serving.encoder_pool import (
    INT8_FRACTION,
    UNKNOWN_BYTES,
    EncoderPool,
    estimate_resident_bytes,
    parse_memory_size,
    weight_file_bytes,
)
from tests.fake_encoder import FakeEncoder
from tests.paths import REPO_ROOT

MB = 10**6


class SizedFake(FakeEncoder):
    """A fake encoder that says how big it is."""

    def __init__(self, name: str, size: int):
        super().__init__(identity=f"{name}:v1", name=name)
        self.resident_bytes = size


# -- sizes ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5GB", 1_500_000_000),
        ("800MB", 800 * MB),
        ("800 mb", 800 * MB),
        ("512MiB", 512 * 2**20),
        ("123456", 123456),
        (2_000_000, 2 * MB),
        ("0.5gib", 2**29),
    ],
)
def test_parse_memory_size(text, expected):
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize("bad", ["lots", "1.5 GBs", "-1GB", "0", "", "1e9"])
def test_bad_memory_size_names_the_flag(bad):
    with pytest.raises(MlseError, match="--max-memory"):
        parse_memory_size(bad)


def test_weight_files_are_counted_at_their_loaded_size(tmp_path, tiny_bert):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "notes.txt").write_text("not weights")
    with zipfile.ZipFile(tmp_path / "w.npz", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.npy", b"\0" * 5000)  # compresses to almost nothing; np.load holds all 5000 bytes
    assert weight_file_bytes(tmp_path) == 6000
    weights = sum(p.stat().st_size for p in Path(tiny_bert).rglob("*.safetensors"))
    from mlse.encoders.load import load_encoder

    assert estimate_resident_bytes(load_encoder(str(tiny_bert))) == weights  # through the cache wrapper
    assert estimate_resident_bytes(load_encoder(str(tiny_bert)), backend="onnx-int8") == int(weights * INT8_FRACTION)
    assert estimate_resident_bytes(FakeEncoder()) == UNKNOWN_BYTES  # unknown: still counted


def test_a_scorer_counts_its_heads_not_its_backbone():
    import torch

    class Head:
        def state(self):
            return {"w": torch.zeros(10, 10), "b": torch.zeros(10)}, {}

    class FakeScorer:
        backbone = SizedFake("big", 10**9)
        heads = [("stage1", Head())]

    assert estimate_resident_bytes(FakeScorer()) == 110 * 4


# -- the pool -------------------------------------------------------------------------------------------------------
def test_pool_evicts_least_recently_used_within_budget():
    pool = EncoderPool(max_bytes=1000)
    for name in "abc":
        pool.put(name, SizedFake(name, 400), 400)
        assert pool.total_bytes <= 1000
    assert pool.keys() == ["b", "c"]  # a was evicted for c
    assert pool.get("b") is not None  # b is now the most recent ...
    pool.put("d", SizedFake("d", 400), 400)
    assert pool.keys() == ["b", "d"] and pool.evictions == 2  # ... so c went


def test_pool_reserves_room_before_a_load_and_keeps_an_oversized_newcomer():
    pool = EncoderPool(max_bytes=1000)
    pool.put("a", object(), 300)
    pool.put("b", object(), 300)
    assert pool.make_room(600) == ["a"] and pool.total_bytes == 300
    assert pool.put("huge", object(), 5000) == ["b"]  # alone over budget: it still loads, everything else goes
    assert pool.keys() == ["huge"]


def test_make_room_never_evicts_what_it_keeps():
    """Two kept keys, the second a scorer whose backbone is not kept: touching it touches the backbone after the
    first kept key, so the least recently used is then a kept key, which must stay (ints: a set's order is fixed)."""
    pool = EncoderPool(max_bytes=1000)
    pool.put(1, object(), 300)
    pool.put(3, object(), 300)  # the backbone of 2
    pool.put(2, object(), 10, depends_on=3)
    pool.make_room(800, keep={1, 2})
    assert 1 in pool and 2 in pool


def test_pool_replaces_a_stale_entry():
    pool = EncoderPool(max_bytes=1000)
    pool.put("run", "old", 100, stamp=1)
    assert pool.get("run", 2) is None  # the run folder changed on disk
    pool.put("run", "new", 100, stamp=2)
    assert pool.get("run", 2) == "new" and pool.total_bytes == 100


def test_a_scorer_keeps_its_backbone_recent_and_goes_with_it():
    pool = EncoderPool(max_bytes=1000)
    pool.put("backbone", object(), 500)
    pool.put("other", object(), 300)
    pool.put("scorer", object(), 10, depends_on="backbone")
    assert pool.keys() == ["other", "backbone", "scorer"]  # using the scorer used the backbone
    pool.put("third", object(), 400)
    assert pool.keys() == ["backbone", "scorer", "third"]
    pool.put("fourth", object(), 400)
    assert "backbone" not in pool and "scorer" not in pool  # evicting the backbone takes its scorer along


# -- in the app state -----------------------------------------------------------------------------------------------
@pytest.fixture()
def folders(tmp_path, tiny_bert):
    """Three model folders (the tiny BERT's config, so names resolve, and 400 bytes of "weights", so the estimate
    before loading agrees with the fakes' size) and a scorer on the first."""
    import shutil

    out = {}
    for name in ("m1", "m2", "m3"):
        out[name] = tmp_path / name
        out[name].mkdir()
        shutil.copy(Path(tiny_bert) / "config.json", out[name] / "config.json")
        (out[name] / "model.safetensors").write_bytes(b"\0" * 400)
    scorer = tmp_path / "scorer"
    scorer.mkdir()
    (scorer / "scorer.json").write_text(
        json.dumps({"backbone": str(out["m1"]), "backbone_identity": "m1:x", "heads": []})
    )
    out["scorer"] = scorer
    return {k: str(v) for k, v in out.items()}


@pytest.fixture()
def sized_state(folders, monkeypatch):
    """An AppState with a 1000-byte budget whose pool's loader returns fakes of 400 bytes (scorers: 10 on their
    backbone)."""
    from mlse.serving.app_state import AppState
    from mlse.serving.model_pool import ModelPool

    loads = []

    def fake_load(self, spec, name, backbone=None):
        loads.append(Path(name).name)
        if backbone is not None:
            fake = SizedFake(Path(name).name, 10)
            fake.backbone = backbone
            return fake
        return SizedFake(Path(name).name, 400)

    monkeypatch.setattr(ModelPool, "_load", fake_load)
    state = AppState(max_memory="1000")
    state.loads = loads
    return state


def test_state_evicts_and_reloads(sized_state, folders):
    state = sized_state
    first = state.encoder(folders["m1"])
    assert state.encoder(folders["m1"]) is first and state.loads == ["m1"]  # loaded once
    state.encoder(folders["m2"])
    state.encoder(folders["m3"])  # 1200 bytes would pass the budget: m1 (least recent) goes
    assert state.pool.loaded_bytes <= 1000 and [Path(loc).name for _, loc in state.pool.loaded()] == ["m2", "m3"]
    again = state.encoder(folders["m1"])
    assert again is not first and state.loads == ["m1", "m2", "m3", "m1"]  # reloaded after eviction
    assert first.encode(["still usable"]).shape == (1, 8)  # a request holding it keeps a working encoder


def test_state_shares_a_scorers_backbone(sized_state, folders):
    state = sized_state
    scorer = state.encoder(folders["scorer"])
    backbone = state.encoder(folders["m1"])
    assert scorer.backbone is backbone and state.loads == ["m1", "scorer"]  # the backbone loaded once
    assert state.pool.loaded_bytes == 410  # counted once: 400 + the heads' 10
    state.encoder(folders["m2"])
    state.encoder(folders["scorer"])  # using the scorer keeps its backbone too
    state.encoder(folders["m3"])  # so m2 is the one to go
    names = [Path(loc).name for _, loc in state.pool.loaded()]
    assert "m2" not in names and {"m1", "scorer", "m3"} <= set(names)


def test_state_rejects_a_bad_budget():
    from mlse.serving.app_state import AppState

    with pytest.raises(MlseError, match="--max-memory"):
        AppState(max_memory="plenty")


def test_bad_max_memory_in_app_py_is_one_line():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "app.py", "--max-memory", "plenty"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "--max-memory" in done.stderr and "Traceback" not in done.stderr


def test_a_folder_its_load_creates_is_loaded_once(sized_state, folders, monkeypatch):
    """me5-small's folder is made by its first load (the conversion): stamped before the load it would look replaced
    on the next request and be loaded a second time."""
    import mlse.serving.model_pool as pool_module

    state = sized_state
    monkeypatch.setattr(pool_module, "_stamp", lambda spec: (spec.location, len(state.loads)))  # changes on load
    first = state.encoder(folders["m1"])
    assert state.encoder(folders["m1"]) is first and state.loads == ["m1"]


def test_names_are_resolved_once_per_rescan(sized_state, folders, monkeypatch):
    import mlse.serving.model_pool as pool_module

    calls = []
    real = pool_module.resolve_model
    monkeypatch.setattr(pool_module, "resolve_model", lambda name: calls.append(name) or real(name))
    for _ in range(3):
        sized_state.encoder(folders["m2"])
    assert calls == [folders["m2"]]
    sized_state.refresh()
    sized_state.encoder(folders["m2"])
    assert calls.count(folders["m2"]) == 2
