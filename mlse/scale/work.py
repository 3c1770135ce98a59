"""What a worker does with one chunk of rows, the same in-process (local engine) and in a Ray actor (Ray engine), so
both engines compute the same numbers from the same chunks.

A :class:`ChunkWorker` loads what its :class:`WorkSpec` names once (models, or a search index), then ``run``s chunks;
payloads are locators, so the worker reads its own texts and no process holds the corpus:

- ``embed``: a corpus shard (:meth:`mlse.scale.corpus.CorpusScan.locator`) -> float32 unit embeddings [n, d];
- ``encode``: ``{"pairs": locator, "fresh": {model: bits}}`` (:mod:`mlse.scale.pairs`) -> ``{model: embeddings}`` of
  the texts the plan marks, each model's in one call;
- ``score``: a chunk of pairs -> the columns :func:`mlse.api.score_pairs` gives;
- ``search``: an embedding shard's path -> ``sims`` and ``ids`` [n, depth] in the index (:mod:`mlse.scale.search`).

``batch_tokens`` bounds a forward pass by estimated tokens (:func:`batch_size`); else a batch holds 64 texts.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from dataclasses import asdict, dataclass

import numpy as np

from mlse import api
from mlse.encoders.protocol import similarity
from mlse.encoders.threads import THREADS_ENV
from mlse.errors import MlseError
from mlse.models import load_model

KINDS = ("embed", "encode", "score", "search")
DEFAULT_BATCH = 64
TRACE_ENV = "MLSE_SCALE_TRACE"  # a folder: each worker notes there which chunk it starts and ends (tests, debugging)


@dataclass(frozen=True)
class WorkSpec:
    """What every worker loads and does: ``kind``, the models and their backend, the batch bound; for ``search`` the
    index file, the neighbours wanted (``depth``) and the lists visited (``nprobe``)."""

    kind: str
    models: tuple[str, ...] = ()
    backend: str = "torch"
    batch_tokens: int | None = None
    index: str | None = None
    depth: int = 16
    nprobe: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise MlseError(f"unknown work kind {self.kind!r}")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise MlseError(f"--batch-tokens must be a positive integer, got {self.batch_tokens}")

    def as_dict(self) -> dict:
        return asdict(self) | {"models": list(self.models)}


def batch_size(texts: list[str], batch_tokens: int | None) -> int:
    """Texts per forward pass: 64, or as many of the chunk's longest text as fit in ``batch_tokens`` (at least 1)."""
    if batch_tokens is None or not texts:
        return DEFAULT_BATCH
    return max(1, batch_tokens // max(len(t.encode("utf-8")) // 4 + 2 for t in texts))  # estimated tokens


def cpu_seconds() -> float:
    """CPU time (user + system) this process has used so far, seconds."""
    times = os.times()
    return round(times.user + times.system, 2)


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, MiB (``ru_maxrss``)."""
    try:
        import resource  # lazy: not on Windows
    except ImportError:
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1 << 20) if sys.platform == "darwin" else peak / 1024, 1)  # bytes on macOS, KiB on Linux


class ChunkWorker:
    """Holds the models (or the index) of ``spec`` (a :class:`WorkSpec` or its dict) and runs chunks through them."""

    def __init__(self, spec: dict | WorkSpec, threads: int | None = None):
        self.spec = spec if isinstance(spec, WorkSpec) else WorkSpec(**(spec | {"models": tuple(spec["models"])}))
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        self.index = None
        if self.spec.kind == "search":
            from mlse.scale.search import load_index  # lazy: only search workers need faiss

            self.index = load_index(self.spec.index, nprobe=self.spec.nprobe, threads=threads)
        elif threads:
            import torch  # lazy: only a worker that sets its thread count needs torch here

            torch.set_num_threads(threads)
            os.environ[THREADS_ENV] = str(threads)  # the ONNX sessions and muse read it: their threads, not 2 each
        scores = self.spec.kind == "score"
        # embed and encode use no embedding cache (the shards, or the driver, keep the vectors); score uses it
        self.models = {
            name: load_model(name, backend=self.spec.backend, calibrated=scores, cache=scores)
            for name in dict.fromkeys(self.spec.models)
        }

    def identities(self) -> dict[str, str]:
        return {name: str(getattr(model, "identity", name)) for name, model in self.models.items()}

    def about(self) -> dict:
        """Who ran a chunk: process id, host, model identities, peak resident memory (MiB) and CPU time (s) so far."""
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "identities": self.identities(),
            "peak_rss_mib": peak_rss_mib(),
            "cpu_s": cpu_seconds(),
        }

    def run(self, payload) -> dict[str, np.ndarray]:
        if self.spec.kind == "embed":
            from mlse.scale.corpus import read_span  # lazy: a locator names where the shard's texts are

            (model,) = self.models.values()
            return {"embedding": self._encode(model, read_span(payload))}
        if self.spec.kind == "search":
            from mlse.scale.search import search_shard  # lazy: as above

            return search_shard(self.index, payload, self.spec.depth)
        from mlse.scale.pairs import chunk_pairs, fresh_texts  # lazy: a locator names where the chunk's pairs are

        if self.spec.kind == "encode":  # the texts the plan marks -> {model: embeddings}, each model's in one call
            chunk = chunk_pairs(payload["pairs"])
            fresh = {name: fresh_texts(chunk, bits) for name, bits in payload["fresh"].items()}
            return {name: self._encode(self.models[name], texts) for name, texts in fresh.items() if texts}
        chunk = chunk_pairs(payload)
        s1, s2 = chunk.s1, chunk.s2
        size = batch_size(s1 + s2, self.spec.batch_tokens)
        out: dict[str, np.ndarray] = {}
        for name, model in self.models.items():
            cos, cal = similarity(model, s1, s2, batch_size=size)
            out[api.column_name(name, api.COSINE)] = cos
            if cal is not None:
                out[api.column_name(name, api.CALIBRATED)] = cal
        return out

    def _encode(self, model, texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=batch_size(texts, self.spec.batch_tokens)), dtype=np.float32)

    def traced_run(self, index: int, payload) -> dict[str, np.ndarray]:
        """:meth:`run`, noted in the folder :data:`TRACE_ENV` names (when set) as ``start-<chunk>-<pid>`` before and
        ``end-<chunk>-<pid>`` after."""
        trace = os.environ.get(TRACE_ENV)
        if trace:
            open(os.path.join(trace, f"start-{index}-{os.getpid()}"), "w").close()
        result = self.run(payload)
        if trace:
            open(os.path.join(trace, f"end-{index}-{os.getpid()}"), "w").close()
        return result

    def __call__(self, batch: dict) -> dict:
        """A Ray Data batch of pickled chunks -> their pickled results, each with :meth:`about` this worker."""
        indices = [int(i) for i in batch["index"]]
        results = [
            pickle.dumps(self.traced_run(i, pickle.loads(p)), protocol=5) for i, p in zip(indices, batch["payload"])
        ]
        about = pickle.dumps(self.about())
        return {
            "index": np.asarray(indices),
            "result": np.array(results, dtype=object),
            "worker": np.array([about] * len(results), dtype=object),
        }
