"""On-disk embedding cache, keyed by model identity, normalisation and the sha256 of each text.

One SQLite file per (model identity, normalisation) under ``<cache root>/embeddings``: writes are atomic
transactions, several processes can share a file (WAL, busy timeout), and damage is reported rather than read. Each
vector carries a CRC32 and the file records the vectors' length (meta ``dim``), so an altered row or one of another
length is dropped and re-encoded. A file SQLite cannot open, or whose length is not the encoder's, is moved aside
(``*.corrupt-<time>``) and rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mlse.atomic import move_aside
from mlse.dirs import cache_root, file_safe
from mlse.encoders.protocol import Scoring
from mlse.foreground import foreground

log = logging.getLogger(__name__)

_CHUNK = 900  # keys per "IN (...)" query, below SQLite's bound-parameter limit on old builds
_KEY_SLICE = 1 << 20  # characters encoded at a time when hashing a long text (no second copy of a 50 MB field)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, crc INTEGER NOT NULL);
"""


def text_key(text: str) -> bytes:
    """32-byte sha256 of the UTF-8 text: the per-text cache key.
    The whole text, not the part an encoder reads (:mod:`mlse.encoders.text_cut`): for ordinary text the cut changes
    nothing."""
    digest = hashlib.sha256()  # the same bytes in slices: UTF-8 encodes each code point on its own
    for start in range(0, len(text), _KEY_SLICE):
        digest.update(text[start : start + _KEY_SLICE].encode("utf-8", "surrogatepass"))
    return digest.digest()


class EmbeddingStore:
    """Vectors of one model identity and normalisation, stored in one SQLite file."""

    def __init__(self, identity: str, normalize: bool, root: Path | None = None):
        self.identity = identity
        self.normalize = normalize
        tag = hashlib.sha256(f"{identity}|norm={normalize}".encode()).hexdigest()[:20]
        self.path = (root or cache_root()) / "embeddings" / f"{file_safe(identity.split(':')[0])}-{tag}.sqlite"
        self._conn: sqlite3.Connection | None = None
        self._dim: int | None = None  # floats per vector, once known (the meta table's "dim")
        # One connection serves every thread (the app's encoders are shared by Gradio's worker threads); the lock
        # keeps one thread's transaction from interleaving with another's on it.
        self._lock = threading.RLock()

    # -- connection -------------------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._or_rebuilt(self._open)
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
                own = [("identity", self.identity), ("normalize", str(self.normalize))]
                conn.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", own)
            self._dim = self._stored_dim(conn, stored.get("dim"))
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _stored_dim(conn: sqlite3.Connection, recorded: str | None) -> int | None:
        """The file's vector length: as recorded, else the commonest row length (recorded from now on)."""
        if recorded is not None:
            if not recorded.isdigit() or int(recorded) < 1:
                raise sqlite3.DatabaseError(f"meta dim is {recorded!r}, not a vector length")
            return int(recorded)
        row = conn.execute("SELECT length(vec) AS n FROM emb GROUP BY n ORDER BY COUNT(*) DESC LIMIT 1").fetchone()
        if row is None or not row[0] or row[0] % 4:
            return None
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(row[0] // 4),))
        return row[0] // 4

    def _or_rebuilt(self, run: Callable, fallback: Callable | None = None):
        """``run()``; when the file turns out damaged, it is moved aside (:meth:`_quarantine`) and ``fallback()``
        answers instead (default: ``run()`` again, on a fresh file)."""
        try:
            return run()
        except sqlite3.DatabaseError as exc:
            self._quarantine(exc)
            return (fallback or run)()

    def _quarantine(self, exc: sqlite3.DatabaseError) -> None:
        """Move a damaged file (and its WAL side files) aside so that a fresh one is built.
        A lock held past the busy timeout or a programming error is not damage: ``exc`` is raised again then."""
        busy = isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy"))
        if busy or isinstance(exc, sqlite3.ProgrammingError):
            raise exc
        self.close()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log.warning("embedding cache %s is damaged (%s); moving it aside and rebuilding", self.path, exc)
        for suffix in ("", "-wal", "-shm"):
            move_aside(Path(str(self.path) + suffix), stamp)  # a missing side file is left alone

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- reads and writes -------------------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors found for ``keys``; damaged rows are deleted and left out (they will be re-encoded)."""
        with self._lock:
            return self._or_rebuilt(lambda: self._get_many(keys), fallback=dict)

    def _get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        conn = self._connect()
        found: dict[bytes, np.ndarray] = {}
        bad: list[bytes] = []
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            for key, blob, crc in conn.execute(f"SELECT key, vec, crc FROM emb WHERE key IN ({marks})", chunk):
                if zlib.crc32(blob) != crc or len(blob) % 4 or (self._dim is not None and len(blob) != 4 * self._dim):
                    bad.append(key)
                    continue
                found[key] = np.frombuffer(blob, dtype=np.float32)
        if bad:
            log.warning("embedding cache %s: %d damaged rows dropped and will be re-encoded", self.path, len(bad))
            conn.executemany("DELETE FROM emb WHERE key = ?", [(k,) for k in bad])
        return found

    def put_many(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store rows in one transaction: all of them land, or none. Vectors of another length than the file's rows
        mean the file is not this encoder's: it is moved aside and a new one holds them."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(k, v.tobytes(), zlib.crc32(v.tobytes())) for k, v in zip(keys, vectors)]
        dim = int(vectors.shape[1]) if vectors.ndim == 2 and len(rows) else None
        with self._lock:
            self._or_rebuilt(lambda: self._put_rows(rows, dim))

    def _put_rows(self, rows: list[tuple[bytes, bytes, int]], dim: int | None = None) -> None:
        conn = self._connect()
        if dim is not None and self._dim is not None and dim != self._dim:
            raise sqlite3.DatabaseError(f"the file's vectors hold {self._dim} floats, the encoder's {dim}")
        conn.execute("BEGIN IMMEDIATE")
        with conn:  # COMMIT, or ROLLBACK on any exception
            if dim is not None and self._dim is None:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
            conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
        if dim is not None:
            self._dim = dim

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM emb").fetchone()[0])


class CachedEncoder(Scoring):
    """Wraps any :class:`~mlse.encoders.protocol.Encoder`: texts already embedded are served from disk, the rest
    encoded once. ``stats`` counts texts encoded vs served since creation.
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
            new = self._encode_into(store, found, keys, unique, missing, normalize, batch_size, show_progress)
            # rows of another length than the encoder's: put_many moved the file aside; encode them too
            stale = [i for i, k in enumerate(keys) if len(found[k]) != new.shape[1]]
            if stale:
                self._encode_into(store, found, keys, unique, stale, normalize, batch_size, show_progress)
                missing += stale
        n_served = len(unique) - len(missing)
        self.stats["encoded"] += len(missing)
        self.stats["served"] += n_served
        log.info("%s: encoded %d texts, served %d from cache", self.name, len(missing), n_served)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        key_of = dict(zip(unique, keys))
        return np.stack([found[key_of[t]] for t in texts])  # [n, d]

    def _encode_into(self, store, found, keys, unique, which, normalize, batch_size, show_progress) -> np.ndarray:
        """Encode ``unique[i]`` for ``i`` in ``which``, store the vectors and put them in ``found``."""
        with foreground():  # background work (the warm start) pauses meanwhile: mlse.foreground
            new = self.inner.encode(
                [unique[i] for i in which], normalize=normalize, batch_size=batch_size, show_progress=show_progress
            )  # [len(which), d]
        store.put_many([keys[i] for i in which], new)
        for i, row in zip(which, new):
            found[keys[i]] = row
        return new
