"""The calibrations shipped under assets/models/calibration still match the code that loads their backbones.

A calibration is applied only to the weights it was fitted on. So if a change to the e5 converter, the USE port or a
package pin changed a default backbone's weights identity, its shipped map would silently stop being used; this test
fails instead. It also checks the app's promise on the real defaults: on the calibrated 0-5 scale, both
multilingual models put a translation far above an unrelated sentence.
"""

from __future__ import annotations

import json

import pytest

from mlse.calibration.backbone import SHIPPED_DIR, calibration_file, find_calibration
from mlse.encoders.catalogue import DEFAULT_MODELS
from mlse.encoders.load import load_encoder

FLUTE = "A man is playing a flute."
TRANSLATION = "Ein Mann spielt Flöte."
UNRELATED = "Eine Frau schneidet eine Zwiebel."


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_every_default_ships_a_calibration_with_its_manifest(model):
    path = calibration_file(model, SHIPPED_DIR)
    manifest = json.loads(path.with_name(f"{model}.manifest.json").read_text())
    assert path.is_file()
    assert manifest["command"].startswith("python -m mlse calibrate")
    assert manifest["data"] and all(len(digest) == 64 for digest in manifest["data"].values())


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_shipped_calibration_matches_the_backbone_loaded_here(model):
    encoder = load_encoder(model, cache=False)
    calibration, note = find_calibration(encoder)
    assert calibration is not None, note or f"no shipped calibration for {model}"


@pytest.mark.parametrize("model", ["me5-small", "muse"])
def test_translation_scores_far_above_an_unrelated_sentence(model):
    from mlse.serving.app_state import AppState
    from mlse.ui.score_tab import score_pair

    state = AppState()
    table, status = score_pair(state, FLUTE, TRANSLATION, [model])
    translation = float(table["calibrated 0-5"][0])
    table, _ = score_pair(state, FLUTE, UNRELATED, [model])
    unrelated = float(table["calibrated 0-5"][0])
    assert translation >= 3.0 and unrelated <= 1.5 and translation - unrelated >= 2.0, (translation, unrelated)
