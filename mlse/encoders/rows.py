"""Rows of a large embedding table read from its file on demand, so that the table is never resident.

Why not a memory map: the kernel maps a read fault's neighbours too ("fault-around"; ``madvise(MADV_RANDOM)`` does
not stop it), so a mapped table's resident size grows with every new word. Reading each needed row with ``pread``
costs one system call per distinct token and keeps only the rows of the most recently used tokens
(:data:`CACHE_BYTES`); the file's pages stay in the kernel's shared, reclaimable page cache.

:class:`RowFile` reads rows of a 2-D array stored contiguously in a file (a ``.npy`` or one tensor of a
``.safetensors``); :func:`file_embedding` wraps one as a torch module that replaces a model's ``nn.Embedding`` for
inference, with the same values to the bit.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
from pathlib import Path

import numpy as np
from cachetools import LRUCache

# Rows kept after reading, least recently used evicted: frequent tokens (most of any text) cost no system call.
CACHE_BYTES = 16 * 2**20
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "U8": np.uint8, "I8": np.int8}


class RowFile:
    """``rows[ids]`` -> the array's rows at ``ids`` (any integer shape; result ``ids.shape + (columns,)``)."""

    def __init__(self, path: str | Path, offset: int, shape: tuple[int, int], dtype, cache_bytes: int = CACHE_BYTES):
        self.path, self.offset, self.shape, self.dtype = Path(path), int(offset), tuple(shape), np.dtype(dtype)
        self.row_bytes = self.shape[1] * self.dtype.itemsize
        self.cache_rows = max(cache_bytes // self.row_bytes, 0)
        # row id -> its values (cachetools' LRU: a hit counts as a use; the least recently used row goes first)
        self._cache: LRUCache | None = LRUCache(maxsize=self.cache_rows) if self.cache_rows else None
        expected = self.offset + self.shape[0] * self.row_bytes
        if self.path.stat().st_size < expected:
            raise ValueError(f"{self.path} is shorter ({self.path.stat().st_size} bytes) than its table ({expected})")
        self._fd: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_npy(cls, path: str | Path) -> RowFile:
        with open(path, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(fh)
            offset = fh.tell()
        if fortran or len(shape) != 2:
            raise ValueError(f"{path}: not a C-ordered 2-D array")
        return cls(path, offset, shape, dtype)

    @staticmethod
    def safetensors_header(path: str | Path) -> tuple[int, dict]:
        """(bytes before the data, {tensor name: dtype, shape, data_offsets}) of a safetensors file."""
        with open(path, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            return 8 + size, json.loads(fh.read(size))

    @classmethod
    def from_safetensors(cls, path: str | Path, name: str) -> RowFile | None:
        """The tensor ``name`` of a safetensors file, or None when it is absent, not 2-D or of a dtype numpy lacks."""
        start, header = cls.safetensors_header(path)
        entry = header.get(name)
        dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype")) if isinstance(entry, dict) else None
        if dtype is None or len(entry.get("shape", ())) != 2:
            return None
        return cls(path, start + entry["data_offsets"][0], tuple(entry["shape"]), dtype)

    def __getitem__(self, ids) -> np.ndarray:
        ids = np.asarray(ids)
        unique, inverse = np.unique(ids.ravel(), return_inverse=True)
        if len(unique) and (unique[0] < 0 or unique[-1] >= self.shape[0]):
            raise IndexError(f"row ids must be in [0, {self.shape[0]}), got {unique[0]}..{unique[-1]}")
        buffer = np.empty((len(unique), self.shape[1]), dtype=self.dtype)  # [u, H]
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY)
            for k, row in enumerate(unique.tolist()):
                cached = None if self._cache is None else self._cache.get(row)
                if cached is not None:
                    buffer[k] = cached
                    continue
                read = os.preadv(self._fd, [memoryview(buffer[k]).cast("B")], self.offset + row * self.row_bytes)
                if read != self.row_bytes:
                    raise OSError(f"{self.path}: short read at row {row}")
                if self._cache is not None:
                    self._cache[row] = buffer[k].copy()  # evicts the least recently used row when full
        return buffer[inverse].reshape(*ids.shape, self.shape[1])

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self):
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


def word_embedding(st) -> tuple:
    """(the transformers model inside a sentence-transformers model ``st``, its word-embedding layer); (model or None,
    None) when the first module has no ``get_input_embeddings``."""
    first = st[0] if len(st) else None
    model = getattr(first, "auto_model", None) or getattr(first, "model", None)
    get = getattr(model, "get_input_embeddings", None)
    return model, (get() if callable(get) else None)


def file_embedding(rows: RowFile, like):
    """A torch module standing in for the ``nn.Embedding`` ``like`` at inference: the rows come from ``rows`` (the same
    values as ``like.weight``), returned on ``like``'s device and dtype."""
    import torch  # lazy: torch costs seconds to import; only computing needs it

    class FileEmbedding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rows = rows
            self.num_embeddings, self.embedding_dim = rows.shape
            self.padding_idx = getattr(like, "padding_idx", None)
            self.device, self.dtype = like.weight.device, like.weight.dtype

        def forward(self, input_ids):  # [..] int64 -> [.., H]
            values = torch.from_numpy(self.rows[input_ids.detach().cpu().numpy()])
            return values.to(device=self.device, dtype=self.dtype)

    return FileEmbedding()
