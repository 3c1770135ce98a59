"""Public deployment mode: what an app open to anonymous visitors (a Hugging Face Space) allows and refuses.

On when ``MLSE_PUBLIC`` (``app.py --public``) or ``SPACE_ID`` (set by Spaces) is set; it lives in the environment
so that child processes (training jobs) obey it too. In public mode a hub model is downloaded only when on the
allow-list (registry hub models plus ``--allow-hub-model`` / ``MLSE_HUB_ALLOW``); a fine-tune must fit
:data:`FINETUNE_LIMITS` and :data:`PUBLIC_PREPARATION_MINUTES`, never overwrites and trains only listed models; uploads
are capped (:func:`upload_limits`); messages pass through :func:`hide_server_paths`. The CLI is not guarded: its user
already runs code on the machine. See docs/deploy.md.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mlse.dirs import cache_root, package_parent, positive_env, runs_dir
from mlse.errors import MlseError, ModelNotFoundError

PUBLIC_ENV = "MLSE_PUBLIC"
HUB_ALLOW_ENV = "MLSE_HUB_ALLOW"
SPACE_ENV = "SPACE_ID"  # set by Hugging Face Spaces in every Space's environment
MAX_UPLOAD_BYTES = 1_000_000  # public mode
PUBLIC_UPLOAD_ROWS = 5_000
LOCAL_UPLOAD_ROWS = 100_000
LOCAL_UPLOAD_BYTES = 100_000_000
UPLOAD_ROWS_ENV, UPLOAD_BYTES_ENV = "MLSE_MAX_UPLOAD_ROWS", "MLSE_MAX_UPLOAD_BYTES"
# field label -> (TrainRequest attribute, the largest value a visitor may ask for)
FINETUNE_LIMITS: dict[str, tuple[str, float]] = {
    "Time budget (minutes)": ("budget_minutes", 10),
    "Max pairs per language pair": ("max_pairs", 2000),
    "Batch size": ("batch_size", 64),
    "Dev rows per dev pair": ("dev_max_pairs", 500),
    "Max steps": ("max_steps", 2000),
    "Max epochs": ("max_epochs", 50),
    "Extend vocabulary": ("extend_vocab", 2000),
}
# a fine-tune's loading and one-off encoding, before its budget's clock starts (at most 2,000 pairs per language pair)
PUBLIC_PREPARATION_MINUTES = 15
_TRUE = ("1", "true", "yes", "on")


def public_mode() -> bool:
    """True when the app serves anonymous visitors: ``MLSE_PUBLIC`` is true, or ``SPACE_ID`` is set."""
    return os.environ.get(PUBLIC_ENV, "").strip().lower() in _TRUE or bool(os.environ.get(SPACE_ENV, "").strip())


def upload_limits() -> tuple[int, int]:
    """(rows, bytes) an uploaded file may hold: the public caps in public mode, else the local settings."""
    if public_mode():
        return PUBLIC_UPLOAD_ROWS, MAX_UPLOAD_BYTES
    return (positive_env(UPLOAD_ROWS_ENV, LOCAL_UPLOAD_ROWS), positive_env(UPLOAD_BYTES_ENV, LOCAL_UPLOAD_BYTES))


def set_upload_limits(rows: int | None = None, size: int | None = None) -> None:
    """The local limits for this process (``app.py --max-upload-rows/--max-upload-bytes``)."""
    for env, value in ((UPLOAD_ROWS_ENV, rows), (UPLOAD_BYTES_ENV, size)):
        if value is not None:
            if int(value) < 1:
                raise MlseError(f"{env}: expected a positive number, got {value}")
            os.environ[env] = str(int(value))


def enable_public_mode() -> None:
    """Turn public mode on for this process and the processes it starts."""
    os.environ[PUBLIC_ENV] = "1"


def allow_hub_models(hub_ids: list[str]) -> None:
    """Add ``hub_ids`` to the allow-list of this process and the processes it starts."""
    ids = [*_env_hub_ids(), *(i.strip() for i in hub_ids if i.strip())]
    if ids:
        os.environ[HUB_ALLOW_ENV] = ",".join(dict.fromkeys(ids))


def _env_hub_ids() -> list[str]:
    return [part for part in re.split(r"[,\s]+", os.environ.get(HUB_ALLOW_ENV, "")) if part]


def hub_allow_list(registered: Sequence[str] = ()) -> list[str]:
    """Hub ids a public deployment may download: the registry's hub models (``registered``, passed in by
    :func:`mlse.encoders.hub.download`), then the operator's additions."""
    return list(dict.fromkeys([*registered, *_env_hub_ids()]))


