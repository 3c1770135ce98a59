"""Getting the app's datasets onto a fresh machine.

:func:`fetch_missing` downloads each of :data:`APP_DATASETS` not there yet (:mod:`mlse.data.hub_download`), one after
the other; a failure is reported and the others still come. :func:`start_fetch` does it in a background thread, so the
app serves at once. Progress is kept in :mod:`mlse.data.fetch_status`, which "dataset folder not found" messages read.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mlse.data import fetch_status
from mlse.data.hub_download import HUB_DATASETS, download_from_hub
from mlse.data.hub_probe import probe_hub
from mlse.data.paths import ENV_VAR, resolve_data_dir
from mlse.dirs import cache_root
from mlse.errors import MlseError

# In the order they are fetched: the smallest and most used first.
APP_DATASETS = ("stsb_multi_mt", "tatoeba", "flores200")

Progress = Callable[[str], None]


def print_progress(line: str) -> None:
    print(f"mlse data: {line}", file=sys.stderr, flush=True)


def missing_datasets(data_dir: Path) -> list[str]:
    """The keys of :data:`APP_DATASETS` whose folder is not in ``data_dir``."""
    return [key for key in APP_DATASETS if not (Path(data_dir) / HUB_DATASETS[key].folder).is_dir()]


def fetch_missing(
    data_dir: str | Path, *, progress: Progress = print_progress, token: str | None = None
) -> dict[str, str | None]:
    """Download every one of :data:`APP_DATASETS` missing from ``data_dir`` -> {key: None when fetched, else why not}.

    Never raises for one dataset's failure: the others are still fetched. Creates ``data_dir`` when needed."""
    root = Path(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    todo = missing_datasets(root)
    fetch_status.set_waiting(todo)
    if not todo:
        progress(f"every dataset the app needs is in {root}")
    outcome: dict[str, str | None] = {}
    for number, key in enumerate(todo, 1):
        spec = HUB_DATASETS[key]
        fetch_status.set_running(key)
        progress(f"[{number}/{len(todo)}] fetching {spec.label} from {spec.repo} into {root / spec.folder} ...")
        started = time.monotonic()
        try:
            download_from_hub(key, root, token=token)
        except MlseError as exc:
            outcome[key] = str(exc)
            progress(f"[{number}/{len(todo)}] {spec.label} not fetched: {exc}")
        else:
            outcome[key] = None
            files = sum(1 for _ in (root / spec.folder).iterdir())
            progress(f"[{number}/{len(todo)}] {spec.label} ready: {files} files in {time.monotonic() - started:.0f} s")
        fetch_status.set_finished(key, outcome[key])
    return outcome


def start_fetch(
    data_dir: str | Path, *, progress: Progress = print_progress, reachable: Callable[[], bool] | None = None
) -> threading.Thread | None:
    """:func:`fetch_missing` in a daemon thread (None when nothing is missing); the app serves meanwhile.

    ``reachable`` (default :func:`mlse.data.hub_probe.probe_hub`) is asked first: if not, all fail at once."""
    root = Path(data_dir)
    todo = missing_datasets(root) if root.is_dir() else list(APP_DATASETS)
    if not todo:
        return None
    fetch_status.set_waiting(todo)  # set now, not when the thread gets going, so a tab asked at once says "queued"

    def run() -> None:
        if not (reachable or probe_hub)():
            reason = "the hub is not reachable from here (no network, or HF_HUB_OFFLINE is set)"
            fetch_status.set_failed(todo, reason)
            progress(f"not fetching {', '.join(todo)}: {reason}")
            return
        fetch_missing(root, progress=progress)

    thread = threading.Thread(target=run, name="mlse-data-fetch", daemon=True)
    thread.start()
    return thread


def app_data_dir() -> Path:
    """Where the app reads (and fetches) its data: ``MLSE_DATA``; else ``../shared/data`` when it exists; else
    ``<mlse cache>/data``, which is then exported as ``MLSE_DATA`` so every tab and child job reads the same place.

    Creates the folder; MlseError (naming it) when that is not possible."""
    configured = os.environ.get(ENV_VAR, "")
    if configured:
        folder = Path(configured).expanduser()
    else:
        try:
            return resolve_data_dir()
        except MlseError:  # no data directory anywhere: a fresh deployment
            folder = cache_root() / "data"
            os.environ[ENV_VAR] = str(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MlseError(
            f"cannot create the data directory {folder} ({exc.strerror}); set {ENV_VAR} to a writable folder"
        ) from None
    return folder.resolve()
