"""State shared by the app's tabs: encoders loaded once, on first use, through the embedding cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mlse.encoders import DEFAULT_MODEL, available_models, load_encoder


@dataclass
class AppState:
    default_model: str = DEFAULT_MODEL
    _encoders: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def model_names(self) -> list[str]:
        """Models that load here without the hub (the app never blocks on a download)."""
        return [m.name for m in available_models() if m.status.startswith("available")]

    def encoder(self, name: str):
        with self._lock:  # two requests for a new model must not load it twice
            if name not in self._encoders:
                self._encoders[name] = load_encoder(name)
            return self._encoders[name]
