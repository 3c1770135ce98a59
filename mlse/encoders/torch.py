"""The torch runtime: a sentence-transformers model loaded from a local folder on first use.

Nothing here imports torch at module level: an encoder knows its identity (name + weight hash) without it, so a run
whose embeddings are all cached never loads the model at all.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlse.encoders.identity import folder_fingerprint
from mlse.encoders.registry import ModelSpec, materialise
from mlse.errors import ModelNotFoundError


class SentenceTransformerEncoder:
    """A sentence-transformers model loaded from a local folder on first use."""

    def __init__(self, spec: ModelSpec, *, device: str | None = None, max_seq_length: int | None = None):
        self.spec = spec
        self.name = spec.name
        self.device = device
        self.max_seq_length = max_seq_length
        self._path: Path | None = None
        self._model = None
        self._identity: str | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = materialise(self.spec)
        return self._path

    @property
    def identity(self) -> str:
        if self._identity is None:
            suffix = f"@{self.max_seq_length}" if self.max_seq_length else ""
            self._identity = f"{self.name}:{folder_fingerprint(self.path)[:16]}{suffix}"
        return self._identity

    @property
    def model(self):
        """The underlying ``SentenceTransformer`` (imports torch on first access)."""
        if self._model is None:
            self._model = load_sentence_transformer(self.path, device=self.device)
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if show_progress is None:
            show_progress = len(texts) >= 1000
        emb = self.model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            normalize_embeddings=normalize,
            convert_to_numpy=True,
        )
        return np.ascontiguousarray(emb, dtype=np.float32)  # [n, d]


def load_sentence_transformer(path: Path, *, device: str | None = None):
    """Load a local folder with sentence-transformers; a folder without modules.json gets mean pooling."""
    from sentence_transformers import SentenceTransformer  # lazy: imports torch (seconds, hundreds of MB)

    if device is None:
        device = default_device()
    try:
        # Never run code shipped inside a model folder: a hub model (or a folder a user points at) could carry any.
        return SentenceTransformer(str(path), device=device, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"could not load the model folder {path}: {exc}") from None


def default_device() -> str:
    """cuda when a GPU is present, else cpu (``MLSE_DEVICE`` overrides)."""
    if os.environ.get("MLSE_DEVICE"):
        return os.environ["MLSE_DEVICE"]
    import torch  # lazy: only asked when no device is set

    return "cuda" if torch.cuda.is_available() else "cpu"
