"""Scorers (backbone + trained heads): training on real data, run folders, reloading, backbone checks, CLI errors.

The backbone is the tiny local BERT (32-dim); Stage 1 trains on two small Tatoeba pairs, Stage 2 on STS en-de.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mlse.cli.main import main
from mlse.data import evaluation_sentences, normalize_sentence
from mlse.data.portable import data_identity, portable_path, resolve_record_path
from mlse.encoders.load import load_encoder
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts
from mlse.heads.scorer import BackboneMismatchError, Scorer
from mlse.models import load_model
from mlse.runs.folders import SCORER_FILE
from mlse.train.head_training import stage1_data, train_stage1, train_stage2
from tests.fake_encoder import FakeEncoder

S1_PAIRS = ["eng-deu", "eng-fra"]
S1_NAME, S2_NAME = "tiny+s1", "tiny+s1+s2"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_bert, data_dir):
    """Stage 1 then Stage 2 on the tiny BERT, saved under a module-private runs dir (trained once for the module)."""
    root = tmp_path_factory.mktemp("scorer-module")
    runs = root / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLSE_CACHE", str(root / "cache"))
        mp.setenv("MLSE_RUNS", str(runs))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("MLSE_DEVICE", "cpu")
        s1 = train_stage1(
            str(tiny_bert),
            out=runs / S1_NAME,
            pairs=S1_PAIRS,
            max_pairs=30,
            data_dir=data_dir,
            probe=False,
            max_epochs=3,
        )
        s2 = train_stage2(runs / S1_NAME, out=runs / S2_NAME, pairs=["en-de"], data_dir=data_dir, max_epochs=2)
    return SimpleNamespace(s1=s1, s2=s2, runs=runs, s1_dir=runs / S1_NAME, s2_dir=runs / S2_NAME)


def _manifest(folder: Path) -> dict:
    return json.loads((folder / SCORER_FILE).read_text())


def _texts(data_dir) -> list[str]:
    from mlse.data import load_sts

    ds = load_sts("en-de", "test", data_dir)
    return [*ds.s1[:20], *ds.s2[:20]]


# -- training and the run folder ------------------------------------------------------------------------------------


def test_training_saves_run_folders(trained, tiny_bert):
    assert sorted(p.name for p in trained.runs.iterdir()) == [S1_NAME, S2_NAME]
    assert {p.name for p in trained.s1_dir.iterdir()} == {SCORER_FILE, "stage1.safetensors", "stage1.json"}
    assert {p.name for p in trained.s2_dir.iterdir()} == {
        SCORER_FILE,
        "stage1.safetensors",
        "stage1.json",
        "stage2.safetensors",
        "stage2.json",
    }
    assert trained.s1.name == S1_NAME and trained.s2.name == S2_NAME
    assert trained.s1.stage2 is None and trained.s2.stage1 is not None and trained.s2.stage2 is not None
    # Stage 2 trained on the saved Stage-1 head: same weights
    X = np.random.default_rng(0).normal(size=(4, 32)).astype(np.float32)
    np.testing.assert_array_equal(trained.s2.stage1.transform(X), trained.s1.stage1.transform(X))
    assert trained.s1.stage1.config.max_epochs == 3 and len(trained.s1.stage1.history_) <= 3
    assert len(trained.s2.stage2.history_) <= 3  # epoch 0 + at most 2


def test_manifest_records_backbone_heads_data_and_metrics(trained, tiny_bert, data_dir):
    m1, m2 = _manifest(trained.s1_dir), _manifest(trained.s2_dir)
    for m, name in ((m1, S1_NAME), (m2, S2_NAME)):
        assert m["format"] == "mlse-scorer/1" and m["name"] == name
        assert m["backbone"] == str(tiny_bert)
        assert m["backbone_identity"] == trained.s1.backbone.identity
        assert m["backbone_identity"].startswith(str(tiny_bert) + ":")
    assert m1["heads"] == ["stage1"] and m2["heads"] == ["stage1", "stage2"]

    # data hashes: sha256 hex of each file read, Tatoeba for Stage 1, plus STS train and dev for Stage 2
    assert m1["data"] and all(SHA256.match(h) for h in m1["data"].values())
    assert any("deu-eng" in p for p in m1["data"]) and any("eng-fra" in p for p in m1["data"])
    path, digest = next(iter(m1["data"].items()))  # a portable path: data:<path in the data directory>
    assert path.startswith("data:") and m1["data_identity"] == data_identity(m1["data"])
    assert hashlib.sha256(resolve_record_path(path, data_dir).read_bytes()).hexdigest() == digest
    assert set(m1["data"]) < set(m2["data"]) and all(SHA256.match(h) for h in m2["data"].values())
    sts_files = [p for p in m2["data"] if "stsb" in p]
    assert any(p.endswith("-train.csv") for p in sts_files) and any(p.endswith("-dev.csv") for p in sts_files)

    # probe=False: no language probe
    assert set(m1["metrics"]) == {"stage1_dev_loss", "stage1_best_epoch", "stage1_epochs", "stage1_stopped"}
    metrics = m1["metrics"]
    assert metrics["stage1_stopped"] is False and metrics["stage1_epochs"] >= metrics["stage1_best_epoch"]
    assert np.isfinite(m1["metrics"]["stage1_dev_loss"]) and 1 <= m1["metrics"]["stage1_best_epoch"] <= 3
    assert m2["metrics"]["stage1_dev_loss"] == m1["metrics"]["stage1_dev_loss"]
    assert -100 <= m2["metrics"]["stage2_dev_pearson"] <= 100 and 0 <= m2["metrics"]["stage2_best_epoch"] <= 2
    assert m2["training"]["stage1"] == m1["training"]["stage1"]
    assert m2["training"]["stage2"]["pairs"] == ["en-de"] and m2["training"]["stage2"]["n_train"] > 1000
    assert m2["stage1_run"] == portable_path(trained.s1_dir)  # never an absolute path


def test_stage1_data_is_contamination_filtered(trained, data_dir):
    pairs = _manifest(trained.s1_dir)["training"]["stage1"]["pairs"]
    assert set(pairs) == set(S1_PAIRS)
    for info in pairs.values():
        assert info["contaminated_dropped"] > 0 and info["used"] == 30
        assert info["available"] > info["contaminated_dropped"] + 30

    # every sentence Stage 1 would train on (no cap), as given to the encoder
    banned = evaluation_sentences(data_dir)
    fake = FakeEncoder()
    data = stage1_data(fake, pairs=S1_PAIRS, max_pairs=None, data_dir=data_dir)
    assert len(fake.seen) > 1000
    leaked = [t for t in fake.seen if normalize_sentence(t) in banned]
    assert leaked == []
    for info in data.info["pairs"].values():
        assert info["used"] + info["contaminated_dropped"] == info["available"]
        assert info["contaminated_dropped"] > 0
    assert data.X_a.shape == data.X_b.shape == (data.info["n_pairs"], 8)


# -- reloading --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", [S1_NAME, S2_NAME])
def test_reloaded_scorer_encodes_identically(trained, data_dir, monkeypatch, run):
    in_memory = trained.s1 if run == S1_NAME else trained.s2
    folder = trained.runs / run
    texts = _texts(data_dir)
    expected = in_memory.encode(texts)
    assert expected.shape == (len(texts), 32)
    # the heads change the embedding (otherwise this test would not see a lost head)
    assert not np.allclose(expected, in_memory.backbone.encode(texts), atol=1e-3)

    by_folder = load_model(str(folder))
    assert isinstance(by_folder, Scorer) and by_folder.name == str(folder)  # named as given, like any local folder
    assert [k for k, _ in by_folder.heads] == [k for k, _ in in_memory.heads]
    assert by_folder.identity == in_memory.identity
    np.testing.assert_allclose(by_folder.encode(texts), expected, atol=1e-6)

    monkeypatch.setenv("MLSE_RUNS", str(trained.runs))
    by_name = load_model(run)
    assert isinstance(by_name, Scorer) and by_name.name == run
    np.testing.assert_allclose(by_name.encode(texts), expected, atol=1e-6)

    # same backbone object: the heads alone are restored bit for bit
    same_backbone = Scorer.load(folder, backbone=in_memory.backbone)
    np.testing.assert_array_equal(same_backbone.encode(texts), expected)
    for part, value in in_memory.encode_parts(texts).items():
        np.testing.assert_array_equal(same_backbone.encode_parts(texts)[part], value)


def test_end_to_end_trains_saves_reloads_and_scores_identically(trained, data_dir):
    before = run_sts(trained.s2, pairs=["en-de"], data_dir=data_dir, n_boot=0)
    reloaded = load_model(str(trained.s2_dir))
    after = run_sts(reloaded, pairs=["en-de"], data_dir=data_dir, n_boot=0)
    assert before.model_identity == after.model_identity
    pred_before, pred_after = before.extras["predictions"]["en-de"], after.extras["predictions"]["en-de"]
    assert len(pred_before) > 1000
    np.testing.assert_allclose(pred_after, pred_before, atol=1e-6)
    for metric in ("pearson", "spearman"):
        assert np.isfinite(before.scores["en-de"][metric])
        # predictions equal within 1e-6 reorder near-ties of this tiny model's scores: ranks move by ~3e-4
        assert after.scores["en-de"][metric] == pytest.approx(before.scores["en-de"][metric], abs=2e-3)
    exact = run_sts(
        Scorer.load(trained.s2_dir, backbone=trained.s2.backbone), pairs=["en-de"], data_dir=data_dir, n_boot=0
    )
    np.testing.assert_array_equal(exact.extras["predictions"]["en-de"], pred_before)
    assert exact.scores["en-de"]["pearson"] == before.scores["en-de"]["pearson"]
    # and the calibrated 0-5 score survives the round trip
    cos = np.linspace(-1, 1, 11)
    np.testing.assert_array_equal(reloaded.calibrate(cos), trained.s2.calibrate(cos))
    assert trained.s1.calibrate(cos) is None


# -- backbone mismatch ------------------------------------------------------------------------------------------------


def test_loading_with_another_backbone_raises(trained, tiny_xlmr):
    other = load_encoder(str(tiny_xlmr))
    with pytest.raises(BackboneMismatchError) as info:
        Scorer.load(trained.s2_dir, backbone=other)
    msg = str(info.value)
    assert isinstance(info.value, MlseError)
    assert str(trained.s2_dir) in msg and trained.s1.backbone.identity in msg and other.identity in msg
    assert "retrain" in msg and "\n" not in msg


def test_cli_eval_of_run_with_edited_backbone_identity_exits_2(trained, tmp_path, data_dir, capsys):
    folder = tmp_path / "edited"
    shutil.copytree(trained.s2_dir, folder)
    manifest = _manifest(folder)
    manifest["backbone_identity"] = manifest["backbone_identity"].rsplit(":", 1)[0] + ":0000000000000000"
    (folder / SCORER_FILE).write_text(json.dumps(manifest))
    capsys.readouterr()
    code = main(
        ["-q", "eval", "--model", str(folder), "--task", "sts", "--pairs", "en-de", "--data-dir", str(data_dir)]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "0000000000000000" in lines[0] and "retrain" in lines[0]


# -- saving -----------------------------------------------------------------------------------------------------------


def _listing(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_save_is_atomic_and_replaces_an_existing_run(trained, tmp_path):
    parent = tmp_path / "runs"
    parent.mkdir(mode=0o755)
    parent.chmod(0o755)
    folder = parent / "run"
    assert trained.s2.save(folder) == folder
    assert _listing(parent) == ["run"]  # no temporary or hidden siblings left
    assert folder.stat().st_mode & 0o777 == 0o755  # not the 0700 of the temporary folder it was written to
    assert _manifest(folder)["heads"] == ["stage1", "stage2"]

    trained.s1.save(folder)  # over the existing run: replaced, not merged
    assert _listing(parent) == ["run"]
    assert _manifest(folder)["heads"] == ["stage1"]
    assert not (folder / "stage2.safetensors").exists() and not (folder / "stage2.json").exists()

    # a save that fails half-way leaves the old run as it was and no temporary folder behind
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    class BrokenHead:
        def state(self):
            raise RuntimeError("disk on fire")

    broken = Scorer(trained.s1.backbone, stage1=trained.s1.stage1, stage2=BrokenHead())
    with pytest.raises(RuntimeError, match="disk on fire"):
        broken.save(folder)
    assert _listing(parent) == ["run"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_stage2_without_stage1_is_refused(trained):
    with pytest.raises(ValueError, match="Stage 1"):
        Scorer(trained.s1.backbone, stage2=trained.s2.stage2)


# -- CLI errors -------------------------------------------------------------------------------------------------------


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_cli_train_stage2_on_plain_backbone_exits_2(tiny_bert, tmp_path, data_dir, capsys):
    out = tmp_path / "never"
    code = main(["-q", "train", "stage2", "--stage1", str(tiny_bert), "--out", str(out), "--data-dir", str(data_dir)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "no Stage 1 head" in _one_error_line(err)
    assert not out.exists()


def test_cli_train_stage1_on_a_scorer_exits_2(trained, tmp_path, data_dir, capsys):
    out = tmp_path / "never"
    code = main(
        [
            "-q",
            "train",
            "stage1",
            "--backbone",
            str(trained.s1_dir),
            "--out",
            str(out),
            "--no-probe",
            "--data-dir",
            str(data_dir),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert "already has heads" in _one_error_line(err)
    assert not out.exists()
