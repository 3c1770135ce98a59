"""Write a safetensors file one tensor at a time.

``safetensors.numpy.save_file`` holds every array and then a bytes copy of them all; streaming the simple format (an
8-byte little-endian header length, a JSON header of dtypes, shapes and byte ranges, then the raw little-endian data)
holds only the largest single tensor.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np


def write_safetensors(
    path: Path,
    tensors: dict[str, tuple[tuple[int, ...], Callable[[], np.ndarray]]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write ``{name: (shape, make_array)}`` to ``path``; each float32 array is made, written and dropped in turn."""
    header: dict = {"__metadata__": dict(metadata or {})}
    offset = 0
    for name, (shape, _) in tensors.items():
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name, (shape, make) in tensors.items():
            array = np.ascontiguousarray(make(), dtype="<f4")
            if array.shape != tuple(shape):
                raise ValueError(f"tensor {name}: made shape {array.shape}, declared {tuple(shape)}")
            fh.write(memoryview(array).cast("B"))
