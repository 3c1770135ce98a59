"""The Hugging Face hub as a source of models: the local HF cache first, a download only when allowed.

A hub model is a local snapshot folder (from the HF cache when present, without the network), loaded like any local
folder. A public deployment downloads only allow-listed ids (:func:`mlse.public_mode.check_hub_download`).
"""

from __future__ import annotations

import os
from pathlib import Path

from mlse.encoders.registry import ModelSpec, registered_hub_ids
from mlse.errors import ModelNotFoundError
from mlse.public_mode import check_hub_download
from mlse.runs.folders import is_model_folder


def hub_cached(repo_id: str) -> Path | None:
    """The local HF-cache snapshot of ``repo_id`` if one exists (never touches the network)."""
    from huggingface_hub import snapshot_download  # lazy: only a hub model needs it (~0.3 s to import)

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception:  # LocalEntryNotFoundError and friends: simply not cached
        return None
    return path if is_model_folder(path) else None


def download(spec: ModelSpec, *, available: str = "") -> Path:
    """Download the hub model of ``spec`` (a public deployment only allow-listed ids); ModelNotFoundError in one line
    when the hub does not answer. ``available`` ends the message (what loads here instead)."""
    check_hub_download(spec.name, spec.location, registered=registered_hub_ids())
    from huggingface_hub import snapshot_download  # lazy: only a hub model needs it (~0.3 s to import)

    try:
        return Path(snapshot_download(spec.location, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception as exc:  # network errors come in many types; the user needs one line
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) needs the Hugging Face hub, which is not reachable "
            f"({type(exc).__name__}), and it is not in the local HF cache; {available}"
        ) from None
