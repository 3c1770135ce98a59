"""The loaded models of a long-running process, by name: loaded on first use, within a memory budget, shared.

Loads through :func:`mlse.models.load_model`, attaching the 0-5 calibration only when fitted on the same weights
(else noted in ``calibration_notes``). A scorer reuses the pool's backbone; past ``max_memory`` the least recently used
are evicted (:class:`mlse.serving.encoder_pool.EncoderPool`); a run replaced on disk is reloaded (entries are stamped
with their folder's mtime). Names are resolved once until :meth:`ModelPool.forget_names`, since resolving lists the
registry and runs. Constructing a pool reads no file and starts no thread.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from mlse.calibration.backbone import with_calibration
from mlse.encoders.catalogue import resolve_model
from mlse.encoders.identity import DEFAULT_BACKEND, check_backend
from mlse.encoders.registry import ModelSpec
from mlse.heads.scorer import backbone_name
from mlse.models import load_model
from mlse.runs.folders import SCORER_FILE
from mlse.serving import gc_freeze
from mlse.serving.encoder_pool import (
    DEFAULT_MAX_MEMORY,
    EncoderPool,
    estimate_resident_bytes,
    estimate_spec_bytes,
    parse_memory_size,
)


@dataclass
class ModelPool:
    backend: str = DEFAULT_BACKEND  # torch, onnx or onnx-int8: how every model of the pool computes
    # Budget for the loaded models' weights: "1.5GB", "800MB", bytes (mlse.serving.encoder_pool.parse_memory_size).
    max_memory: str | int = DEFAULT_MAX_MEMORY
    calibration_notes: dict = field(default_factory=dict)  # model name -> why its calibration file is not used
    # (source, location) -> model, least recently used evicted first
    _entries: EncoderPool | None = field(default=None, init=False, repr=False)
    _load_locks: dict = field(default_factory=dict, init=False, repr=False)  # (source, location) -> Lock
    _specs: dict = field(default_factory=dict, init=False, repr=False)  # name -> ModelSpec, until forget_names()
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        check_backend(self.backend)
        self._entries = EncoderPool(parse_memory_size(self.max_memory, what="--max-memory (MLSE_MAX_MEMORY)"))

    def get(self, name: str):
        """The model called ``name``, loaded on first use; ModelNotFoundError for an unknown name."""
        spec = self._resolve(name)
        key, stamp = (spec.source, spec.location), _stamp(spec)
        with self._lock:
            lock = self._load_locks.setdefault(key, threading.Lock())
        with lock:  # two requests for a new model must not load it twice; other models load meanwhile
            cached = self._entries.get(key, stamp)
            if cached is not None:
                return cached
            backbone = backbone_key = None
            if spec.source == "scorer":
                recorded = backbone_name(Path(spec.location))
                backbone = self.get(recorded)  # shared with every other user (its own entry)
                backbone_spec = self._resolve(recorded)
                backbone_key = (backbone_spec.source, backbone_spec.location)
            self._entries.make_room(estimate_spec_bytes(spec, backend=self.backend), keep={backbone_key})
            model = self._load(spec, name, backbone)
            size = estimate_resident_bytes(model, backend=self.backend)
            # stamped after loading: a folder the load built (a conversion) has an mtime only now
            self._entries.put(key, model, size, stamp=_stamp(spec), depends_on=backbone_key)
            gc_freeze.freeze_survivors()  # the model's objects live as long as it does: out of the collector's scans
            return model

    def forget_names(self) -> None:
        """Resolve names afresh from now on (after a rescan: a run may have appeared or gone)."""
        with self._lock:
            self._specs = {}

    def loaded(self) -> list[tuple[str, str]]:
        """(source, location) of the loaded models, least recently used first (for tests and diagnostics)."""
        return self._entries.keys()

    @property
    def loaded_bytes(self) -> int:
        return self._entries.total_bytes

    def _resolve(self, name: str) -> ModelSpec:
        """``resolve_model(name)``, remembered until :meth:`forget_names`. A run replaced on disk keeps its spec and
        is caught by its stamp."""
        with self._lock:
            spec = self._specs.get(name)
        if spec is None:
            spec = resolve_model(name)
            with self._lock:
                self._specs[name] = spec
        return spec

    def _load(self, spec: ModelSpec, name: str, backbone=None):
        """A plain model (with its calibration when one fits its weights), or a scorer on ``backbone``."""
        if spec.source == "scorer":
            return load_model(name, backbone=backbone)  # the heads around the backbone the pool already holds
        model, note = with_calibration(load_model(name, backend=self.backend, calibrated=False))
        if note:
            self.calibration_notes[name] = note
        else:
            self.calibration_notes.pop(name, None)
        return model


def _stamp(spec: ModelSpec) -> tuple[str, int]:
    """Changes when a run folder is replaced on disk (runs are written aside and renamed into place)."""
    path = Path(spec.location)
    target = path / SCORER_FILE if spec.source == "scorer" else path
    try:
        return str(path), os.stat(target).st_mtime_ns
    except OSError:
        return str(path), 0
