"""The app's backend option: every model (and a scorer's backbone) runs on the backend the app was started with."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.encoders.load import load_encoder
from mlse.errors import MlseError
from mlse.heads.scorer import Scorer
from mlse.heads.stage1 import Stage1Head
from mlse.serving.app_state import AppState
from mlse.ui.score_tab import score_pair


def test_an_unknown_backend_stops_the_app_at_start(monkeypatch):
    with pytest.raises(MlseError, match="onnx-int8"):
        AppState(backend="tensorrt")
    monkeypatch.setenv("MLSE_BACKEND", "fp8")
    with pytest.raises(MlseError, match="unknown backend"):
        AppState()


def test_models_and_scorer_backbones_load_on_the_apps_backend(tiny_bert, monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    backbone = load_encoder(str(tiny_bert))
    rng = np.random.default_rng(0)
    X_a, X_b = rng.normal(size=(2, 40, 32)).astype(np.float32)  # [40, 32] each
    Scorer(backbone, stage1=Stage1Head(max_epochs=1).fit(X_a, X_b, ["en"] * 40, ["de"] * 40)).save(tmp_path / "s1")

    torch_state, onnx_state = AppState(), AppState(backend="onnx")
    assert "backend=onnx" in onnx_state.encoder(str(tiny_bert)).identity
    assert "backend" not in torch_state.encoder(str(tiny_bert)).identity
    scorer = onnx_state.encoder("runs/s1")
    assert scorer.backbone is onnx_state.encoder(str(tiny_bert))  # shared, and on onnx

    pair = ("A man is playing a flute.", "Ein Mann spielt Flöte.")
    tables = [score_pair(s, *pair, [str(tiny_bert), "runs/s1"], "en", "de", None)[0] for s in (torch_state, onnx_state)]
    assert np.allclose(tables[0]["cosine"].astype(float), tables[1]["cosine"].astype(float), atol=1e-3)
