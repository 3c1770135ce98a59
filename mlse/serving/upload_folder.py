"""The served app's upload folder, owned: which files a session may read, and how much the folder may hold.

A file parameter of a Gradio endpoint is a path the *caller* writes, and a public deployment deletes what it reads, so
every tab's reader asks here (:func:`mlse.ui.uploads.read_upload`):

* **A file parameter must be an upload of this session**: recorded by the upload route with its sender's address
  (:meth:`UploadFolder.record`, :func:`client_key`), then bound to the first session that names it from that address
  (inode and mtime). Anything else is refused with a message that names no server path; nothing is read or deleted.
* **The folder has quotas** (:class:`UploadQuota`): :meth:`UploadFolder.admit` evicts uploads older than ``grace_s``
  to make room, else refuses (429/503); :meth:`sweep` deletes files older than ``max_age_s``, :meth:`end_session` a
  closed page's uploads. Threat model: docs/deploy.md. No Gradio here: callers pass session ids and client addresses.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlse.errors import MlseError


class UploadRefused(MlseError):
    """An upload or a file parameter this deployment does not accept; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class UploadQuota:
    """How much the upload folder may hold (bytes), for how long (seconds)."""

    total_bytes: int
    client_bytes: int
    max_age_s: float = 3600.0
    grace_s: float = 600.0  # uploads younger than this are never deleted to make room for others


# A public deployment: 200 uploads of the public per-file cap (1 MB) in all, 20 from one address, kept an hour.
PUBLIC_QUOTA = UploadQuota(total_bytes=200_000_000, client_bytes=20_000_000)
# On one's own machine: room for a few files of the local per-file cap (100 MB); one address (loopback) may use it all.
LOCAL_QUOTA = UploadQuota(total_bytes=2_000_000_000, client_bytes=2_000_000_000)


@dataclass
class _Upload:
    client: str
    size: int
    at: float


@dataclass
class _Claim:
    session: str
    inode: int
    mtime_ns: int


@dataclass
class Admission:
    """An upload admitted and under way: its bytes are reserved until :meth:`UploadFolder.record` or ``cancel``."""

    client: str
    size: int
    open: bool = True


@dataclass
class UploadFolder:
    """The app's upload folder (Gradio's ``GRADIO_TEMP_DIR``) with its uploads, claims and quota."""

    root: Path
    quota: UploadQuota = LOCAL_QUOTA
    clock: Callable[[], float] = time.time
    _uploads: dict[str, _Upload] = field(default_factory=dict)  # real path -> who uploaded it, how big, when
    _claims: dict[str, _Claim] = field(default_factory=dict)  # real path -> the session that read it
    _reserved: list[Admission] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.root = Path(os.path.realpath(self.root))

    # -- the upload route -------------------------------------------------------------------------------------------
    def admit(self, size: int, client: str) -> Admission:
        """Reserve room for an upload of ``size`` bytes from ``client``, or :class:`UploadRefused` (429 for this
        client over its share, 503 for a full folder; both say when to try again)."""
        with self._lock:
            self.sweep()
            if size > self.quota.total_bytes:
                raise UploadRefused(
                    f"the upload is {size:,} bytes; this deployment holds at most {self.quota.total_bytes:,}", 413
                )
            mine = sum(u.size for u in self._uploads.values() if u.client == client)
            mine += sum(a.size for a in self._reserved if a.client == client)
            if mine + size > self.quota.client_bytes:
                raise UploadRefused(
                    f"your uploads on this deployment add up to {mine:,} bytes, and at most "
                    f"{self.quota.client_bytes:,} are kept per visitor; they are deleted once read or after "
                    f"{self.quota.max_age_s / 60:.0f} minutes: try again later",
                    429,
                )
            if not self._make_room(size):
                raise UploadRefused("this deployment's upload space is full right now; try again in a few minutes", 503)
            admission = Admission(client, size)
            self._reserved.append(admission)
            return admission

    def record(self, admission: Admission, paths: list[str]) -> None:
        """The upload route wrote ``paths`` for ``admission``: remember them as uploads; release the reservation."""
        with self._lock:
            self.cancel(admission)
            now = self.clock()
            for path in paths:
                real = os.path.realpath(path)
                if self._inside(real) and os.path.isfile(real):
                    self._uploads[real] = _Upload(admission.client, os.path.getsize(real), now)
                    self._claims.pop(real, None)  # a new upload of the same bytes: a new file to claim

    def cancel(self, admission: Admission) -> None:
        """Release an admission's reservation (the upload ended, written or not)."""
        with self._lock:
            if admission.open:
                admission.open = False
                self._reserved.remove(admission)

    # -- the tabs' reader -------------------------------------------------------------------------------------------
    def claim(
        self, path: str | os.PathLike, session: str | None, shown_name: str = "the file", client: str | None = None
    ) -> Path:
        """The real path of an upload ``session`` (calling from ``client``, when known) may read, or
        :class:`UploadRefused` (nothing read or deleted)."""
        again = f"{shown_name}: this file was not uploaded in this page's session; upload it here again"
        if not session:
            raise UploadRefused(f"{shown_name}: files are read only for a page's session; upload it from the page")
        real = os.path.realpath(os.fspath(path))
        with self._lock:
            upload = self._uploads.get(real)
            ours = upload is not None and client in (None, upload.client)
            if not (ours and self._inside(real) and os.path.isfile(real)):
                raise UploadRefused(again)
            info = os.stat(real)
            claim = self._claims.get(real)  # another session's claim on this very file refuses (a new upload does not)
            if claim and claim.session != session and (claim.inode, claim.mtime_ns) == (info.st_ino, info.st_mtime_ns):
                raise UploadRefused(again)
            self._claims[real] = _Claim(session, info.st_ino, info.st_mtime_ns)
            return Path(real)

    def release(self, path: str | os.PathLike) -> None:
        """Delete an upload that has been read (a public deployment keeps no visitor's file)."""
        with self._lock:
            self._forget(os.path.realpath(os.fspath(path)), delete=True)

    def end_session(self, session: str | None) -> int:
        """Delete every upload ``session`` claimed (its page was closed); returns how many."""
        if not session:
            return 0
        with self._lock:
            mine = [path for path, claim in self._claims.items() if claim.session == session]
            for path in mine:
                self._forget(path, delete=True)
            return len(mine)

    # -- housekeeping -----------------------------------------------------------------------------------------------
    def sweep(self) -> int:
        """Delete files in the folder older than the quota's ``max_age_s`` (and forget uploads that are gone);
        returns the bytes freed."""
        cutoff = self.clock() - self.quota.max_age_s
        with self._lock:
            freed = sum(self._delete(path, size) for path, size, mtime in self._files() if mtime < cutoff)
            for path in [p for p in self._uploads if not os.path.exists(p)]:
                self._forget(path, delete=False)
        return freed

    def used_bytes(self) -> int:
        """Bytes the folder holds now (every file under it, whoever wrote it)."""
        return sum(size for _, size, _ in self._files())

    def reserved_bytes(self) -> int:
        with self._lock:
            return sum(a.size for a in self._reserved)

    def _make_room(self, size: int) -> bool:
        """Delete the oldest uploads past the grace period until ``size`` more bytes fit; False when they cannot."""
        used = self.used_bytes() + self.reserved_bytes()
        if used + size <= self.quota.total_bytes:
            return True
        cutoff = self.clock() - self.quota.grace_s
        old = sorted((u.at, path, u.size) for path, u in self._uploads.items() if u.at < cutoff)
        for _, path, upload_size in old:
            self._forget(path, delete=True)
            used -= upload_size
            if used + size <= self.quota.total_bytes:
                return True
        return False

    def _files(self):
        """(path, size, mtime) of every regular file under the folder (links are not followed)."""
        for folder, _, names in os.walk(self.root):
            for name in names:
                try:
                    info = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue  # deleted while walking
                if stat.S_ISREG(info.st_mode):
                    yield os.path.join(folder, name), info.st_size, info.st_mtime

    def _inside(self, real: str) -> bool:
        return real.startswith(str(self.root) + os.sep)

    def _forget(self, path: str, *, delete: bool) -> None:
        upload = self._uploads.pop(path, None)
        self._claims.pop(path, None)
        if delete and self._inside(path):
            self._delete(path, upload.size if upload else 0)

    def _delete(self, path: str, size: int) -> int:
        """Remove the file (and its upload folder when empty); the records are dropped by the caller or the sweep."""
        try:
            os.remove(path)
        except OSError:
            return 0
        with contextlib.suppress(OSError):  # Gradio gives each upload a folder of its own: remove it when empty
            os.rmdir(os.path.dirname(path))
        return size


