"""The pairs a ``score`` job reads chunk by chunk, and the plan of which texts each chunk encodes, held so that no
process holds the whole table, its texts or its vectors.

A chunk travels as its :meth:`PairSource.locator` (:func:`chunk_pairs` reads it). :func:`plan_fresh` is what the
local engine's cache decides, one bit per distinct text; earlier chunks' texts are keys in SQLite (:class:`SeenKeys`).
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlse.data.table_stream import ChunkedTable, read_span
from mlse.data.user_table import UserTable
from mlse.encoders.cache import text_key
from mlse.errors import MlseError
from mlse.scale.shards import plan_chunks

_BLOCK = 900  # keys per "IN (...)" query, below SQLite's bound-parameter limit on old builds


@dataclass
class Chunk:
    """One chunk's pairs, and its table rows when it came from a file (the scored file writes them back)."""

    s1: list[str]
    s2: list[str]
    table: UserTable | None = None

    def distinct(self) -> list[str]:
        """The chunk's texts, each once, in the order the local engine encodes them (first side, then second)."""
        return list(dict.fromkeys([*self.s1, *self.s2]))


def chunk_pairs(locator: tuple) -> Chunk:
    """The pairs of one chunk from its :meth:`PairSource.locator`: read from the file, or carried inline (``(sentences1,
    sentences2)``)."""
    if isinstance(locator[0], str) and locator[0] == "table":
        table = read_span(locator)
        return Chunk(table.role("sentence1"), table.role("sentence2"), table)
    s1, s2 = locator[-2:]
    return Chunk(list(s1), list(s2))


class PairSource:
    """The pairs of a scanned file (``table``) in chunks of its ``chunk_rows``."""

    def __init__(self, table: ChunkedTable):
        self.table, self.chunk_rows, self.rows = table, table.chunk_rows, len(table)

    def planned(self) -> list[tuple[int, int]]:
        """Rows [lo, hi) of every chunk."""
        return plan_chunks(self.rows, self.chunk_rows)

    def locator(self, index: int) -> tuple:
        return self.table.locator(index)

    def read(self, index: int) -> Chunk:
        chunk = chunk_pairs(self.locator(index))
        lo, hi = index * self.chunk_rows, min(self.rows, (index + 1) * self.chunk_rows)
        if len(chunk.s1) != hi - lo:
            raise MlseError(f"score: chunk {index} holds {len(chunk.s1)} pairs, expected {hi - lo} (rows {lo}-{hi})")
        return chunk


class SeenKeys:
    """A set of 32-byte text keys in a SQLite file (the texts of the chunks planned so far): memory holds none."""

    def __init__(self, path: Path):
        self.conn = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -16000", "temp_store = FILE"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.execute("CREATE TABLE IF NOT EXISTS seen (key BLOB PRIMARY KEY) WITHOUT ROWID")

    def having(self, keys: list[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        for start in range(0, len(keys), _BLOCK):
            block = keys[start : start + _BLOCK]
            marks = ",".join("?" * len(block))
            found.update(k for (k,) in self.conn.execute(f"SELECT key FROM seen WHERE key IN ({marks})", block))
        return found

    def add(self, keys: list[bytes]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT OR IGNORE INTO seen VALUES (?)", [(k,) for k in keys])
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def plan_fresh(stores: dict[str, object], pairs: PairSource) -> dict[str, list[np.ndarray]]:
    """{model: [packed bits of chunk c]}: bit i of chunk c is set when the chunk's i-th distinct text
    (:meth:`Chunk.distinct`) is neither in the model's store (``stores``: model ->
    :class:`~mlse.encoders.cache.EmbeddingStore`) nor in an earlier chunk. Memory: two bits a pair."""
    plan: dict[str, list[np.ndarray]] = {name: [] for name in stores}
    with tempfile.TemporaryDirectory(prefix="mlse-score-plan-") as tmp:
        seen = SeenKeys(Path(tmp) / "seen.sqlite")
        try:
            for index in range(len(pairs.planned())):
                keys = [text_key(t) for t in pairs.read(index).distinct()]
                earlier = seen.having(keys)
                for name, store in stores.items():
                    held = store.get_many(keys)  # vectors dropped: only which keys it holds
                    fresh = np.array([k not in held and k not in earlier for k in keys], dtype=bool)
                    plan[name].append(np.packbits(fresh))
                seen.add([k for k in keys if k not in earlier])
        finally:
            seen.close()
    return plan


def fresh_texts(chunk: Chunk, bits: np.ndarray) -> list[str]:
    """The texts of ``chunk`` its plan's ``bits`` (:func:`plan_fresh`) mark to encode, in order."""
    distinct = chunk.distinct()
    marked = np.unpackbits(np.asarray(bits, dtype=np.uint8), count=len(distinct)).astype(bool)
    return [text for text, fresh in zip(distinct, marked) if fresh]
