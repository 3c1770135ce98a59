"""Keep the loaded encoders within a memory budget: estimate each one's size, evict the least recently used.

The estimate is the weights' in-memory size, read from files (no torch needed): an encoder's own ``resident_bytes()``
wins; else a model folder's weight files (fp32 loads at file size; ``onnx-int8`` a quarter); ``.npz`` archives their
uncompressed size; a scorer its heads only (its backbone is a shared entry of its own); else :data:`UNKNOWN_BYTES`.
The budget covers weights only, not the interpreter, libraries or activations.

Evicting drops the pool's reference and collects garbage; a request still using the encoder keeps it alive. Evicting
a backbone evicts the scorers that hold it (else a reload would count it twice). The pool evicts, not the unbounded
``LRUCache``, since the newcomer and its backbone must stay however large.
"""

from __future__ import annotations

import logging
import math
import re
import sys
import threading
import zipfile
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from cachetools import LRUCache

from mlse.errors import MlseError
from mlse.serving import gc_freeze

log = logging.getLogger(__name__)

DEFAULT_MAX_MEMORY = "1.5GB"
UNKNOWN_BYTES = 256 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx", ".npz", ".npy")
INT8_FRACTION = 0.25
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_size(value: str | int | float, *, what: str = "--max-memory") -> int:
    """Bytes from "1.5GB", "800MB", "512MiB" or a plain number of bytes (GB = 10^9, GiB = 2^30)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number, unit = float(value), ""
    else:
        match = _SIZE.match(str(value))
        if match is None or match.group(2).lower() not in _UNITS:
            raise MlseError(
                f"{what} {value!r} is not a memory size: use e.g. 1.5GB, 800MB, 512MiB or a number of bytes"
            )
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise MlseError(f"{what} {value!r} must be more than 0 bytes")
    return size


# -- estimates ------------------------------------------------------------------------------------------------------
def weight_file_bytes(path: str | Path) -> int:
    """Bytes the weight files under ``path`` (a folder or one file) take in memory; 0 when there are none."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    return sum(_file_bytes(p) for p in files if p.suffix in WEIGHT_SUFFIXES)


def _file_bytes(path: Path) -> int:
    if path.suffix != ".npz":
        return path.stat().st_size
    try:  # compressed archive: what np.load materialises is the members' uncompressed size
        with zipfile.ZipFile(path) as archive:
            return sum(info.file_size for info in archive.infolist())
    except (OSError, zipfile.BadZipFile):
        return path.stat().st_size


def estimate_resident_bytes(encoder, *, backend: str = "torch") -> int:
    """The encoder's own weights in bytes (see the module docstring); a scorer's backbone is not included."""
    own = getattr(encoder, "resident_bytes", None)
    if own is not None:
        return int(own() if callable(own) else own)
    inner = getattr(encoder, "inner", None)  # the embedding cache or the calibration wrapper
    if inner is not None:
        return estimate_resident_bytes(inner, backend=backend)
    if hasattr(encoder, "backbone") and hasattr(encoder, "heads"):  # a scorer
        return sum(_tensor_bytes(head) for _, head in encoder.heads)
    quantized = getattr(encoder, "quantized", backend == "onnx-int8")
    spec = getattr(encoder, "spec", None)
    return estimate_files_bytes(_path_of(encoder) or getattr(spec, "location", None), quantized=quantized)


def estimate_spec_bytes(spec, *, backend: str = "torch") -> int:
    """The estimate before loading, from a registry/run spec: a scorer's head files, else its weight files."""
    if spec.source == "scorer":
        return weight_file_bytes(spec.location)  # heads only: the backbone is its own entry
    return estimate_files_bytes(spec.location, quantized=backend == "onnx-int8")


def estimate_files_bytes(where, *, quantized: bool = False) -> int:
    """Weight bytes under ``where`` (int8: a quarter), or UNKNOWN_BYTES when there is no such file or folder."""
    size = weight_file_bytes(where) if where and Path(where).exists() else 0
    if not size:
        return UNKNOWN_BYTES
    return int(size * INT8_FRACTION) if quantized else size


def _path_of(encoder) -> Path | None:
    try:
        path = getattr(encoder, "path", None)  # a property that may resolve (materialise) the folder
    except Exception:  # noqa: BLE001 - an encoder that cannot say where it lives is estimated another way
        return None
    return Path(path) if isinstance(path, str | Path) else None


