"""State shared by the app's tabs: which models load here, what kind each is, and the loaded encoders.

The model list is scanned from the registry and the runs directory and kept for :data:`RESCAN_SECONDS` (so a run
trained while the app is up appears without a restart; ``refresh()`` rescans at once). Every change of the list bumps
``version``, which the app's model pickers compare against to update themselves (see :mod:`mlse.ui.model_pickers`).
Hub models that are not in the local HF cache are listed only while the hub answers (:mod:`mlse.data.hub_probe`);
they are never ticked by default, since their first use downloads them. The offline defaults
(``mlse.encoders.DEFAULT_MODELS``) come first among the backbones and are ticked whenever they load here.

Models are loaded on first use by a :class:`mlse.serving.model_pool.ModelPool` (the memory budget ``max_memory``,
``--max-memory`` / ``MLSE_MAX_MEMORY``, default 1.5 GB; a scorer sharing the loaded backbone; calibrations attached).

Constructing an :class:`AppState` touches neither disk nor network: :meth:`AppState.start` (which app.py calls) marks
the runs of jobs that died with an earlier start of the app interrupted, puts back runs a killed job left aside and
starts the hub probe. A partial run (stopped early, or interrupted) is listed with what it is in its label and never
ticked by default: it is not a finished model.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlse.data.hub_probe import hub_reachable
from mlse.dirs import runs_dir
from mlse.encoders.identity import check_backend
from mlse.encoders.registry import DEFAULT_MODELS, ModelSpec, registry
from mlse.encoders.resolve import list_runs, list_shipped_models, resolve_model, spec_status
from mlse.errors import MlseError
from mlse.heads.scorer import read_scorer_json
from mlse.runs.folders import is_finetuned_model
from mlse.runs.health import partial_reason, recover_runs, sweep_interrupted
from mlse.runs.shipped import PREFIX as SHIPPED_PREFIX
from mlse.serving.batching import MicroBatcher
from mlse.serving.encoder_pool import DEFAULT_MAX_MEMORY
from mlse.serving.model_pool import ModelPool

BACKBONE, STAGE1, STAGE12, STUDENT = "backbone", "+Stage 1", "+Stage 1+2", "fine-tuned student"
KIND_ORDER = (BACKBONE, STAGE1, STAGE12, STUDENT)
RESCAN_SECONDS = 30.0
MAX_DEFAULT_MODELS = 4  # what a visitor's first click scores: see AppState.default_selection
# The trained kinds a default shows, in this order: the full method (Stage 1+2), Stage 1 alone (an intermediate step);
# students only when no backbone loads (see AppState.default_selection).
VISITOR_KINDS = (STAGE12, STAGE1, STUDENT)
# Shown after a model's name in the pickers: what it is there for when that is not obvious from its kind.
MODEL_NOTES = {"minilm-en": "English-only reference"}
RUNS_PREFIX = "runs/"  # a run trained on this machine (the Fine-tune tab, python -m mlse train / finetune)


@dataclass(frozen=True)
class ModelInfo:
    """One model the app can use: its name (what load_model takes), kind, and for scorers the backbone."""

    name: str
    kind: str
    source: str
    location: str
    backbone: str | None = None
    needs_download: bool = False  # a hub model not in the local cache: its first use downloads it
    partial: str | None = None  # a run that ended early (stopped, or killed after a checkpoint): how far it got

    @property
    def label(self) -> str:
        notes = [
            n
            for n in (
                MODEL_NOTES.get(self.name),
                "downloads on first use" if self.needs_download else "",
                "shipped" if self.name.startswith(SHIPPED_PREFIX) else "",
                "trained here" if self.name.startswith(RUNS_PREFIX) else "",  # beside a shipped one of the same name
                self.state_note,
            )
            if n
        ]
        return f"{self.name} · {self.kind}" + "".join(f" ({n})" for n in notes)

    @property
    def state_note(self) -> str:
        """How a partial run ended, as its label says it: ``interrupted; ...`` (its job died: the app was killed, say)
        or ``partial: stopped after N steps``; empty for a finished model."""
        if not self.partial:
            return ""
        return self.partial if self.partial.startswith("interrupted") else f"partial: {self.partial}"


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
    # Concurrent requests for one model share one encoder call (mlse.serving.batching): 20 users cost a few calls,
    # not 20.
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
        app interrupted (removing half-made ones, so that recover_runs can put back a run one was replacing), put
        back the runs a killed job left aside, and start the first hub probe in the background so that the first
        rescan may use its answer."""
        sweep_interrupted(runs_dir())
        recover_runs(runs_dir())
        hub_reachable()
        return self

    # -- the model list ---------------------------------------------------------------------------------------------
    def refresh(self) -> list[ModelInfo]:
        """Rescan the registry and the runs directory now: models that load here, plus hub models while it answers."""
        found, skipped = [], []
        hub_answers = hub_reachable()  # None (not known yet) counts as unreachable: never block on the network
        for spec in [*registry().values(), *list_shipped_models(), *list_runs()]:
            if not spec_status(spec).startswith("available"):
                if spec.source == "hub" and hub_answers:
                    found.append(ModelInfo(spec.name, BACKBONE, spec.source, spec.location, needs_download=True))
                continue
            try:
                found.append(describe(spec))
            except MlseError as exc:
                skipped.append((spec.name, str(exc)))
        found.sort(key=self._order)
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
        """The kind of a listed model, or of any loadable name (a folder path, say)."""
        for m in self.models():
            if m.name == name:
                return m.kind
        return describe(resolve_model(name)).kind

    def _order(self, model: ModelInfo) -> tuple:
        """Kinds in KIND_ORDER; within a kind the defaults first (in their order), then offline before hub, by name."""
        rank = self.default_models.index(model.name) if model.name in self.default_models else len(self.default_models)
        return KIND_ORDER.index(model.kind), rank, model.needs_download, model.name

    def loaded_defaults(self) -> list[str]:
        """The default models that load here, in order (no download: hub models not cached are not defaults)."""
        offline = {m.name for m in self.models() if not m.needs_download}
        return [name for name in self.default_models if name in offline]

    def preferred_model(self) -> str | None:
        """The model single-model views open on: the first default that loads here, else the first model listed."""
        defaults = self.loaded_defaults()
        if defaults:
            return defaults[0]
        names = self.model_names()
        return names[0] if names else None

    def default_selection(self, limit: int = MAX_DEFAULT_MODELS) -> tuple[list[str], str]:
        """Models ticked by default + a note: what a visitor's first click scores, informative but not everything.

        First the offline default backbones that load here (raw cosines: what each pretrained model says), then
        trained models that cost no encoder forward of their own: scorers whose backbone is ticked (their heads
        reuse the backbone's forward through the embedding cache), Stage 1+2 before Stage 1, shipped artifacts
        (their scores are recorded in their manifests, the same on every machine) before runs trained here, one of
        each kind in turn until ``limit``. So the table shows raw against trained side by side. With the
        repository's artifacts: me5-small, muse, minilm-en and shipped/me5-small+s1+s2, three encoder forwards per
        pair. A student is a model of its own: ticking the shipped one adds a fourth forward, about 1.5 times the
        app's CPU per request (``benchmarks/app_load.py``), so it is offered one tick away; so are scorers on unticked
        backbones.
        When no default backbone loads here, trained models of every kind are taken in turn instead, so the page
        never opens with nothing ticked.

        Other registry models (a cached hub model, say) are offered but not ticked, nor is a partial run (stopped
        early or interrupted: not a finished model). ``limit`` caps the total; the backbones always come first.
        """
        chosen = self.loaded_defaults()[:limit]
        offline = [m for m in self.models() if not m.needs_download]
        registry_names = set(registry())  # the backbones; shipped artifacts and runs are listed apart
        trained = [m for m in offline if m.name not in registry_names and m.name not in chosen and not m.partial]
        if chosen:  # only what reuses a ticked backbone's forward
            trained = [m for m in trained if m.backbone in chosen]

        def preference(m: ModelInfo) -> tuple:
            on_ticked = chosen.index(m.backbone) if m.backbone in chosen else len(chosen)
            return not m.name.startswith(SHIPPED_PREFIX), on_ticked

        by_kind = [sorted((m for m in trained if m.kind == kind), key=preference) for kind in VISITOR_KINDS]
        while len(chosen) < limit and any(by_kind):
            for candidates in by_kind:  # in turns: every kind is represented before any kind gets a second model
                if candidates and len(chosen) < limit:
                    chosen.append(candidates.pop(0).name)
        offered = len(offline)
        note = ""
        if offered > len(chosen):
            note = (
                f"{offered} models load here; {len(chosen)} are selected (the backbones and the trained heads that "
                "reuse their forward; a student costs a forward of its own): tick more to add."
            )
        return chosen, note

    # -- loading ----------------------------------------------------------------------------------------------------
    def encoder(self, name: str):
        """The model called ``name``, loaded on first use by the pool; ModelNotFoundError for an unknown name."""
        return self.pool.get(name)

    @property
    def calibration_notes(self) -> dict:
        return self.pool.calibration_notes

    def loaded(self) -> list[tuple[str, str]]:
        """(source, location) of the loaded models, least recently used first (for tests and diagnostics)."""
        return self.pool.loaded()

    @property
    def loaded_bytes(self) -> int:
        return self.pool.loaded_bytes


