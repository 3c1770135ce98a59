"""Getting the app's datasets onto a fresh machine, and saying plainly which are missing.

A fresh deployment (a Space, a container) starts with an empty data directory. :func:`fetch_missing` downloads each
dataset the tabs need that is not there yet (:data:`APP_DATASETS`, through :mod:`mlse.data.hub`), one after the
other, printing one progress line per step; a failure (no network, FLORES+ gated without a token) is reported and
the others still come. :func:`start_fetch` does it in a background thread, so the app serves at once and the
score tab (which needs no data) works while the rest arrives.

:func:`missing_note` is what every "dataset folder not found" message ends with: what the folder is, which tab needs
it, and what to do, including "being downloaded now" or why the download failed while the app's fetch runs.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlse.errors import MlseError

# In the order they are fetched: the smallest and most used first.
APP_DATASETS = ("stsb_multi_mt", "tatoeba", "flores200")
# Folders mlse cannot fetch (no hub source it converts): what they are and which part of the app needs them.
_LOCAL_ONLY = {
    "parallel/tatoeba_challenge_v2021-08-07": "Tatoeba-Challenge bitext (training data of the Fine-tune tab and "
                                              "Stage 1)",
    "wmt_newstest": "WMT news test sets (CLI evaluation only)",
}  # fmt: skip
_USED_BY = {"stsb_multi_mt": "the Gold tab, Stage 2 and fine-tuning's dev set", "tatoeba": "the Tatoeba tab",
            "flores200": "the Map tab"}  # fmt: skip

Progress = Callable[[str], None]


@dataclass
class FetchStatus:
    """What the app's fetch is doing: the dataset now downloading, those waiting, and why any failed."""

    running: str | None = None
    waiting: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)


_status = FetchStatus()
_lock = threading.Lock()


def status() -> FetchStatus:
    """A copy of the fetch status (for messages and tests)."""
    with _lock:
        return FetchStatus(_status.running, list(_status.waiting), dict(_status.failed), list(_status.done))


def print_progress(line: str) -> None:
    print(f"mlse data: {line}", file=sys.stderr, flush=True)


def missing_datasets(data_dir: Path, datasets=APP_DATASETS) -> list[str]:
    """The keys of ``datasets`` whose folder is not in ``data_dir``."""
    from mlse.data.hub import HUB_DATASETS

    return [key for key in datasets if not (Path(data_dir) / HUB_DATASETS[key].folder).is_dir()]


def fetch_missing(data_dir: str | Path, *, datasets=APP_DATASETS, progress: Progress = print_progress,
                  token: str | None = None) -> dict[str, str | None]:  # fmt: skip
    """Download every dataset of ``datasets`` missing from ``data_dir`` -> {key: None when fetched, else why not}.

    Never raises for one dataset's failure: the others are still fetched. Creates ``data_dir`` when needed.
    """
    from mlse.data.hub import HUB_DATASETS, download_from_hub

    root = Path(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    todo = missing_datasets(root, datasets)
    with _lock:
        _status.waiting = list(todo)
    if not todo:
        progress(f"every dataset the app needs is in {root}")
    outcome: dict[str, str | None] = {}
    for number, key in enumerate(todo, 1):
        spec = HUB_DATASETS[key]
        with _lock:
            _status.running = key
            _status.waiting.remove(key)
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
        with _lock:
            _status.running = None
            if outcome[key] is None:
                _status.done.append(key)
                _status.failed.pop(key, None)
            else:
                _status.failed[key] = outcome[key]
    return outcome


def start_fetch(data_dir: str | Path, *, progress: Progress = print_progress,
                reachable: Callable[[], bool] | None = None) -> threading.Thread | None:  # fmt: skip
    """:func:`fetch_missing` in a daemon thread (None when nothing is missing); the app serves meanwhile.

    ``reachable``: asked first, in the thread (default :func:`mlse.hub.probe_hub`, a few seconds at most); when the
    hub does not answer, every missing dataset is marked failed with that reason instead of timing out three times.
    """
    root = Path(data_dir)
    todo = missing_datasets(root) if root.is_dir() else list(APP_DATASETS)
    if not todo:
        return None
    with _lock:  # set now, not when the thread gets going, so a tab asked at once already says "queued"
        _status.waiting = list(todo)

    def run() -> None:
        from mlse.hub import probe_hub

        if not (reachable or probe_hub)():
            reason = "the hub is not reachable from here (no network, or HF_HUB_OFFLINE is set)"
            with _lock:
                _status.waiting = []
                _status.failed.update({key: reason for key in todo})
            progress(f"not fetching {', '.join(todo)}: {reason}")
            return
        fetch_missing(root, progress=progress)

    thread = threading.Thread(target=run, name="mlse-data-fetch", daemon=True)
    thread.start()
    return thread


def app_data_dir() -> Path:
    """Where the app reads (and fetches) its data: ``MLSE_DATA``; else ``../shared/data`` when it exists; else
    ``<mlse cache>/data``, which is then exported as ``MLSE_DATA`` so every tab and child job reads the same place.

    Creates the folder; MlseError (naming it) when that is not possible.
    """
    import os

    from mlse.data.paths import ENV_VAR, resolve_data_dir

    configured = os.environ.get(ENV_VAR, "")
    if configured:
        folder = Path(configured).expanduser()
    else:
        try:
            return resolve_data_dir()
        except MlseError:  # no data directory anywhere: a fresh deployment
            from mlse.cache import cache_root

            folder = cache_root() / "data"
            os.environ[ENV_VAR] = str(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MlseError(f"cannot create the data directory {folder} ({exc.strerror}); set {ENV_VAR} to a writable "
                        "folder") from None  # fmt: skip
    return folder.resolve()


def missing_note(folder: str, data_dir: Path) -> str:
    """What a missing dataset folder is, which part of the app needs it, and how it gets there."""
    from mlse.data.hub import HUB_DATASETS

    key = next((k for k, spec in HUB_DATASETS.items() if spec.folder == folder), None)
    if key is None:
        what = _LOCAL_ONLY.get(folder, "this dataset")
        return f"{what} is missing; mlse cannot download it: copy the folder from a local copy of the data"
    spec = HUB_DATASETS[key]
    what = f"{spec.label} (needed by {_USED_BY[key]}) is missing"
    current = status()
    if current.running == key:
        return f"{what}: it is being downloaded from {spec.repo} now; try again in a minute"
    if key in current.waiting:
        return f"{what}: it is queued for download after {current.running or 'the dataset before it'}"
    if key in current.failed:
        return f"{what}: its download failed ({current.failed[key]})"
    return f"{what}; fetch it with `python -m mlse data fetch --dataset {key} --to {data_dir}`"
