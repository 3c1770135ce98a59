"""What the app's background fetch is doing, and what every "dataset folder not found" message says.

:func:`missing_note` ends such a message: what the folder is, which tab needs it, what to do (or "being downloaded
now", or why the download failed). Apart from :mod:`mlse.data.fetch` so the loaders need not import the downloader.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from mlse.data.hub_download import HUB_DATASETS
from mlse.data.layout import PARALLEL_DIR, WMT_DIR

# Folders mlse cannot fetch (no hub source it converts): what they are and which part of the app needs them.
_LOCAL_ONLY = {
    PARALLEL_DIR: "Tatoeba-Challenge bitext (training data of the Fine-tune tab and Stage 1)",
    WMT_DIR: "WMT news test sets (CLI evaluation only)",
}
_USED_BY = {
    "stsb_multi_mt": "the Gold tab, Stage 2 and fine-tuning's dev set",
    "tatoeba": "the Tatoeba tab",
    "flores200": "the Map tab",
}


@dataclass
class FetchStatus:
    """What the app's fetch is doing: the dataset now downloading, those waiting, and why any failed."""

    running: str | None = None
    waiting: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


_status = FetchStatus()
_lock = threading.Lock()


def status() -> FetchStatus:
    """A copy of the fetch status (for messages and tests)."""
    with _lock:
        return FetchStatus(_status.running, list(_status.waiting), dict(_status.failed))


def set_waiting(keys: list[str]) -> None:
    with _lock:
        _status.waiting = list(keys)


def set_running(key: str) -> None:
    with _lock:
        _status.running = key
        _status.waiting.remove(key)


def set_finished(key: str, error: str | None) -> None:
    """``key`` is fetched (``error`` None) or failed with ``error``."""
    with _lock:
        _status.running = None
        if error is None:
            _status.failed.pop(key, None)
        else:
            _status.failed[key] = error


def set_failed(keys: list[str], reason: str) -> None:
    """None of ``keys`` will be fetched, for one ``reason`` (the hub is not reachable, say)."""
    with _lock:
        _status.waiting = []
        _status.failed.update({key: reason for key in keys})


def missing_note(folder: str, data_dir: Path) -> str:
    """What a missing dataset folder is, which part of the app needs it, and how it gets there."""
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