def describe(spec: ModelSpec) -> ModelInfo:
    """Kind of a model from its spec and, for runs, the files beside it; MlseError when a scorer cannot load here."""
    if spec.source == "scorer":
        manifest = read_scorer_json(Path(spec.location))  # ModelNotFoundError when unreadable
        backbone = str(manifest["backbone"])
        if not _loads_offline(backbone):
            raise MlseError(f"its backbone {backbone!r} is not available offline here")
        kind = STAGE12 if "stage2" in manifest["heads"] else STAGE1
        return ModelInfo(spec.name, kind, spec.source, spec.location, backbone, partial=partial_reason(spec.location))
    shipped_student = spec.name.startswith(SHIPPED_PREFIX) and spec.source == "package"
    if spec.source == "run" or shipped_student or is_finetuned_model(Path(spec.location)):
        return ModelInfo(spec.name, STUDENT, spec.source, spec.location, partial=partial_reason(spec.location))
    return ModelInfo(spec.name, BACKBONE, spec.source, spec.location)


def _loads_offline(name: str) -> bool:
    """A plain model (not a scorer: heads on heads are not a thing mlse trains) that loads without the hub."""
    try:
        spec = resolve_model(name)
    except MlseError:
        return False
    return spec.source != "scorer" and spec_status(spec).startswith("available")


STAGE1_KINDS = (STAGE1, STAGE12)  # the kinds of scorer with a Stage-1 head, the one without Stage 2 preferred


def map_opening(models, preferred: str | None, prefix: str = SHIPPED_PREFIX) -> str | None:
    """The model the map tab opens on: its point needs a Stage-1 head, so the shipped scorer (name starting with
    ``prefix``) built on ``preferred`` -- the app's first default backbone -- with a Stage-1 head only (``+Stage 1``)
    before one with Stage 2 as well; when nothing is shipped for that backbone, ``preferred`` itself. ``models`` are
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
