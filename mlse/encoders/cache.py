"""On-disk embedding cache, keyed by model identity, normalisation and the sha256 of each text.

Files live under ``<cache root>/embeddings`` (:func:`mlse.dirs.cache_root`).

Storage is one SQLite file per (model identity, normalisation). SQLite gives what the cache needs without extra code:
writes are transactions (atomic), several processes can read and write one file (WAL journal, busy timeout), and a
damaged file is reported as an error rather than silently read. On top of that each vector carries a CRC32, so a row
whose bytes were altered is dropped and re-encoded instead of trusted. A file that SQLite cannot open is moved aside
(``*.corrupt-<time>``) and rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlse.dirs import cache_root
from mlse.foreground import foreground

log = logging.getLogger(__name__)

_CHUNK = 900  # keys per "IN (...)" query, below SQLite's bound-parameter limit on old builds
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, crc INTEGER NOT NULL);
"""


def text_key(text: str) -> bytes:
    """32-byte sha256 of the UTF-8 text: the per-text cache key."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _raise_if_busy(exc: sqlite3.DatabaseError) -> None:
    """Contention or misuse is not damage: never move a healthy file aside for a lock held past the busy timeout, or
    for a programming error (a closed connection, the wrong thread)."""
    if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy")):
        raise exc
    if isinstance(exc, sqlite3.ProgrammingError):
        raise exc


class EmbeddingStore:
    """Vectors of one model identity and normalisation, stored in one SQLite file."""

    def __init__(self, identity: str, normalize: bool, root: Path | None = None):
        self.identity = identity
        self.normalize = normalize
        tag = hashlib.sha256(f"{identity}|norm={normalize}".encode()).hexdigest()[:20]
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in identity.split(":")[0])[:40]
        self.path = (root or cache_root()) / "embeddings" / f"{safe}-{tag}.sqlite"
        self._conn: sqlite3.Connection | None = None
        # One connection serves every thread (the app's encoders are shared by Gradio's worker threads); the lock
        # keeps one thread's transaction from interleaving with another's on it.
        self._lock = threading.RLock()

    # -- connection -------------------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as exc:
            _raise_if_busy(exc)
            self._quarantine(exc)
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=120, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 120000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            ok = conn.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {ok}")
            stored = dict(conn.execute("SELECT k, v FROM meta").fetchall())
            if stored and stored.get("identity") != self.identity:
                raise sqlite3.DatabaseError(f"cache file belongs to {stored.get('identity')!r}")
            if not stored:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('identity', ?)", (self.identity,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('normalize', ?)", (str(self.normalize),))
        except BaseException:
            conn.close()
            raise
        return conn

    def _quarantine(self, exc: Exception) -> None:
        """Move a damaged file (and its WAL side files) aside so that a fresh one is built."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log.warning("embedding cache %s is damaged (%s); moving it aside and rebuilding", self.path, exc)
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                try:
                    p.rename(Path(f"{p}.corrupt-{stamp}-{os.getpid()}"))
                except OSError:
                    p.unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- reads and writes -------------------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors found for ``keys``; damaged rows are deleted and left out (they will be re-encoded)."""
        with self._lock:
            try:
                return self._get_many(keys)
            except sqlite3.DatabaseError as exc:
                _raise_if_busy(exc)
                self._quarantine(exc)
                return {}

    def _get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        conn = self._connect()
        found: dict[bytes, np.ndarray] = {}
        bad: list[bytes] = []
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            for key, blob, crc in conn.execute(f"SELECT key, vec, crc FROM emb WHERE key IN ({marks})", chunk):
                if zlib.crc32(blob) != crc or len(blob) % 4:
                    bad.append(key)
                    continue
                found[key] = np.frombuffer(blob, dtype=np.float32)
        if bad:
            log.warning("embedding cache %s: %d damaged rows dropped and will be re-encoded", self.path, len(bad))
            conn.executemany("DELETE FROM emb WHERE key = ?", [(k,) for k in bad])
        return found

    def put_many(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store rows in one transaction: all of them land, or none."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(k, v.tobytes(), zlib.crc32(v.tobytes())) for k, v in zip(keys, vectors)]
        with self._lock:
            try:
                self._put_rows(rows)
            except sqlite3.DatabaseError as exc:
                _raise_if_busy(exc)
                self._quarantine(exc)
                self._put_rows(rows)

    def _put_rows(self, rows: list[tuple[bytes, bytes, int]]) -> None:
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM emb").fetchone()[0])


class CachedEncoder:
    """Wraps any :class:`~mlse.encoders.protocol.Encoder`: texts already embedded are served from disk, the rest
    encoded once.

    ``stats`` counts texts encoded vs served since creation, so a caller (or a test) can check that a repeated
    evaluation encoded nothing.
    """

    def __init__(self, inner, root: Path | None = None):
        self.inner = inner
        self.name = inner.name
        self.root = root
        self.stats = {"encoded": 0, "served": 0}
        self._stores: dict[bool, EmbeddingStore] = {}

    @property
    def identity(self) -> str:
        return self.inner.identity

    def store(self, normalize: bool) -> EmbeddingStore:
        if normalize not in self._stores:
            self._stores[normalize] = EmbeddingStore(self.identity, normalize, self.root)
        return self._stores[normalize]

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        store = self.store(normalize)
        found = store.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            with foreground():  # background work (the warm start) pauses meanwhile: mlse.foreground
                new = self.inner.encode(
                    [unique[i] for i in missing],
                    normalize=normalize,
                    batch_size=batch_size,
                    show_progress=show_progress,
                )  # [len(missing), d]
            store.put_many([keys[i] for i in missing], new)
            for i, row in zip(missing, new):
                found[keys[i]] = row
        n_served = len(unique) - len(missing)
        self.stats["encoded"] += len(missing)
        self.stats["served"] += n_served
        log.info("%s: encoded %d texts, served %d from cache", self.name, len(missing), n_served)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        matrix = np.stack([found[k] for k in keys])  # [n_unique, d]
        position = {t: i for i, t in enumerate(unique)}
        return matrix[[position[t] for t in texts]]  # [n, d]
