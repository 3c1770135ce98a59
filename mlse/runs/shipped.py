"""Trained artifacts shipped in the repository (``assets/models/``), so a fresh clone shows the findings untrained.

Two kinds, each a folder with a ``manifest.json``: ``heads/<name>/`` (a scorer run, heads in float16; recorded scores
are measured on them as loaded back) and ``students/<name>/`` (a float16 LoRA adapter, merged on first use into the user
cache: :func:`student_dir`). The manifest holds ``name``, ``kind``, ``backbone``, ``backbone_identity``, ``command``,
``data`` (portable paths -> sha256), ``data_identity``, ``scores`` and ``files`` (sha256 of every file beside it).
Limits: :data:`MAX_FILE_BYTES`, :data:`MAX_TOTAL_BYTES`. See docs/models.md. The registry offers them as
``shipped/<name>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mlse.atomic import atomic_dir, atomic_write_text
from mlse.data.hashing import file_sha256
from mlse.dirs import assets_dir, cache_root
from mlse.errors import MlseError

MANIFEST = "manifest.json"
KINDS = {"heads": "scorer", "students": "lora-student"}  # folder under assets/models -> kind
PREFIX = "shipped/"
MAX_FILE_BYTES = 3_000_000
MAX_TOTAL_BYTES = 15_000_000
_REQUIRED = ("name", "kind", "backbone", "backbone_identity", "command", "data", "scores", "files")


@dataclass(frozen=True)
class ShippedArtifact:
    name: str  # the model name the registry offers: "shipped/<folder name>"
    kind: str  # "scorer" | "lora-student"
    folder: Path
    manifest: dict

    @property
    def description(self) -> str:
        cross = self.manifest.get("scores", {}).get("cross-12")
        tail = f"; STS test cross-12 {cross:.1f}" if isinstance(cross, (int, float)) else ""
        return f"shipped {self.manifest.get('title') or self.kind} on {self.manifest['backbone']}{tail}"


def shipped_root() -> Path:
    """``$MLSE_ASSETS`` or the repository's ``assets/models``."""
    return Path(os.environ.get("MLSE_ASSETS") or assets_dir() / "models")


def list_shipped(root: Path | None = None) -> list[ShippedArtifact]:
    """Every artifact with a readable manifest, heads first; a folder with a broken manifest is skipped."""
    root = root or shipped_root()
    found = []
    for sub, kind in KINDS.items():
        folder = root / sub
        if not folder.is_dir():
            continue
        for item in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
            try:
                manifest = read_shipped_manifest(item)
            except MlseError:
                continue
            if manifest["kind"] == kind:
                found.append(ShippedArtifact(PREFIX + item.name, kind, item, manifest))
    return found


def read_shipped_manifest(folder: Path) -> dict:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MlseError(f"{folder}: no readable {MANIFEST} ({exc})") from None
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise MlseError(f"{folder / MANIFEST}: missing {', '.join(missing)}")
    return manifest


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` except the manifest, by relative path."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {str(path.relative_to(folder)): file_sha256(path) for path in files}


def check_files(item: ShippedArtifact) -> list[str]:
    """Problems with an artifact's files: a hash that differs from the manifest, a missing or extra file, a size."""
    problems = []
    actual = file_hashes(item.folder)
    for rel, digest in item.manifest["files"].items():
        if rel not in actual:
            problems.append(f"{item.name}: {rel} is missing")
        elif actual[rel] != digest:
            problems.append(f"{item.name}: {rel} differs from its manifest hash")
    problems += [f"{item.name}: {rel} is not in the manifest" for rel in actual if rel not in item.manifest["files"]]
    for path in item.folder.rglob("*"):
        if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
            problems.append(f"{item.name}: {path.name} is {path.stat().st_size:,} bytes (at most {MAX_FILE_BYTES:,})")
    return problems


def total_bytes(root: Path | None = None) -> int:
    root = root or shipped_root()
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


def student_dir(item: ShippedArtifact) -> Path:
    """Where the merged student lives in the user cache: keyed by the adapter's files and the backbone identity."""
    key = hashlib.sha256(
        json.dumps([item.manifest["files"], item.manifest["backbone_identity"]], sort_keys=True).encode()
    ).hexdigest()[:16]
    return cache_root() / "shipped" / f"{item.folder.name}-{key}"


# ----------------------------------------------------------------------------------------------------------- export
def export(kind: str, source: Path, dest: Path, manifest: dict) -> ShippedArtifact:
    """Copy a scorer run (``kind="scorer"``) or a LoRA run's ``adapter/`` (``"lora-student"``) to ``dest`` with its
    weights in float16, then write the manifest with the files' hashes. ``manifest``: everything but ``files`` and
    ``kind``; ``scores`` may come later (:func:`update_scores`, measured on the exported files). Paths are portable."""
    from mlse.data.portable import data_identity, portable_hashes, portable_text  # lazy: loads the data package

    if kind not in KINDS.values():
        raise MlseError(f"unknown artifact kind {kind!r}; expected one of {', '.join(KINDS.values())}")
    with atomic_dir(dest) as tmp:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            rel = path.relative_to(source)
            if kind == "scorer" and path.suffix not in (".json", ".safetensors"):
                continue
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".safetensors":
                _float16_copy(path, target)
            elif path.suffix == ".md":  # e.g. PEFT's model card names the base model by its path in the cache
                target.write_text(portable_text(path.read_text(encoding="utf-8")), encoding="utf-8")
            else:
                shutil.copyfile(path, target)
        data = portable_hashes(manifest.get("data", {}))
        body = {
            **manifest,
            "data": data,
            "data_identity": data_identity(data),
            "kind": kind,
            "name": dest.name,
            "files": file_hashes(tmp),
        }
        (tmp / MANIFEST).write_text(json.dumps(body, indent=1, default=str) + "\n", encoding="utf-8")
    return ShippedArtifact(PREFIX + dest.name, kind, dest, read_shipped_manifest(dest))


def update_scores(item: ShippedArtifact, scores: dict) -> ShippedArtifact:
    """Record measured scores in the manifest (written atomically)."""
    body = {**item.manifest, "scores": scores}
    atomic_write_text(item.folder / MANIFEST, json.dumps(body, indent=1, default=str) + "\n")
    return ShippedArtifact(item.name, item.kind, item.folder, body)


def _float16_copy(source: Path, target: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(source))
    save_file(
        {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}, str(target)
    )
    target.chmod(0o644)  # safetensors writes 0600; a shipped file is read by whoever runs the app (a Space's user)
