"""A soup of LoRA students as one LoRA adapter: the members' low-rank factors stacked.

Each member ``i`` of a soup (:mod:`mlse.encoders.weight_soup`) trained a LoRA adapter on the same base, so its task
vector on a target matrix is ``s_i B_i A_i`` (``s_i`` its scale: ``alpha / r``, or ``alpha / sqrt(r)`` with rsLoRA).
The soup ``base + sum_i w_i s_i B_i A_i`` is then itself a LoRA update of rank ``sum_i r_i``:

    B = [c_1 B_1 | c_2 B_2 | ...],   A = [c_1 A_1 ; c_2 A_2 ; ...],   c_i = sqrt(w_i s_i),   scale 1,

so ``B A = sum_i c_i^2 B_i A_i``. (A negative coefficient puts its sign on ``B_i`` alone.) The adapter merges onto
the base exactly as any adapter does (:func:`mlse.encoders.lora_merge.build_merged`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_dir, atomic_write_text
from mlse.encoders.lora_merge import EXTRA_DIR
from mlse.encoders.weight_soup import SOUP_FILE
from mlse.errors import MlseError

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
A_SUFFIX, B_SUFFIX = ".lora_A.weight", ".lora_B.weight"
# settings that must agree between members (anything else about how a matrix is adapted) or that no soup supports
SAME = ("target_modules", "bias", "fan_in_fan_out", "layers_to_transform", "layers_pattern", "exclude_modules")
UNSUPPORTED = ("use_dora", "modules_to_save", "rank_pattern", "alpha_pattern", "trainable_token_indices")


def lora_scale(config: Mapping) -> float:
    """The factor PEFT multiplies ``B A`` by: ``lora_alpha / r``, or ``lora_alpha / sqrt(r)`` with rsLoRA."""
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    if r <= 0:
        raise MlseError(f"an adapter of rank {r}")
    return alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


def stack_lora_tensors(
    members: Sequence[Mapping[str, np.ndarray]], coefficients: Sequence[float]
) -> dict[str, np.ndarray]:
    """The stacked factors whose product is ``sum_i coefficients[i] * B_i A_i`` on every adapted matrix.
    ``members``: adapter state dicts over the same matrices (A_i [r_i, in], B_i [out, r_i]); ``coefficients[i]``:
    ``w_i s_i``. Computed in float64, stored in the first member's dtype."""
    if len(members) != len(coefficients) or not members:
        raise MlseError(f"a soup needs one weight per member: {len(members)} members, {len(coefficients)} weights")
    names = set(members[0])
    for i, m in enumerate(members[1:], start=2):
        if set(m) != names:
            raise MlseError(f"member {i} adapts other matrices than member 1 (e.g. {min(names ^ set(m))!r})")
    others = sorted(n for n in names if not n.endswith((A_SUFFIX, B_SUFFIX)))
    if others:
        raise MlseError(f"only LoRA factors can be stacked; the adapters also hold {others[0]!r}")
    out = {}
    for a_name in sorted(n for n in names if n.endswith(A_SUFFIX)):
        b_name = a_name[: -len(A_SUFFIX)] + B_SUFFIX
        if b_name not in names:
            raise MlseError(f"{a_name!r} has no matching {b_name!r}")
        a_parts, b_parts = [], []
        for i, (m, c) in enumerate(zip(members, coefficients, strict=True), start=1):
            a, b = m[a_name].astype(np.float64), m[b_name].astype(np.float64)
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
                raise MlseError(f"member {i}: {a_name!r} {a.shape} and its B {b.shape} are not LoRA factors")
            if a_parts and (a.shape[1] != a_parts[0].shape[1] or b.shape[0] != b_parts[0].shape[0]):
                raise MlseError(f"member {i}: {a_name!r} adapts a matrix of another shape than member 1's")
            root = math.sqrt(abs(float(c)))
            a_parts.append(root * a)
            b_parts.append(math.copysign(root, float(c)) * b)
        dtype = members[0][a_name].dtype
        out[a_name] = np.concatenate(a_parts, axis=0).astype(dtype)
        out[b_name] = np.concatenate(b_parts, axis=1).astype(dtype)
    return out


def _read_adapter(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    from safetensors.numpy import load_file  # lazy: only this needs safetensors

    try:
        config = json.loads((folder / CONFIG_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise MlseError(f"{folder}: not a LoRA adapter folder ({exc})") from None
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise MlseError(f"{folder}: a {config.get('peft_type')} adapter, not LoRA")
    for key in UNSUPPORTED:
        if config.get(key):
            raise MlseError(f"{folder}: {key}={config[key]!r} cannot be stacked into one LoRA adapter")
    if (folder / EXTRA_DIR).exists():
        raise MlseError(f"{folder}: the adapter carries modules after pooling ({EXTRA_DIR}/), which do not add up")
    if not (folder / WEIGHTS_FILE).is_file():
        raise MlseError(f"{folder}: no {WEIGHTS_FILE}")
    return config, load_file(folder / WEIGHTS_FILE)


def build_lora_soup(
    adapters: Sequence[Path], weights: Sequence[float], out: Path, *, names: Sequence[str] | None = None
) -> Path:
    """Write the adapter of the soup ``sum_i weights[i] * (member_i - base)`` of LoRA adapter folders to ``out``.
    ``names`` (default: the folders) label the members in ``soup.json``. Rank and ``lora_alpha`` are ``sum_i r_i``
    (scale 1): each member's own scale is inside its coefficient."""
    from safetensors.numpy import save_file

    adapters = [Path(a) for a in adapters]
    if len(adapters) != len(weights) or not adapters:
        raise MlseError(f"a soup needs one weight per member: {len(adapters)} members, {len(weights)} weights")
    read = [_read_adapter(a) for a in adapters]
    first = read[0][0]
    for folder, (config, _) in zip(adapters[1:], read[1:], strict=True):
        for key in SAME:
            if config.get(key) != first.get(key):
                raise MlseError(f"{folder}: {key}={config.get(key)!r}, but {adapters[0]} has {first.get(key)!r}")
    coefficients = [float(w) * lora_scale(c) for w, (c, _) in zip(weights, read, strict=True)]
    stacked = stack_lora_tensors([t for _, t in read], coefficients)
    rank = sum(int(c["r"]) for c, _ in read)
    config = {
        **first,
        "r": rank,
        "lora_alpha": rank,
        "use_rslora": False,
        "lora_dropout": 0.0,
        "inference_mode": True,
        "base_model_name_or_path": None,
    }
    record = {
        "members": [str(n) for n in (names or adapters)],
        "weights": [float(w) for w in weights],
        "ranks": [int(c["r"]) for c, _ in read],
        "scales": [lora_scale(c) for c, _ in read],
        "rank": rank,
        "formula": "B = [c_i B_i], A = [c_i A_i], c_i = sqrt(w_i * scale_i), scale 1",
    }
    with atomic_dir(out) as tmp:
        save_file(stacked, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        atomic_write_text(tmp / CONFIG_FILE, json.dumps(config, indent=1) + "\n")
        atomic_write_text(tmp / SOUP_FILE, json.dumps(record, indent=1) + "\n")
    return out
