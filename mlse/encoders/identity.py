"""What an encoder *is*, without loading it: weight fingerprints, the text prefix, and backend tags.

An identity is the model's name plus a hash of the files that define its outputs (weights, configs, tokenizer,
prompts); it keys the embedding cache and ties heads and calibrations to their weights. Hashes are memoised in
``<cache root>/fingerprints.json`` by each file's path, size and mtime. Non-torch runtimes append a backend tag
(``|backend=onnx-int8-v2.9ccc127a``), so the cache keeps their vectors apart, while :func:`weights_identity` still
recovers the weights alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mlse.atomic import atomic_write_text, move_aside
from mlse.data.hashing import file_sha256, update_with_file
from mlse.dirs import cache_root
from mlse.errors import MlseError
from mlse.runs.folders import read_json_dict

log = logging.getLogger(__name__)

# Files whose bytes define a sentence-transformers model's behaviour (weights first).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
_CONFIG_NAMES = (
    "modules.json",
    "config.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "config_sentence_transformers.json",
)

# How an encoder computes: "torch" (sentence-transformers), "onnx" (onnxruntime, fp32), "onnx-int8" (dynamic int8).
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "torch"
_BACKEND_TAG = "|backend="


# -- backend tags ---------------------------------------------------------------------------------------------------
def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise MlseError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def with_backend(weights_identity: str, backend: str) -> str:
    return f"{weights_identity}{_BACKEND_TAG}{backend}"


def weights_identity(identity: str) -> str:
    """The identity of the weights alone: ``identity`` without its backend tag (torch identities have none)."""
    return identity.split(_BACKEND_TAG, 1)[0]


def backend_of(identity: str) -> str:
    """The backend an identity names: ``onnx-int8`` for ``...|backend=onnx-int8-v2.9ccc127a``; ``torch`` if untagged."""
    if _BACKEND_TAG not in identity:
        return "torch"
    tag = identity.split(_BACKEND_TAG, 1)[1].split("|", 1)[0]  # "onnx-int8-v2.9ccc127a" (backend-recipe)
    return tag.rsplit("-v", 1)[0]


# -- the text a model puts before every input -----------------------------------------------------------------------
def text_prefix(model) -> str:
    """The text a model puts before every input: its sentence-transformers default prompt ("" when it has none).
    ``model``: a model folder or a loaded ``SentenceTransformer``. Every path that tokenises on its own (ONNX,
    fine-tuning) prepends it, as ``SentenceTransformer.encode`` does; :func:`folder_fingerprint` covers it."""
    if isinstance(model, (str, os.PathLike)):
        config = read_json_dict(Path(model) / "config_sentence_transformers.json")
        prompts, name = config.get("prompts"), config.get("default_prompt_name")
    else:
        prompts, name = getattr(model, "prompts", None), getattr(model, "default_prompt_name", None)
    return str((prompts or {}).get(name) or "") if name else ""


# -- fingerprints ---------------------------------------------------------------------------------------------------
def folder_fingerprint(path: Path) -> str:
    """sha256 over the model folder's weight and config files (names and contents), memoised (module docstring)."""
    files = sorted(
        p for p in path.rglob("*") if p.is_file() and (p.suffix in _WEIGHT_SUFFIXES or p.name in _CONFIG_NAMES)
    )
    return files_fingerprint(path, files)


def files_fingerprint(root: Path, files: Sequence[Path]) -> str:
    """sha256 over ``files`` (their paths relative to ``root``, then their bytes), in the order given; memoised."""

    def digest() -> str:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(root)).encode() + b"\0")
            update_with_file(h, p)
        return h.hexdigest()

    return _memoised(list(files), "", digest)


def file_sha256_memo(path: Path) -> str:
    """sha256 of one file's bytes, memoised on disk like :func:`folder_fingerprint` (by path, size and mtime)."""
    return _memoised([path], "file-sha256", lambda: file_sha256(path))


def _memoised(files: list[Path], kind: str, compute: Callable[[], str]) -> str:
    """``compute()``, remembered in the cache root under the files' (path, size, mtime) stamp (a changed file is
    hashed again) and ``kind``."""
    stamp = json.dumps([[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in files])
    memo_path = fingerprint_memo_path()
    memo = _read_memo(memo_path)
    key = hashlib.sha256((kind + stamp).encode()).hexdigest()
    if isinstance(memo.get(key), str) and memo[key]:
        return memo[key]
    memo[key] = value = compute()
    try:
        atomic_write_text(memo_path, json.dumps(memo))
    except OSError:  # the memo is an optimisation; a read-only cache dir must not break encoding
        log.debug("could not write %s", memo_path)
    return value


def fingerprint_memo_path() -> Path:
    return cache_root() / "fingerprints.json"


def _read_memo(path: Path) -> dict:
    """The fingerprint memo; a file that is not a JSON object is moved aside (``*.corrupt-<time>``) and rebuilt."""
    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
    except OSError:  # missing, or unreadable (permissions): the memo is an optimisation, hashing goes on without it
        return {}
    except ValueError:  # not UTF-8, or not JSON
        memo = None
    if isinstance(memo, dict):
        return memo
    log.warning("fingerprint memo %s is damaged (not a JSON object); moving it aside and rebuilding", path)
    move_aside(path, time.strftime("%Y%m%d-%H%M%S"))  # in a read-only cache the memo is rebuilt in memory only
    return {}
