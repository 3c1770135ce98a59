"""Models fine-tuned from one base, combined in weight space: ``base + sum_i w_i (member_i - base)``.

Task arithmetic (Ilharco et al. 2023); weights summing to 1 give a uniform or weighted *model soup* (Wortsman et al.
2022). A LoRA student is merged first: its run folder's ``model`` is an ordinary sentence-transformers folder.
:func:`build_soup` writes the result atomically, with a ``soup.json`` naming the base, the members and the weights.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_dir, atomic_write_text
from mlse.errors import MlseError

WEIGHTS_FILE = "model.safetensors"
SOUP_FILE = "soup.json"


def soup_tensors(
    base: Mapping[str, np.ndarray], members: Sequence[Mapping[str, np.ndarray]], weights: Sequence[float]
) -> dict[str, np.ndarray]:
    """``base + sum_i weights[i] * (members[i] - base)`` per tensor, computed in float64 and stored in the base's dtype.
    Members must hold the base's names and shapes; non-float tensors must be equal in all and are copied."""
    if len(members) != len(weights) or not members:
        raise MlseError(f"a soup needs one weight per member: {len(members)} members, {len(weights)} weights")
    out = {}
    for name, b in base.items():
        for i, m in enumerate(members):
            if name not in m:
                raise MlseError(f"member {i + 1} has no tensor {name!r}: not fine-tuned from this base")
            if m[name].shape != b.shape:
                raise MlseError(f"member {i + 1}: tensor {name!r} is {m[name].shape}, the base's is {b.shape}")
        if not np.issubdtype(b.dtype, np.floating):
            if any(not np.array_equal(m[name], b) for m in members):
                raise MlseError(f"tensor {name!r} is not a float tensor and differs between the models")
            out[name] = b.copy()
            continue
        b64 = b.astype(np.float64)
        acc = b64.copy()
        for w, m in zip(weights, members, strict=True):
            acc += float(w) * (m[name].astype(np.float64) - b64)
        out[name] = acc.astype(b.dtype)
    extra = {n for m in members for n in m} - set(base)
    if extra:
        raise MlseError(f"members hold tensors the base has not: {sorted(extra)[:3]}")
    return out


def _modules(folder: Path) -> list[tuple[str, str]]:
    """(path, class name) of each module of a sentence-transformers folder (class paths move between versions)."""
    try:
        entries = json.loads((folder / "modules.json").read_text())
    except (OSError, ValueError) as exc:
        raise MlseError(f"{folder}: not a sentence-transformers folder ({exc})") from None
    return [(e["path"], e["type"].rsplit(".", 1)[-1]) for e in entries]


def build_soup(base: Path, members: Sequence[Path], weights: Sequence[float], out: Path) -> Path:
    """Write the soup of the sentence-transformers folders ``members`` (fine-tuned from ``base``) to ``out``."""
    from safetensors.numpy import load_file, save_file  # lazy: only this needs safetensors

    base, members = Path(base), [Path(m) for m in members]
    layout = _modules(base)
    for m in members:
        if _modules(m) != layout:
            raise MlseError(f"{m}: its modules {_modules(m)} are not the base's {layout}")
    # the weight files of the base, relative to it: the root module's and each sub-module's
    files = sorted({Path(path) / WEIGHTS_FILE for path, _ in layout if (base / path / WEIGHTS_FILE).is_file()})
    if not files:
        raise MlseError(f"{base}: no {WEIGHTS_FILE} to combine")
    with atomic_dir(out) as tmp:
        shutil.copytree(base, tmp, dirs_exist_ok=True)  # configuration and tokenizer: the base's
        for rel in files:
            missing = [m for m in members if not (m / rel).is_file()]
            if missing:
                raise MlseError(f"{missing[0]}: no {rel}")
            souped = soup_tensors(load_file(base / rel), [load_file(m / rel) for m in members], weights)
            save_file(souped, str(tmp / rel), metadata={"format": "pt"})
        record = {"base": str(base), "members": [str(m) for m in members], "weights": [float(w) for w in weights]}
        atomic_write_text(tmp / SOUP_FILE, json.dumps(record, indent=1) + "\n")
    return out
