"""State shared by the app's tabs: the models offered here and the loaded encoders.

The model list comes from :mod:`mlse.encoders.catalogue`, rescanned after :data:`RESCAN_SECONDS` (a run trained
meanwhile appears without a restart); each change bumps ``version`` for :mod:`mlse.ui.model_pickers`. Uncached hub
models are listed only while the hub answers (:mod:`mlse.data.hub_probe`) and, like partial runs, never ticked by
default. Models load on first use through a :class:`mlse.serving.model_pool.ModelPool` within ``max_memory``.
Constructing an :class:`AppState` touches neither disk nor network; :meth:`AppState.start` does the start-up work.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from mlse.data.hub_probe import hub_reachable
from mlse.dirs import runs_dir
from mlse.encoders.catalogue import (
    DEFAULT_MODELS,
    MAX_DEFAULT_MODELS,
    STAGE1,
    STAGE12,
    ModelInfo,
    default_selection,
    describe,
    offered_models,
    resolve_model,
)
from mlse.encoders.identity import check_backend
from mlse.errors import MlseError
from mlse.runs.health import recover_runs, sweep_interrupted
from mlse.runs.shipped import PREFIX as SHIPPED_PREFIX
from mlse.serving.batching import MicroBatcher
from mlse.serving.encoder_pool import DEFAULT_MAX_MEMORY
from mlse.serving.model_pool import ModelPool

RESCAN_SECONDS = 30.0


@dataclass
class AppState:
    # The offline defaults in order; the app ticks those that load here and opens on the first (preferred_model).
    default_models: tuple[str, ...] = DEFAULT_MODELS
    data_dir: str | None = None  # None: MLSE_DATA, else ../shared/data (mlse.data's default resolution)
    # How every model computes: torch, onnx or onnx-int8 (mlse.encoders.BACKENDS); MLSE_BACKEND sets the default.
    backend: str = field(default_factory=lambda: os.environ.get("MLSE_BACKEND", "torch"))
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why) of runs that do not load here
    jobs: object = None  # the fine-tune tab's mlse.train.runner.JobRunner, created on first use (one per app)
    # Budget for the loaded encoders' weights: "1.5GB", "800MB", bytes (mlse.serving.encoder_pool.parse_memory_size).
    max_memory: str | int = field(default_factory=lambda: os.environ.get("MLSE_MAX_MEMORY", DEFAULT_MAX_MEMORY))
    version: int = 0  # bumped whenever a rescan finds a different model list
    # Concurrent requests for one model share one encoder call (mlse.serving.batching).
    batcher: MicroBatcher = field(default_factory=MicroBatcher)
    pool: ModelPool | None = None  # the loaded models (made from backend and max_memory)
    _models: list[ModelInfo] | None = None
    _scanned_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        """Checks its settings (a typo in MLSE_BACKEND or --max-memory stops the app at start); reads no file."""
        check_backend(self.backend)
        if self.pool is None:
            self.pool = ModelPool(self.backend, self.max_memory)

    def start(self) -> AppState:
        """What a starting app does before its first scan: mark the runs whose jobs died with an earlier start of the
        app interrupted (then ``recover_runs`` puts back what they were replacing) and start the first hub probe."""
        sweep_interrupted(runs_dir())
        recover_runs(runs_dir())
        hub_reachable()
        return self

    # -- the model list ---------------------------------------------------------------------------------------------
    def refresh(self) -> list[ModelInfo]:
        """Rescan the catalogue now (:func:`mlse.encoders.catalogue.offered_models`): the models that load here, plus
        hub models while the hub answers (not known yet counts as unreachable: never block on the network)."""
        found, skipped = offered_models(hub_reachable(), self.default_models)
        with self._lock:
            if self._models is not None and found != self._models:
                self.version += 1
            self._models, self.skipped, self._scanned_at = found, skipped, time.monotonic()
        self.pool.forget_names()
        return list(found)

    def models(self) -> list[ModelInfo]:
        """The models that load here, backbones first, then +Stage 1, +Stage 1+2, students (rescanned when stale)."""
        with self._lock:
            fresh = self._models is not None and time.monotonic() - self._scanned_at < RESCAN_SECONDS
            models = self._models
        return list(models) if fresh else self.refresh()

    def model_names(self) -> list[str]:
        return [m.name for m in self.models()]

    def model_kind(self, name: str) -> str:
        """The kind of a listed model, or of any loadable name (a folder path, say); "?" for a name that is neither."""
        for m in self.models():
            if m.name == name:
                return m.kind
        try:
            return describe(resolve_model(name)).kind
        except MlseError:
            return "?"

    def loaded_defaults(self) -> list[str]:
        """The default models that load here, in order (no download: hub models not cached are not defaults)."""
        offline = {m.name for m in self.models() if not m.needs_download}
        return [name for name in self.default_models if name in offline]

    def preferred_model(self) -> str | None:
        """The model single-model views open on: the first default that loads here, else the first model listed."""
        return (self.loaded_defaults() or self.model_names() or [None])[0]

    def default_selection(self, limit: int = MAX_DEFAULT_MODELS) -> tuple[list[str], str]:
        """Models ticked by default + a note (:func:`mlse.encoders.catalogue.default_selection`)."""
        return default_selection(self.models(), self.default_models, limit)

    # -- loading ----------------------------------------------------------------------------------------------------
    def encoder(self, name: str):
        """The model called ``name``, loaded on first use by the pool; ModelNotFoundError for an unknown name."""
        return self.pool.get(name)

    @property
    def calibration_notes(self) -> dict:
        return self.pool.calibration_notes


STAGE1_KINDS = (STAGE1, STAGE12)  # the kinds of scorer with a Stage-1 head, the one without Stage 2 preferred


def map_opening(models, preferred: str | None, prefix: str = SHIPPED_PREFIX) -> str | None:
    """The model the map tab opens on: its point needs a Stage-1 head, so the shipped scorer (name starting with
    ``prefix``) on ``preferred``, ``+Stage 1`` before ``+Stage 1+2``; else ``preferred``. ``models``:
    :class:`ModelInfo`-like (``name``, ``kind``, ``backbone``, ``needs_download``)."""
    if preferred is None:
        return None
    heads = [
        m
        for m in models
        if m.name.startswith(prefix)
        and m.backbone == preferred
        and m.kind in STAGE1_KINDS
        and not getattr(m, "needs_download", False)
    ]
    if heads:
        return min(heads, key=lambda m: (STAGE1_KINDS.index(m.kind), m.name)).name
    return preferred
