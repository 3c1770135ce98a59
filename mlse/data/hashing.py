"""The sha256 of a file: the one reader that hashes files in the package (data files a record names, a shipped
artifact's files, model fingerprints: :mod:`mlse.encoders.identity` feeds several files into one digest with
:func:`update_with_file`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mlse.errors import DataError
from mlse.memo import MB, BytesMemo

CHUNK = 1 << 20  # bytes read at a time: a large file is never held in memory whole

# (resolved path, mtime_ns, size) -> hex digest (a few hundred bytes an entry): a changed file gets a new key
_sha256_memo = BytesMemo("data.file_sha256", 1 * MB)


def update_with_file(digest, path: str | os.PathLike[str]):
    """Feed the bytes of the file at ``path`` into ``digest`` (a hashlib object), a chunk at a time -> ``digest``."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in chunks; memoised per (path, mtime, size) for repeated reports."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DataError(f"{p}: file not found") from None
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    cached = _sha256_memo.get(key)
    if cached is not None:
        return cached
    try:
        digest = update_with_file(hashlib.sha256(), p).hexdigest()
    except OSError as exc:
        raise DataError(f"{p}: cannot read ({exc.strerror or exc})") from None
    _sha256_memo.put(key, digest)
    return digest
