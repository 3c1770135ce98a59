"""ONNX Runtime encoders (fp32 and dynamic int8) for any sentence-transformers model in the registry.

The model is exported once (:mod:`mlse.encoders.onnx.export`); encoding then needs only onnxruntime, the tokenizer and
numpy, never torch. Speed comes from ``threads`` Python threads calling ``run`` concurrently on one single-threaded
session (each batch runs on one core: no fork/join between the many small ops), length-sorted batches padded only to
their own longest text, and int8 weights (:mod:`mlse.encoders.onnx.quantize`); see docs/speed.md.

Int8 activations get one scale per batch, so an int8 vector depends slightly on its batch-mates. The embedding cache
keys by backend, so torch and int8 vectors are never mixed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from mlse.encoders.compact_tokenizer import RustTokenizer, compact_tokenizer, padded
from mlse.encoders.identity import folder_fingerprint, text_prefix, with_backend
from mlse.encoders.onnx.export import META_FILE, MODEL_FILE, TOKENIZER_FILE, ensure_export, require, variant_tag
from mlse.encoders.progress import progress_bar, show_bar
from mlse.encoders.protocol import Scoring
from mlse.encoders.rows import RowFile
from mlse.encoders.text_cut import cut_texts
from mlse.encoders.threads import cpu_session, default_threads
from mlse.encoders.torch import SentenceTransformerEncoder
from mlse.errors import MlseError

# Texts tokenised and sorted together: bounds memory on huge inputs while keeping length sorting effective.
_CHUNK = 16_384
# Padded tokens per batch (see plan_batches): it matters for long texts, where 64 texts of 256 tokens would make one
# 16k-token batch (hundreds of MB of activations, and one worker idle while the other finishes it).
DEFAULT_MAX_TOKENS = 512
PARALLEL_MODES = ("batches", "intra")


def plan_batches(
    lengths: np.ndarray, batch_size: int, workers: int = 1, max_tokens: int | None = None
) -> list[np.ndarray]:
    """Row indices per batch: longest texts first; at most ``batch_size`` texts and ``max_tokens`` padded tokens each.
    Longest-first starts the costliest batches first, so workers on a shared queue finish together. With fewer texts
    than workers x batch, the texts are split evenly so that every core gets work."""
    n = len(lengths)
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")  # [n]
    batch_size = max(batch_size, 1)
    budget = max_tokens or 1 << 62
    batches, start = [], 0
    while start < n:
        width = max(int(lengths[order[start]]), 1)  # the batch's longest text: its rows are padded to this
        size = max(1, min(batch_size, budget // width, n - start))
        batches.append(order[start : start + size])
        start += size
    if len(batches) < workers and n > 1:
        return list(np.array_split(order, min(workers, n)))
    return batches


class OnnxEncoder(Scoring):
    """A sentence-transformers model run by onnxruntime; ``quantized`` selects the dynamic int8 graph.
    ``threads``: CPU cores (default ``MLSE_THREADS`` or 2). ``parallel``: ``"batches"`` (default; ``threads`` batches
    in flight on one single-threaded session) or ``"intra"`` (one batch at a time on ``threads`` intra-op threads).
    ``max_tokens``: padded tokens per batch (None: only ``batch_size`` limits). ``device``: None or ``"cpu"``; another
    device and a missing onnxruntime are refused here, not at first encode."""

    def __init__(
        self,
        spec,
        *,
        quantized: bool = False,
        threads: int | None = None,
        parallel: str = "batches",
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        max_seq_length: int | None = None,
        device: str | None = None,
    ):
        require(
            "onnxruntime", "the onnx backends need onnxruntime: pip install onnxruntime onnx (or use --backend torch)"
        )
        if device not in (None, "cpu"):
            raise MlseError(f"the onnx backends run on the CPU only, not on {device!r}; use --backend torch there")
        if parallel not in PARALLEL_MODES:
            raise MlseError(f"unknown parallel mode {parallel!r}; expected one of {', '.join(PARALLEL_MODES)}")
        self.spec = spec
        self.name = spec.name
        self.quantized = quantized
        self.backend = "onnx-int8" if quantized else "onnx"
        self.threads = threads or default_threads()
        self.parallel = parallel
        self.max_tokens = max_tokens
        self.max_seq_length = max_seq_length
        # Only for the folder and its weight identity: the torch model itself is never loaded by this encoder.
        self._weights = SentenceTransformerEncoder(spec, max_seq_length=max_seq_length)
        self._session = None
        self._tokenizer = None
        self._table: RowFile | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._prefix = ""
        self._max_length: int | None = None
        self._chars_per_token: int | None = None
        self.meta: dict = {}
        self._lock = threading.Lock()

    # -- identity and files ------------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._weights.path

    @property
    def identity(self) -> str:
        variant = "int8" if self.quantized else "fp32"
        return with_backend(self._weights.identity, f"{self.backend}-{variant_tag(variant)}")

    @property
    def export_dir(self) -> Path:
        """The cached export folder (exported on first access)."""
        return ensure_export(self.path, self.name, folder_fingerprint(self.path), "int8" if self.quantized else "fp32")

    # -- lazy loading -----------------------------------------------------------------------------------------------
    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            # sentence-transformers adds a model's prompt inside encode(); the raw tokenizer here does not, so the
            # prefix is added before tokenising (the export folder is keyed by the fingerprint, which covers it).
            self._prefix = text_prefix(self.path)
            folder = self.export_dir
            self.meta = json.loads((folder / META_FILE).read_text())
            self._max_length = int(self.max_seq_length or self.meta["max_seq_length"])
            # the compact sentencepiece form when its pipeline allows (mlse.encoders.compact_tokenizer), else Rust
            tokenizer_file = folder / TOKENIZER_FILE
            tok = compact_tokenizer(tokenizer_file, self._max_length) or RustTokenizer(tokenizer_file, self._max_length)
            if self.meta.get("embedding_table"):  # rows are read from disk as tokens need them (mlse.encoders.rows)
                self._table = RowFile.from_npy(folder / self.meta["embedding_table"])  # [V, H]
            intra = self.threads if self.parallel == "intra" else 1
            self._tokenizer, self._session = tok, cpu_session(folder / MODEL_FILE, intra)

    @property
    def dim(self) -> int:
        self._load()
        return int(self.meta["dim"])

    # -- encoding ---------------------------------------------------------------------------------------------------
    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        self._load()
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # [n, d]
        with progress_bar(len(texts), f"encode ({self.name})", show_bar(show_progress, len(texts))) as bar:
            for start in range(0, len(texts), _CHUNK):
                cut = cut_texts(texts[start : start + _CHUNK], self._max_length, self.chars_per_token)
                chunk = [self._prefix + t for t in cut]
                encodings = self._tokenizer.encode_ids(chunk)  # token ids per text, <s> ... </s> included
                lengths = np.fromiter((len(e) for e in encodings), dtype=np.int64, count=len(encodings))  # [m]
                workers = self.threads if self.parallel == "batches" else 1
                batches = plan_batches(lengths, batch_size, workers, self.max_tokens)
                self._run(batches, encodings, out[start : start + len(chunk)], workers, bar)
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def chars_per_token(self) -> int:
        """``C`` of :mod:`mlse.encoders.text_cut` for the export's tokenizer (read once, when a long text comes)."""
        self._load()
        if self._chars_per_token is None:
            self._chars_per_token = self._tokenizer.chars_per_token()
        return self._chars_per_token

    def _run(self, batches: list[np.ndarray], encodings, out: np.ndarray, workers: int, bar) -> None:
        """Fill ``out[rows]`` for every batch; with several workers, on threads that take the batches in order."""

        def work(rows: np.ndarray) -> None:
            out[rows] = self._session.run(None, self._feed(encodings, rows))[0]  # [b, d]
            bar.update(len(rows))

        if min(workers, len(batches)) <= 1:
            for rows in batches:
                work(rows)
            return
        # threads kept for the encoder's life: starting them per call costs more than a short pair's batch (the app
        # encodes two sentences per model and request)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="mlse-onnx")
        list(self._pool.map(work, batches))  # re-raises a worker's exception here

    def _feed(self, encodings: list[list[int]], rows: np.ndarray) -> dict[str, np.ndarray]:
        """Right-padded inputs for the texts at ``rows``: int64 [b, T] (T = the longest of them), and the word-
        embedding rows [b, T, H] for a graph that takes ``inputs_embeds`` (padding gets the pad token's row)."""
        ids, mask = padded([encodings[i] for i in rows], self.meta["pad_token_id"])  # [b, T] each
        feed = {"input_ids": ids, "attention_mask": mask}
        if self._table is not None:
            feed = {"inputs_embeds": self._table[ids], "attention_mask": mask}  # [b, T, H] read from the file
        if "token_type_ids" in self.meta["inputs"]:
            feed["token_type_ids"] = np.zeros_like(ids)  # one segment: single sentences are all type 0
        return feed
