"""The loaded models of a long-running process, by name: loaded on first use, within a memory budget, shared.

:class:`ModelPool` is what the app's tabs and the JSON route score with, and what a script serving many models can
use the same way::

    pool = ModelPool(backend="onnx", max_memory="800MB")
    pool.get("me5-small").encode(["..."])           # loaded once, through the embedding cache, calibrated

* **Loading** goes through :func:`mlse.models.load_model`. A plain model gets its cosine -> 0-5 calibration attached
  when one was fitted on its weights (:func:`mlse.calibration.backbone.with_calibration`); a calibration of other
  weights is noted in ``calibration_notes`` and not used.
* **Backbone sharing.** A scorer (backbone + trained heads) reuses the backbone the pool holds instead of loading its
  own copy; the backbone is counted once and evicting it evicts the scorers built on it.
* **Memory budget.** When the estimated size of the loaded models would pass ``max_memory``, the least recently used
  are evicted (:class:`mlse.serving.encoder_pool.EncoderPool`) and reloaded when next asked for. A request still
  using an evicted model keeps it alive until it ends; the pool just stops holding it.
* **Replaced runs.** A run folder replaced on disk (retrained under the same name) is reloaded: each entry is stamped
  with its folder's modification time.

Names are resolved once until :meth:`ModelPool.forget_names` (resolving lists the registry and the runs, a few ms a
request would otherwise pay per model). Constructing a pool reads no file and starts no thread.
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
            # The stamp after loading: a folder built by the load (me5-small's conversion) has one only now, and
            # stamping it "missing" would reload the model on the next request.
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