def client_key(header: Callable[[str], str | None], peer: str | None) -> str:
    """Who sends a request: the connection's address, or on a Hugging Face Space (``SPACE_ID`` set; visitors reach
    it through the Space's proxy) the last ``X-Forwarded-For`` hop, which that proxy appends (a visitor can prepend
    hops, not append them). ``header(name)``: the request's header of that lower-case name, or None."""
    if os.environ.get("SPACE_ID"):
        hops = [h.strip() for h in (header("x-forwarded-for") or "").split(",") if h.strip()]
        if hops:
            return hops[-1]
    return peer or "unknown"


UPLOAD_DIR_ENV = "GRADIO_TEMP_DIR"  # where Gradio writes uploads (and the files it serves for download)


def use_own_upload_folder() -> str:
    """Point Gradio at a folder of this app's own unless the operator chose one (``GRADIO_TEMP_DIR``), so that the
    quota and the sweeps see only this app's files: Gradio's default, ``<tmp>/gradio``, is shared by every Gradio app
    on the machine. Call before any Gradio block is made (each block reads it when made)."""
    return os.environ.setdefault(UPLOAD_DIR_ENV, str(Path(tempfile.gettempdir()) / "mlse-app-uploads"))


# The served app's upload folder (set by mlse.ui.app.build_server); None: in-process handlers read paths as given.
_ACTIVE: UploadFolder | None = None


def install(folder: UploadFolder | None) -> None:
    """Make ``folder`` the served app's upload folder (None: no app is served)."""
    global _ACTIVE
    _ACTIVE = folder


def active() -> UploadFolder | None:
    """The served app's upload folder, or None."""
    return _ACTIVE


def start_sweeper(folder: UploadFolder, every_s: float = 300.0) -> threading.Thread:
    """Sweep ``folder`` now and then every ``every_s`` seconds in a daemon thread (old uploads go even without
    traffic)."""

    def loop() -> None:
        while True:
            with contextlib.suppress(Exception):  # a failed sweep must not end the loop; the next one tries again
                folder.sweep()
            time.sleep(every_s)

    thread = threading.Thread(target=loop, name="mlse-upload-sweeper", daemon=True)
    thread.start()
    return thread