def check_hub_download(name: str, repo_id: str, *, registered: Sequence[str] = ()) -> None:
    """Refuse to download ``repo_id`` in public mode unless it is on the allow-list (no-op otherwise)."""
    if not public_mode():
        return
    allowed = hub_allow_list(registered)
    if repo_id not in allowed:
        raise ModelNotFoundError(
            f"model {name!r}: downloading {repo_id!r} from the hub is not allowed on this public deployment; "
            f"allowed hub ids: {', '.join(allowed)} (the operator adds more with --allow-hub-model ID or "
            f"{HUB_ALLOW_ENV})"
        )


def check_finetune_request(req, listed_models: list[str]) -> None:
    """Refuse a fine-tune request a public deployment does not run: over a limit, overwriting, or an unlisted model.

    ``req``: a :class:`mlse.train.config.TrainRequest`; ``listed_models``: the names the app offers.
    """
    for label, (attribute, limit) in FINETUNE_LIMITS.items():
        value = getattr(req, attribute)
        if value is not None and value > limit:
            raise MlseError(f"{label}: {value:g} is over this public deployment's limit; expected at most {limit:g}")
    if req.max_pairs is None and req.method not in ("stage2",):
        limit = FINETUNE_LIMITS["Max pairs per language pair"][1]
        raise MlseError(
            f"Max pairs per language pair: empty means all pairs, which this public deployment does not "
            f"allow; expected at most {limit:g}"
        )
    if req.overwrite:
        raise MlseError("Overwrite: this public deployment never replaces an existing run; choose a new run name")
    for role, model in (("model", req.model), ("teacher", req.teacher)):
        if model and model not in listed_models:
            shown = ", ".join(listed_models[:12]) or "(none)"
            raise MlseError(f"{role} {model!r} is not one of the models this public deployment offers: {shown}")


def server_folders() -> list[tuple[str, str]]:
    """(folder, what a visitor reads instead) for every server folder a message may name, longest first; each folder
    as given and resolved."""
    named = [
        (runs_dir(), "runs"),
        (cache_root(), "cache"),
        (os.environ.get("MLSE_DATA"), "data"),
        (package_parent().parent / "shared" / "data", "data"),
        (os.environ.get("GRADIO_TEMP_DIR"), "uploads"),
        (tempfile.gettempdir(), "tmp"),
        (package_parent(), "app"),
        (Path.cwd(), "app"),
        (Path.home(), "~"),
    ]
    pairs: dict[str, str] = {}
    for folder, label in named:
        if not folder or str(folder) in ("/", "."):
            continue
        for form in (os.path.abspath(folder), os.path.realpath(folder)):
            if form != os.sep:
                pairs.setdefault(form, label)
    return sorted(pairs.items(), key=lambda item: -len(item[0]))


def hide_server_paths(text: str) -> str:
    """``text`` with server folders named instead of spelled out, in public mode (as is otherwise): a visitor learns
    nothing of the machine's layout from a message (``/srv/app/runs/x`` reads ``runs/x``)."""
    if not public_mode() or os.sep not in text:
        return text
    for folder, label in server_folders():
        text = text.replace(folder, label)
    return text
