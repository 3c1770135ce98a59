"""The cosine -> 0-5 isotonic map (mlse.calibration.isotonic) and the backbone calibrations built on it (fit on the
real STS dev subset with the tiny BERT, save, reload, identity check, use in the app and the CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.calibration import backbone as bc
from mlse.calibration.isotonic import IsotonicMap
from mlse.cli.main import main
from mlse.encoders.identity import weights_identity
from mlse.encoders.load import load_encoder
from mlse.errors import MlseError
from tests.fake_encoder import FakeEncoder

PAIRS = ("en-en", "en-de")
ROWS = 60


# -- the map --------------------------------------------------------------------------------------------------------
def test_fit_is_monotone_clipped_and_compressed_without_changing_the_function():
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(0)
    cos = rng.uniform(-0.2, 1.0, 400)
    gold = np.clip(5 * cos + rng.normal(0, 1.5, 400), -1, 6)  # noisy, partly outside 0-5
    mapping = IsotonicMap.fit(cos, gold)
    grid = np.linspace(-1, 1, 2001)
    scores = mapping(grid)
    assert np.all(np.diff(scores) >= 0) and scores.min() >= 0 and scores.max() <= 5
    assert len(mapping.x) < 200  # flat steps keep only their ends
    order = np.argsort(cos)
    full = np.clip(isotonic_regression(gold[order]).x, 0, 5)  # the uncompressed fit, one knot per pair
    np.testing.assert_allclose(mapping(grid), np.interp(grid, cos[order], full), atol=1e-9)


def test_tied_cosines_get_one_knot_with_their_mean_gold():
    mapping = IsotonicMap.fit(np.array([0.1, 0.5, 0.5, 0.9]), np.array([1.0, 2.0, 4.0, 4.5]))
    assert list(mapping.x) == [0.1, 0.5, 0.9] and mapping(0.5) == pytest.approx(3.0)


def test_round_trip_and_bad_knots():
    mapping = IsotonicMap.fit(np.array([0.0, 0.4, 0.8]), np.array([0.5, 2.5, 4.0]))
    assert IsotonicMap.from_dict(json.loads(json.dumps(mapping.to_dict()))) == mapping
    with pytest.raises(MlseError, match="malformed"):
        IsotonicMap.from_dict({"x": [0.1]})
    with pytest.raises(MlseError, match="as many x as y"):
        IsotonicMap((0.1, 0.2), (1.0,))


# -- a backbone's calibration ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(tiny_bert, data_dir, tmp_path_factory):
    """The tiny BERT calibrated on the first rows of en-en and en-de dev, saved to a folder."""
    out = tmp_path_factory.mktemp("calibration")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp("calibration-cache")))
        encoder = load_encoder(str(tiny_bert))
        calibration, report = bc.fit_calibration(encoder, data_dir=data_dir, pairs=PAIRS, max_rows=ROWS)
        paths = bc.save_calibration(calibration, report, out, command="test")
    return calibration, report, paths, weights_identity(encoder.identity)


def test_fit_save_reload(fitted, tiny_bert):
    calibration, report, (path, manifest_path), identity = fitted
    again = bc.read_calibration(path)
    assert again.mapping == calibration.mapping and again.weights_identity == identity == calibration.weights_identity
    scores = again(np.linspace(-1, 1, 501))
    assert np.all(np.diff(scores) >= 0) and 0 <= scores.min() and scores.max() <= 5
    manifest = json.loads(manifest_path.read_text())
    assert manifest["weights_identity"] == identity and manifest["pairs"] == list(PAIRS)
    assert manifest["dev"]["n"] == manifest["test"]["n"] == 2 * ROWS
    assert set(manifest["dev"]["per_pair_spearman_calibrated"]) == set(PAIRS)
    assert -100 <= manifest["test"]["spearman_calibrated_pooled"] <= 100
    assert len(manifest["data"]) == 4 and all(len(h) == 64 for h in manifest["data"].values())  # de/en x dev/test
    assert any(name.endswith("stsb-de-dev.csv") for name in manifest["data"])


def test_lookup_uses_a_match_and_reports_a_mismatch(fitted, monkeypatch, tmp_path):
    calibration, report, _, identity = fitted
    monkeypatch.setattr(bc, "SHIPPED_DIR", tmp_path / "shipped")
    same = FakeEncoder(identity=identity, name="tiny")
    bc.save_calibration(
        bc.BackboneCalibration("tiny", identity, calibration.mapping), report, tmp_path / "shipped", command="test"
    )
    wrapped, note = bc.with_calibration(same)
    assert note == "" and isinstance(wrapped, bc.CalibratedEncoder)
    assert wrapped.calibrate(np.array([0.3])) == pytest.approx(calibration(np.array([0.3])))
    assert wrapped.identity == identity and wrapped.calls == 0  # everything else is the wrapped encoder's

    other = FakeEncoder(identity="tiny:0000000000000000", name="tiny")
    unwrapped, note = bc.with_calibration(other)
    assert unwrapped is other and "fitted on " + identity in note and "calibrate --model tiny" in note

    onnx = FakeEncoder(identity=f"{identity}|backend=onnx-int8-v2.abc", name="tiny")  # same weights, other backend
    assert isinstance(bc.with_calibration(onnx)[0], bc.CalibratedEncoder)


def test_run_local_calibration_wins_over_the_shipped_one(fitted, monkeypatch, tmp_path):
    calibration, report, _, identity = fitted
    monkeypatch.setattr(bc, "SHIPPED_DIR", tmp_path / "shipped")
    flat = IsotonicMap((0.0, 1.0), (2.0, 2.0))
    bc.save_calibration(
        bc.BackboneCalibration("tiny", identity, calibration.mapping), report, tmp_path / "shipped", command="test"
    )
    bc.save_calibration(bc.BackboneCalibration("tiny", identity, flat), report, bc.local_dir(), command="test")
    found, _ = bc.find_calibration(FakeEncoder(identity=identity, name="tiny"))
    assert found.mapping == flat and found.source.startswith(str(bc.local_dir()))


def test_shipped_minilm_calibration_is_well_formed():
    path = bc.calibration_file("minilm-en", bc.SHIPPED_DIR)
    calibration = bc.read_calibration(path)
    manifest = json.loads(path.with_name("minilm-en" + bc.MANIFEST_SUFFIX).read_text())
    assert manifest["weights_identity"] == calibration.weights_identity
    rows = manifest["max_rows"]  # the committed sample may use the first rows of each pair (said in its command)
    assert manifest["dev"]["n"] == 13 * rows if rows else manifest["dev"]["n"] > 13 * 1000
    assert (f"--max-rows {rows}" in manifest["command"]) == (rows is not None)
    assert manifest["pairs"] == list(bc.CALIBRATION_PAIRS)
    assert manifest["command"].startswith("python -m mlse calibrate --model minilm-en")
    assert np.all(np.diff(calibration.mapping.y) >= 0) and calibration(1.0) > calibration(0.0)


# -- in the app and the CLI -----------------------------------------------------------------------------------------
def test_app_shows_a_backbones_calibrated_score(fitted, tiny_bert, monkeypatch):
    from mlse.serving.app_state import AppState
    from mlse.ui.score_tab import score_pair

    calibration, report, _, identity = fitted
    bc.save_calibration(
        bc.BackboneCalibration(str(tiny_bert), identity, calibration.mapping), report, bc.local_dir(), command="test"
    )
    state = AppState()
    table, status = score_pair(state, "A man is playing a flute.", "A man plays the flute.", [str(tiny_bert)])
    # the table writes the cosine with 3 decimals, and the tiny model's map is steep: recompute from the exact cosine
    emb = state.encoder(str(tiny_bert)).encode(["A man is playing a flute.", "A man plays the flute."])
    cosine, score = float(emb[0] @ emb[1]), float(table["calibrated 0-5"][0])
    assert float(table["cosine"][0]) == pytest.approx(cosine, abs=5e-4 + 1e-9)
    assert score == pytest.approx(float(calibration(np.array([cosine]))[0]), abs=0.006)
    assert "isotonic" in status and not state.calibration_notes


def test_cli_calibrate_writes_both_files(tiny_bert, data_dir, tmp_path, capsys):
    code = main(
        [
            "-q",
            "calibrate",
            "--model",
            str(tiny_bert),
            "--pairs",
            "en-en,en-fr",
            "--max-rows",
            "30",
            "--data-dir",
            str(data_dir),
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 2 and any(n.endswith(".manifest.json") for n in written)
    manifest = json.loads(next(tmp_path.glob("*.manifest.json")).read_text())
    assert "--max-rows 30" in manifest["command"] and manifest["pairs"] == ["en-en", "en-fr"]
    assert "test: 60 pairs" in capsys.readouterr().out


def test_cli_calibrate_refuses_bad_input(tiny_bert, data_dir, capsys):
    assert main(["calibrate", "--model", str(tiny_bert), "--max-rows", "1"]) == 2
    assert main(["calibrate", "--model", str(tiny_bert), "--pairs", "en-xx", "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err
    assert "--max-rows must be at least 2" in err and "'xx'" in err
