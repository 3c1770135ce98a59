"""Atomic writes: write to a temporary file (or folder) in the same directory, then rename over the target.

A reader sees either the old file or folder or the new one, never half of one, even if the writer is killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from filelock import FileLock


def atomic_write_stream(path: str | Path, fill: Callable[[IO], None], *, text: bool = False) -> Path:
    """``fill(stream)`` into a temporary file beside ``path`` (binary, or UTF-8 text with ``text``), then renamed over
    it: a reader sees the old file or the whole new one, never half of it; on any error the temporary file goes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results and caches are meant to be readable
        with open(fd, "w", encoding="utf-8", newline="") if text else os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write_stream(path, lambda fh: fh.write(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Fill a folder all or nothing: yields a hidden temporary sibling of ``target`` (hidden, so model scans skip
    it); when the block ends without an error it replaces ``target``, otherwise it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        tmp.chmod(target.parent.stat().st_mode & 0o755)  # mkdtemp makes 0700: readable like its parent, at most 755
        yield tmp
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``; an existing ``dst`` is renamed aside first and removed only after the swap."""
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def move_aside(path: Path, stamp: str) -> None:
    """Rename a damaged file to ``<name>.corrupt-<stamp>-<pid>`` (kept for a look, never read again) so that a fresh
    one is built; where it cannot be renamed (a read-only folder), delete it; where neither works, leave it."""
    try:
        path.rename(path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}"))
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def build_once(target: Path, complete: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """``target``, filled by ``build(tmp)`` first unless ``complete(target)``: one process at a time (a file lock
    beside it; ``complete`` is checked again once held), built in a hidden sibling, then renamed (all or nothing)."""
    if not complete(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock"), timeout=1800):
            if not complete(target):
                with atomic_dir(target) as tmp:
                    build(tmp)
    return target