def _tensor_bytes(head) -> int:
    tensors, _ = head.state()
    return sum(t.numel() * t.element_size() for t in tensors.values())


def free_memory() -> None:
    """Collect what evictions let go of (frozen objects included: :mod:`mlse.serving.gc_freeze`); on a GPU, hand the
    cached blocks back too."""
    gc_freeze.collect_all()
    torch = sys.modules.get("torch")  # never import torch just to free memory
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


# -- the pool -------------------------------------------------------------------------------------------------------
@dataclass
class _Entry:
    stamp: object
    encoder: object
    size: int


@dataclass
class EncoderPool:
    """Loaded encoders by key, least recently used first, evicted when their sizes would pass ``max_bytes``.

    ``depends_on`` ties a scorer to its backbone's key (using one uses both; evicting the backbone evicts the scorer).
    The entry just added is never evicted for itself: a model larger than the budget still loads, alone."""

    max_bytes: int
    evictions: int = 0
    # cachetools' LRU order and size total; unbounded, since the pool decides what to evict
    _entries: LRUCache = field(default_factory=lambda: LRUCache(maxsize=math.inf, getsizeof=lambda e: e.size))
    _backbone_of: dict = field(default_factory=dict)  # key -> the key of the backbone it is built on
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def get(self, key: Hashable, stamp: object = None):
        """The encoder under ``key`` if loaded with this ``stamp`` (marked as just used), else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.stamp != stamp:
                return None
            self._touch(key)
            return entry.encoder

    def put(
        self, key: Hashable, encoder, size: int, *, stamp: object = None, depends_on: Hashable | None = None
    ) -> list[Hashable]:
        """Add (or replace) an entry as the most recently used, then evict to fit -> the evicted keys."""
        with self._lock:
            evicted = self._remove(key) if key in self._entries else []
            self._entries[key] = _Entry(stamp, encoder, int(size))
            if depends_on is not None:
                self._backbone_of[key] = depends_on
            self._touch(key)
            evicted += self._evict_until(self.max_bytes, keep={key, depends_on})
        if evicted:
            free_memory()
        return evicted

    def make_room(self, size: int, *, keep: set | frozenset = frozenset()) -> list[Hashable]:
        """Evict before a load of ``size`` bytes, so the load itself stays within the budget -> the evicted keys.
        ``keep`` (a scorer's backbone, about to be used) counts as just used."""
        with self._lock:
            for key in keep:
                if key in self._entries:
                    self._touch(key)
            evicted = self._evict_until(self.max_bytes - int(size), keep=set(keep))
        if evicted:
            free_memory()
        return evicted

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return int(self._entries.currsize)

    def keys(self) -> list[Hashable]:
        """Loaded keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def _touch(self, key: Hashable) -> None:
        """Mark ``key`` (and the backbone it sits on, first: it is at least as recent) as just used. Re-inserting
        keeps the listing order (insertion) the eviction order, so :meth:`keys` lists least recently used first."""
        backbone = self._backbone_of.get(key)
        if backbone in self._entries:
            self._entries[backbone] = self._entries.pop(backbone)
        self._entries[key] = self._entries.pop(key)

    def _evict_until(self, limit: int, keep: set) -> list[Hashable]:
        """Evict the least recently used until the total is within ``limit``. What ``keep`` names was touched last,
        so it is never evicted while anything else is left."""
        evicted: list[Hashable] = []
        while self._entries.currsize > limit and any(k not in keep for k in self._entries):
            victim, entry = self._entries.popitem()
            if victim in keep:  # cannot happen (kept keys were touched last), but a kept entry must never go
                self._entries[victim] = entry
                break
            self._backbone_of.pop(victim, None)
            evicted += [victim, *self._remove_dependents(victim)]
        if evicted:
            self.evictions += len(evicted)
            log.info("memory budget %.0f MB: evicted %s", self.max_bytes / 1e6, ", ".join(map(str, evicted)))
        return evicted

    def _remove(self, key: Hashable) -> list[Hashable]:
        """Drop ``key`` and every entry built on it -> the keys dropped."""
        self._backbone_of.pop(key, None)
        removed = [key] if self._entries.pop(key, None) is not None else []
        return removed + self._remove_dependents(key)

    def _remove_dependents(self, key: Hashable) -> list[Hashable]:
        removed: list[Hashable] = []
        for other in [k for k, backbone in self._backbone_of.items() if backbone == key]:
            removed += self._remove(other)
        return removed
