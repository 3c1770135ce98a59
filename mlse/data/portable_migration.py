"""Rewrite old records (manifests, result files, reports) so they name files in the portable forms of
:mod:`mlse.data.portable` instead of the absolute paths of the machine that wrote them.

JSON files get their strings and keys rewritten (and a ``data_identity`` beside each ``data`` map lacking one), kept
in their layout; other text files have absolute paths replaced. A file listed in a shipped ``manifest.json`` gets its
new hash there, each manifest written before its files, so a stopped run is repaired by the next. Writes are atomic; a
second run changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.data.portable import data_identity, find_absolute_paths, is_hash_map, portable_record, portable_text
from mlse.errors import MlseError

MANIFEST = "manifest.json"
BINARY_SUFFIXES = frozenset(
    {
        ".gz",
        ".safetensors",
        ".onnx",
        ".bin",
        ".npy",
        ".npz",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".zip",
        ".pt",
        ".parquet",
        ".sqlite",
    }
)


@dataclass
class Migration:
    """What :func:`migrate_records` found: new text by file (only files that change) and the files it read."""

    changed: dict[Path, str] = field(default_factory=dict)
    manifests_updated: dict[Path, list[str]] = field(default_factory=dict)  # manifest -> files whose hash it renewed
    read: int = 0


def text_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every UTF-8 text file under ``paths`` (files or folders), in a stable order; binary formats skipped."""
    out: list[Path] = []
    for item in map(Path, paths):
        if not item.exists():
            raise MlseError(f"{item}: no such file or folder")
        for path in sorted([item] if item.is_file() else (p for p in item.rglob("*") if p.is_file())):
            if path.suffix.lower() not in BINARY_SUFFIXES and _read_text(path) is not None:
                out.append(path)
    return out


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
        return None if b"\0" in data else data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def files_with_absolute_paths(paths: Iterable[str | Path]) -> dict[Path, list[str]]:
    """{file: the absolute paths it holds} for the text files under ``paths`` that hold any."""
    found = {path: find_absolute_paths(_read_text(path) or "") for path in text_files(paths)}
    return {path: hits for path, hits in found.items() if hits}


def migrate_text(path: Path, text: str, data_dir=None) -> str:
    """The portable version of one file's text (the text itself when nothing changes)."""
    if path.suffix.lower() == ".json":
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        style = _json_style(text, obj) if obj is not None else None
        if style is not None:
            new = _with_identities(portable_record(obj, data_dir, legacy=True))
            return text if new == obj else _dump(new, style)
    return portable_text(text, data_dir, legacy=True)


def migrate_records(paths: Iterable[str | Path], data_dir=None) -> Migration:
    """Work out every change (nothing is written); :func:`write_migration` writes them."""
    files = text_files(paths)
    result = Migration(read=len(files))
    for path in files:
        text = _read_text(path) or ""
        new = migrate_text(path, text, data_dir)
        if new != text:
            result.changed[path] = new
    for path in list(result.changed):
        _renew_manifest_hash(path, result)
    return result


def _renew_manifest_hash(path: Path, result: Migration) -> None:
    """Put the new sha256 of a rewritten file into the manifest.json of the artifact folder that lists it."""
    for folder in path.parents:
        manifest = folder / MANIFEST
        if manifest == path or not manifest.is_file():
            continue
        text = result.changed.get(manifest) or _read_text(manifest) or ""
        try:
            obj = json.loads(text)
        except ValueError:
            return
        rel = path.relative_to(folder).as_posix()
        files = obj.get("files") if isinstance(obj, dict) else None
        if not is_hash_map(files) or rel not in files:
            return
        style = _json_style(text, obj)
        if style is None:
            raise MlseError(f"{manifest}: cannot rewrite it in its own layout to record the new hash of {rel}")
        files[rel] = hashlib.sha256(result.changed[path].encode("utf-8")).hexdigest()
        result.changed[manifest] = _dump(obj, style)
        result.manifests_updated.setdefault(manifest, []).append(rel)
        return


def write_migration(result: Migration) -> None:
    """Write every changed file atomically, the manifests first (see the module docstring)."""
    for path in sorted(result.changed, key=lambda p: (p.name != MANIFEST, str(p))):
        atomic_write_text(path, result.changed[path])


def _with_identities(obj):
    """``data_identity`` beside every ``data`` map of sha256 values that has none (key order kept)."""
    if isinstance(obj, list):
        return [_with_identities(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        out[key] = _with_identities(value)
        if key == "data" and is_hash_map(value) and "data_identity" not in obj:
            out["data_identity"] = data_identity(value)
    return out


def _json_style(text: str, obj) -> tuple | None:
    """The (indent, ensure_ascii, end) that json.dumps needs to write ``text`` back byte for byte, or None."""
    for indent in (1, 2, None, 4):
        for ascii_only in (False, True):
            body = json.dumps(obj, indent=indent, ensure_ascii=ascii_only)
            for end in ("\n", ""):
                if body + end == text:
                    return indent, ascii_only, end
    return None


def _dump(obj, style: tuple) -> str:
    indent, ascii_only, end = style
    return json.dumps(obj, indent=indent, ensure_ascii=ascii_only) + end
