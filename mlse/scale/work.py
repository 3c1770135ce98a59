"""What a worker does with one chunk of rows, the same in-process (local engine) and in a Ray actor (Ray engine), so
both engines compute the same numbers from the same chunks.

A :class:`ChunkWorker` loads its models once (``mlse.api.load_model``, as the ``score`` command does) and then
``run``s chunks: ``embed`` turns texts into float32 L2-normalised embeddings [n, d]; ``score`` turns (sentences1,
sentences2) into the columns :func:`mlse.api.score_rows` gives (each model's cosine, then its 0-5 score when it is
calibrated), through :func:`mlse.api.pair_scores`, the one place a pair's scores are computed. Called with a Ray Data
batch (``__call__``), it unpickles each chunk, runs it and pickles the result.

``batch_tokens`` bounds the texts of one forward pass by an estimate of their token count (UTF-8 bytes / 4 + 2 per
text, the longest text of the chunk times the batch size); without it a batch holds 64 texts, as ``score`` uses.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import asdict, dataclass

import numpy as np

from mlse import api
from mlse.errors import MlseError

KINDS = ("embed", "encode", "score")
DEFAULT_BATCH = 64


@dataclass(frozen=True)
class WorkSpec:
    """What every worker loads and does: ``kind`` (embed or score), the models, their backend, the batch bound."""

    kind: str
    models: tuple[str, ...]
    backend: str
    batch_tokens: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise MlseError(f"unknown work kind {self.kind!r}")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise MlseError(f"--batch-tokens must be a positive integer, got {self.batch_tokens}")

    def as_dict(self) -> dict:
        return asdict(self) | {"models": list(self.models)}


def estimated_tokens(text: str) -> int:
    return len(text.encode("utf-8")) // 4 + 2


def batch_size(texts: list[str], batch_tokens: int | None) -> int:
    """Texts per forward pass: 64, or as many of the chunk's longest text as fit in ``batch_tokens`` (at least 1)."""
    if batch_tokens is None or not texts:
        return DEFAULT_BATCH
    return max(1, batch_tokens // max(estimated_tokens(t) for t in texts))


class ChunkWorker:
    """Holds the models of ``spec`` (a :class:`WorkSpec` or its dict) and runs chunks through them."""

    def __init__(self, spec: dict | WorkSpec, threads: int | None = None):
        self.spec = spec if isinstance(spec, WorkSpec) else WorkSpec(**(spec | {"models": tuple(spec["models"])}))
        if threads:
            import torch  # lazy: only a worker that sets its thread count needs torch here

            torch.set_num_threads(threads)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        embed = self.spec.kind in ("embed", "encode")
        # embed and encode use no embedding cache (the shards, or the driver, keep the vectors); score uses it
        self.models = {
            name: (
                api.load_model(name, backend=self.spec.backend, calibrated=False, cache=False)
                if embed
                else api.load_model(name, backend=self.spec.backend)
            )
            for name in dict.fromkeys(self.spec.models)
        }

    def identities(self) -> dict[str, str]:
        return {name: str(getattr(model, "identity", name)) for name, model in self.models.items()}

    def run(self, payload) -> dict[str, np.ndarray]:
        if self.spec.kind == "embed":
            texts = list(payload)
            (model,) = self.models.values()
            emb = model.encode(texts, batch_size=batch_size(texts, self.spec.batch_tokens))
            return {"embedding": np.asarray(emb, dtype=np.float32)}
        if self.spec.kind == "encode":  # {model: texts} -> {model: embeddings}, each list encoded in one call
            return {
                name: np.asarray(
                    self.models[name].encode(list(texts), batch_size=batch_size(list(texts), self.spec.batch_tokens)),
                    dtype=np.float32,
                )
                for name, texts in payload.items()
                if texts
            }
        s1, s2 = (list(side) for side in payload)
        size = batch_size(s1 + s2, self.spec.batch_tokens)
        out: dict[str, np.ndarray] = {}
        for name, model in self.models.items():
            cos, cal = api.pair_scores(model, s1, s2, batch_size=size)
            out[api.column_name(name, api.COSINE)] = cos
            if cal is not None:
                out[api.column_name(name, api.CALIBRATED)] = cal
        return out

    def __call__(self, batch: dict) -> dict:
        """A Ray Data batch of pickled chunks -> their pickled results, with the worker's model identities."""
        results = [pickle.dumps(self.run(pickle.loads(p)), protocol=5) for p in batch["payload"]]
        ident = pickle.dumps(self.identities())
        return {
            "index": np.asarray(batch["index"]),
            "result": np.array(results, dtype=object),
            "identity": np.array([ident] * len(results), dtype=object),
        }
