"""The files a result was computed from, by their sha256, and what changed since: a result file records
:func:`artifact_hashes` of what it quotes (shipped models, calibrations, input files), and a test compares them with
the files on disk now (:func:`stale_artifacts`), so a number cannot outlive the model it was measured on unseen."""

from __future__ import annotations

from pathlib import Path

from mlse.data.hashing import file_sha256


def artifact_hashes(files: list[Path], root: Path) -> dict[str, str]:
    """sha256 of each file, by its path under ``root`` (``/``-separated, as the result file records it)."""
    return {path.relative_to(root).as_posix(): file_sha256(path) for path in files}


def stale_artifacts(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """What changed since ``recorded`` was written: each file whose hash differs, is gone, or is new -> sentences."""
    out = [f"{path} changed" for path in recorded if path in current and current[path] != recorded[path]]
    out += [f"{path} is gone" for path in recorded if path not in current]
    return out + [f"{path} is new" for path in current if path not in recorded]
