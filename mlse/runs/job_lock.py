"""The job lock: a training child holds an exclusive ``flock`` on ``RUNS/.jobs/NAME.lock`` for as long as it lives.

Why: the app knows its running job only in memory, so after a ``kill -9`` a restarted app would not see a child still
training. The kernel releases a ``flock`` when its holder dies, however it dies, so a held lock is the truth about
whether a job lives (no pid reuse). The file's JSON (run, pid, app start, time) says whose lock it is.

:func:`hold` (in the child, first; :meth:`HeldLock.release` removes the file once the job answered),
:func:`live_orphans` (in the app: jobs an earlier app start left running), :func:`claim_stale` (for
:func:`mlse.runs.health.sweep_interrupted`: a lock nobody holds is a job that died unanswered). Without ``fcntl``
(Windows) there is no lock; the child still ends with its app (:mod:`mlse.train.child_jobs`).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from mlse.errors import MlseError
from mlse.runs.folders import read_json_dict

try:
    import fcntl
except ImportError:  # Windows: no flock; the job lock degrades to nothing (see the module docstring)
    fcntl = None

LOCK_DIR = ".jobs"  # a dot-folder: model scans, the results index and recover_runs pass it over
# This start of the app: pids repeat across restarts (pid 1 in a container), a random part does not.
APP = f"{os.getpid()}-{secrets.token_hex(6)}"
HOLD_WAIT_S = 1.0  # a check (live_orphans) takes a lock for an instant: a child starting then waits, not fails


@dataclass(frozen=True)
class LockRequest:
    """What the app asks a child to lock (picklable: it crosses to the spawned child)."""

    path: str
    run: str
    app: str
    started: float


def lock_request(root: Path, run: str) -> LockRequest:
    """The lock of run ``run`` (a folder name under ``root``) for a child this start of the app starts."""
    return LockRequest(str(Path(root) / LOCK_DIR / f"{run}.lock"), run, APP, time.time())


class HeldLock:
    """A lock taken by :func:`hold`; the kernel releases it if the process dies first."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self, *, remove: bool) -> None:
        """Unlock; ``remove``: delete the file first (the job answered: nothing for a sweep to find)."""
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)  # closing the only descriptor releases the flock


def hold(request: LockRequest) -> HeldLock | None:
    """Take the lock for this process and write who holds it; MlseError when another live process holds it."""
    if fcntl is None:
        return None
    path = Path(request.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(5):  # a sweep may delete the file between our open and our lock: then lock the new file
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock_within(fd, HOLD_WAIT_S):
            os.close(fd)
            raise MlseError(f"run {request.run!r} is being trained by another process; wait until it ends")
        if _same_file(fd, path):
            info = {k: v for k, v in asdict(request).items() if k != "path"} | {"pid": os.getpid()}
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(info).encode("utf-8"))
            return HeldLock(fd, path)
        os.close(fd)
    raise MlseError(f"could not take the job lock of run {request.run!r}")


def lock_files(root: Path) -> list[Path]:
    folder = Path(root) / LOCK_DIR
    return sorted(folder.glob("*.lock")) if folder.is_dir() else []


def read_info(path: Path) -> dict:
    """The lock file's JSON (run, pid, app, started); the run named by the file when it is unreadable ("" when no
    safe name is found)."""
    info = read_json_dict(path)
    run = info.get("run")
    info["run"] = run if _plain_name(run) else path.stem if _plain_name(path.stem) else ""
    return info


def _plain_name(name) -> bool:
    """A folder name right under the runs folder (never a path, a dot-folder, ``..``): safe to mark or remove."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not set(name) & {"/", "\\", "\0"}


def live_orphans(root: Path) -> list[dict]:
    """The lock infos of jobs alive now that another start of the app (an earlier one, killed) started."""
    if fcntl is None:
        return []
    return [info for path in lock_files(root) if _held(path) and (info := read_info(path)).get("app") != APP]


@contextmanager
def claim_stale(path: Path) -> Iterator[dict | None]:
    """Yields the info of a lock nobody holds (its job died without answering), holding it meanwhile, then deletes
    the file; yields None when a live process holds it (or it is gone)."""
    if fcntl is None:
        yield None
        return
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        info = read_info(path)
        # another sweep dealt with it, or a child has just created it and not yet locked it
        if not _same_file(fd, path) or ("pid" not in info and time.time() - os.fstat(fd).st_mtime < 10):
            yield None
            return
        yield info
        path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _lock_within(fd: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def _held(path: Path) -> bool:
    """Whether a live process holds the lock at ``path`` (taking it for an instant to find out)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False
