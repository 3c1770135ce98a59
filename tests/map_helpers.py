"""Shared by the map tests: a state that serves fixed models by name, and a fake scorer with a Stage-1 head."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from mlse.errors import ModelNotFoundError
from tests.fake_encoder import FakeEncoder


@dataclass
class StubState:
    """Serves fixed models by name, like AppState.encoder."""

    models: dict
    data_dir: object = None

    def encoder(self, name):
        if name not in self.models:
            raise ModelNotFoundError(f"unknown model {name!r}")
        return self.models[name]


@pytest.fixture(scope="module")
def fake_scorer():
    """A Scorer over the fake encoder with a (briefly) trained Stage-1 head: three spaces, no real model."""
    from mlse.heads.scorer import Scorer
    from mlse.heads.stage1 import Stage1Head

    rng = np.random.default_rng(0)
    X_a, X_b = rng.normal(size=(2, 40, 8)).astype(np.float32)  # [40, 8] each
    head = Stage1Head(max_epochs=2).fit(X_a, X_b, ["eng"] * 40, ["deu"] * 40)
    return Scorer(FakeEncoder(), stage1=head, name="fake+s1")
