"""A *scorer*: a frozen backbone encoder plus trained heads (Stage 1, Stage 2), usable anywhere an encoder is.

On disk a scorer is a run folder::

    runs/minilm-en+s1+s2/
        scorer.json          backbone name + identity, the heads in order, training data hashes, metrics
        stage1.safetensors   head weights (stage1.json beside: its config, languages, training history)
        stage2.safetensors

Folders are written to a temporary sibling and renamed into place, so a reader never sees half a run. Loading checks
that the backbone's identity (name + weight hash) is the one the heads were trained on, and refuses otherwise.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlse.atomic import atomic_dir
from mlse.encoders.identity import backend_of, weights_identity
from mlse.encoders.load import load_encoder
from mlse.encoders.protocol import Scoring
from mlse.errors import MlseError
from mlse.runs.folders import SCORER_FILE, read_scorer_json


class BackboneMismatchError(MlseError):
    """The heads were trained on another backbone (or other weights) than the one supplied."""


class Scorer(Scoring):
    """backbone -> [Stage 1 meaning] -> [Stage 2 refinement]; satisfies the Encoder protocol."""

    def __init__(self, backbone, *, stage1=None, stage2=None, name: str | None = None, metadata: dict | None = None):
        if stage2 is not None and stage1 is None:
            raise ValueError("a Stage 2 head needs the Stage 1 head it was trained on")
        self.backbone = backbone
        self.stage1 = stage1
        self.stage2 = stage2
        self.metadata = metadata or {}
        suffix = "".join(s for s, h in (("+s1", stage1), ("+s2", stage2)) if h is not None)
        self.name = name or f"{backbone.name}{suffix}"

    @property
    def heads(self) -> list[tuple[str, Any]]:
        return [(k, h) for k, h in (("stage1", self.stage1), ("stage2", self.stage2)) if h is not None]

    @property
    def identity(self) -> str:
        digest = hashlib.sha256()
        for kind, head in self.heads:
            tensors, _ = head.state()
            digest.update(kind.encode())
            for key in sorted(tensors):
                digest.update(key.encode() + tensors[key].detach().cpu().numpy().tobytes())
        return f"{self.backbone.identity}|heads:{digest.hexdigest()[:16]}"

    def encode_parts(self, texts: Sequence[str], *, batch_size: int = 64) -> dict[str, np.ndarray]:
        """Every representation of the texts: backbone, meaning and language (Stage 1), refined (Stage 2)."""
        raw = self.backbone.encode(texts, batch_size=batch_size)  # [n, d]
        parts = {"backbone": raw}
        if self.stage1 is not None:
            parts["meaning"] = self.stage1.transform(raw)
            parts["language"] = self.stage1.language_embedding(raw)
        if self.stage2 is not None:
            parts["refined"] = self.stage2.transform(parts["meaning"])
        return parts

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        emb = self.backbone.encode(texts, batch_size=batch_size, show_progress=show_progress)  # [n, d]
        for _, head in self.heads:  # Stage 1, then Stage 2
            emb = head.transform(emb)
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        if normalize:
            emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        return emb

    def calibrate(self, cos: np.ndarray) -> np.ndarray | None:
        """Cosine -> 0-5 when a Stage 2 head (with its dev calibration) is present, else None."""
        return self.stage2.calibrate(cos) if self.stage2 is not None else None

    # -- persistence ------------------------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        """Write the run folder atomically (temporary sibling, then rename)."""
        from safetensors.torch import save_file  # lazy: imports torch; a scorer's heads are torch modules

        folder = Path(folder)
        with atomic_dir(folder) as tmp:
            for kind, head in self.heads:
                tensors, meta = head.state()
                save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(tmp / f"{kind}.safetensors"))
                (tmp / f"{kind}.json").write_text(json.dumps(meta, indent=1))
            manifest = {
                "format": "mlse-scorer/1",
                "name": folder.name,
                "backbone": self.backbone.name,
                # the weights' identity: the heads fit any backend of these weights (torch, onnx, onnx-int8)
                "backbone_identity": weights_identity(self.backbone.identity),
                "backbone_backend": backend_of(self.backbone.identity),
                "heads": [kind for kind, _ in self.heads],
                **self.metadata,
            }
            (tmp / SCORER_FILE).write_text(json.dumps(manifest, indent=2, default=str))
        return folder

    @classmethod
    def load(cls, folder: str | Path, *, backbone=None, name: str | None = None, backend: str = "torch") -> Scorer:
        """Load a run folder; the backbone is loaded by its recorded name unless given, and must match.

        ``backend`` is the backbone's runtime (torch, onnx, onnx-int8); the match is on the weights, not the backend.
        """
        # lazy: the heads are torch modules, and importing torch costs seconds; reading a manifest must not pay it
        from safetensors.torch import load_file

        from mlse.heads.stage1 import Stage1Head
        from mlse.heads.stage2 import Stage2Head

        folder = Path(folder)
        manifest = read_scorer_json(folder)
        if backbone is None:
            backbone = load_encoder(manifest["backbone"], backend=backend)
        if weights_identity(backbone.identity) != weights_identity(manifest["backbone_identity"]):
            raise BackboneMismatchError(
                f"scorer {folder} was trained on backbone {manifest['backbone_identity']}, "
                f"but {backbone.name!r} is {backbone.identity}: retrain the heads on this backbone"
            )
        loaders = {"stage1": Stage1Head, "stage2": Stage2Head}
        heads = {}  # kind -> head: the keyword arguments stage1, stage2
        for kind in manifest["heads"]:
            meta = json.loads((folder / f"{kind}.json").read_text())
            heads[kind] = loaders[kind].from_state(load_file(str(folder / f"{kind}.safetensors")), meta)
        return cls(backbone, **heads, name=name or folder.name, metadata=manifest)


def backbone_name(folder: str | Path) -> str:
    """The name of the backbone a scorer run's heads were trained on, as its ``scorer.json`` records it: the one lookup
    the model factory (:func:`mlse.models.load_model`) and the app's model pool load a scorer's backbone by."""
    return str(read_scorer_json(Path(folder))["backbone"])
