"""State shared by the app's tabs: which models load here, what kind each is, and the loaded encoders.

The model list is scanned from the registry and the runs directory and kept for :data:`RESCAN_SECONDS` (so a run
trained while the app is up appears without a restart; ``refresh()`` rescans at once). Every change of the list bumps
``version``, which the app's model pickers compare against to update themselves (see :mod:`mlse.ui.model_pickers`).
Hub models that are not in the local HF cache are listed only while the hub answers (:mod:`mlse.hub`); they are never
ticked by default, since their first use downloads them. Encoders are loaded once, on
first use, through the embedding cache; a scorer reuses the already loaded backbone instead of loading its own copy,
and a run folder that was replaced on disk (retrained under the same name) is reloaded.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlse.encoders import DEFAULT_MODEL, ModelSpec, check_backend, list_runs, registry, resolve_model, spec_status
from mlse.errors import MlseError
from mlse.hub import hub_reachable
from mlse.run_health import partial_reason

BACKBONE, STAGE1, STAGE12, STUDENT = "backbone", "+Stage 1", "+Stage 1+2", "fine-tuned student"
KIND_ORDER = (BACKBONE, STAGE1, STAGE12, STUDENT)
RESCAN_SECONDS = 30.0
MAX_DEFAULT_MODELS = 8  # scoring is quick, but loading a dozen models on the first click is not


@dataclass(frozen=True)
class ModelInfo:
    """One model the app can use: its name (what load_encoder takes), kind, and for scorers the backbone."""

    name: str
    kind: str
    source: str
    location: str
    backbone: str | None = None
    needs_download: bool = False  # a hub model not in the local cache: its first use downloads it
    partial: str | None = None  # a run that ended early (stopped, or killed after a checkpoint): how far it got

    @property
    def label(self) -> str:
        return (f"{self.name} · {self.kind}" + (" (downloads on first use)" if self.needs_download else "")
                + (f" (partial: {self.partial})" if self.partial else ""))  # fmt: skip


@dataclass
class AppState:
    default_model: str = DEFAULT_MODEL
    data_dir: str | None = None  # None: MLSE_DATA, else ../shared/data (mlse.data's default resolution)
    # How every model computes: torch, onnx or onnx-int8 (mlse.encoders.BACKENDS); MLSE_BACKEND sets the default.
    backend: str = field(default_factory=lambda: os.environ.get("MLSE_BACKEND", "torch"))
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why) of runs that do not load here
    jobs: object = None  # the fine-tune tab's mlse.jobs.JobRunner, created on first use (one per app)
    version: int = 0  # bumped whenever a rescan finds a different model list
    _models: list[ModelInfo] | None = None
    _scanned_at: float = 0.0
    _encoders: dict = field(default_factory=dict)  # (source, location) -> (stamp, encoder)
    _load_locks: dict = field(default_factory=dict)  # (source, location) -> Lock
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        check_backend(self.backend)  # a typo in MLSE_BACKEND stops the app at start, with the choices named
        from mlse.encoders import runs_dir
        from mlse.run_health import recover_runs

        recover_runs(runs_dir())  # runs a killed job left aside come back before the first scan
        hub_reachable()  # start the first connectivity probe now, in the background, so the first rescan may use it

    # -- the model list ---------------------------------------------------------------------------------------------
    def refresh(self) -> list[ModelInfo]:
        """Rescan the registry and the runs directory now: models that load here, plus hub models while it answers."""
        found, skipped = [], []
        hub_answers = hub_reachable()  # None (not known yet) counts as unreachable: never block on the network
        for spec in [*registry().values(), *list_runs()]:
            if not spec_status(spec).startswith("available"):
                if spec.source == "hub" and hub_answers:
                    found.append(ModelInfo(spec.name, BACKBONE, spec.source, spec.location, needs_download=True))
                continue
            try:
                found.append(describe(spec))
            except MlseError as exc:
                skipped.append((spec.name, str(exc)))
        found.sort(key=lambda m: (KIND_ORDER.index(m.kind), m.needs_download, m.name))
        with self._lock:
            if self._models is not None and found != self._models:
                self.version += 1
            self._models, self.skipped, self._scanned_at = found, skipped, time.monotonic()
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
        """The kind of a listed model, or of any loadable name (a folder path, say)."""
        for m in self.models():
            if m.name == name:
                return m.kind
        return describe(resolve_model(name)).kind

    def default_selection(self, limit: int = MAX_DEFAULT_MODELS) -> tuple[list[str], str]:
        """Models ticked by default: all of them, or at most ``limit`` taken in turn from each kind; + a note."""
        models = [m for m in self.models() if not m.needs_download]
        by_kind = [[m.name for m in models if m.kind == kind] for kind in KIND_ORDER]
        chosen: list[str] = []
        while len(chosen) < min(limit, len(models)):
            for names in by_kind:  # round robin: every kind is represented before any kind gets a second model
                if names and len(chosen) < limit:
                    chosen.append(names.pop(0))
        note = ""
        if len(models) > len(chosen):
            note = f"{len(models)} models load here; {len(chosen)} are selected (each kind first): tick more to add."
        return chosen, note

    # -- loading ----------------------------------------------------------------------------------------------------
    def encoder(self, name: str):
        """The encoder (or scorer) called ``name``, loaded once; ModelNotFoundError for an unknown name."""
        spec = resolve_model(name)
        key, stamp = (spec.source, spec.location), _stamp(spec)
        with self._lock:
            lock = self._load_locks.setdefault(key, threading.Lock())
        with lock:  # two requests for a new model must not load it twice; other models load meanwhile
            cached = self._encoders.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            encoder = self._load(spec, name)
            self._encoders[key] = (stamp, encoder)
            return encoder

    def _load(self, spec: ModelSpec, name: str):
        from mlse.encoders import load_encoder

        if spec.source != "scorer":
            return load_encoder(name, backend=self.backend)
        from mlse.scorer import Scorer, read_manifest

        backbone = self.encoder(read_manifest(Path(spec.location))["backbone"])  # shared with every other user
        return Scorer.load(spec.location, backbone=backbone, name=spec.name.removeprefix("runs/"))


def describe(spec: ModelSpec) -> ModelInfo:
    """Kind of a model from its spec and, for runs, the files beside it; MlseError when a scorer cannot load here."""
    if spec.source == "scorer":
        from mlse.scorer import read_manifest

        manifest = read_manifest(Path(spec.location))  # ModelNotFoundError when unreadable
        backbone = str(manifest["backbone"])
        if not _loads_offline(backbone):
            raise MlseError(f"its backbone {backbone!r} is not available offline here")
        kind = STAGE12 if "stage2" in manifest["heads"] else STAGE1
        return ModelInfo(spec.name, kind, spec.source, spec.location, backbone, partial=partial_reason(spec.location))
    if spec.source == "run" or _is_finetuned(Path(spec.location)):
        return ModelInfo(spec.name, STUDENT, spec.source, spec.location, partial=partial_reason(spec.location))
    return ModelInfo(spec.name, BACKBONE, spec.source, spec.location)


def _is_finetuned(path: Path) -> bool:
    """A model folder written by mlse.finetune (``out/model`` beside ``out/finetune_config.json``)."""
    from mlse.finetune import CONFIG_FILE

    return (path.parent / CONFIG_FILE).is_file() or (path / CONFIG_FILE).is_file()


def _loads_offline(name: str) -> bool:
    """A plain model (not a scorer: heads on heads are not a thing mlse trains) that loads without the hub."""
    try:
        spec = resolve_model(name)
    except MlseError:
        return False
    return spec.source != "scorer" and spec_status(spec).startswith("available")


def _stamp(spec: ModelSpec) -> tuple[str, int]:
    """Changes when a run folder is replaced on disk (runs are written aside and renamed into place)."""
    path = Path(spec.location)
    target = path / "scorer.json" if spec.source == "scorer" else path
    try:
        return str(path), os.stat(target).st_mtime_ns
    except OSError:
        return str(path), 0
