"""The output folder of a scale job: row chunks planned once, each written atomically as one shard and then marked done
in ``manifest.json``, so a killed job resumes where it stopped and ends with the files an uninterrupted run writes.

A shard is ``shard-NNNNN.parquet`` (a matrix [n, d] as a fixed-size list column) or ``shard-NNNNN.npz``. The manifest
names the job (:func:`job_id`), the shards done and what the pipeline records. Another job's folder is refused; this
job's is resumed only with ``resume=True``, so a rerun never mixes two jobs' shards.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_bytes, atomic_write_text
from mlse.errors import MlseError

MANIFEST = "manifest.json"
FORMAT = "mlse-shards"
VERSION = 1
SHARD_FORMATS = ("parquet", "npy")
_SUFFIX = {"parquet": ".parquet", "npy": ".npz"}


def plan_chunks(n: int, rows: int) -> list[tuple[int, int]]:
    """Row ranges [lo, hi) of ``rows`` rows each (the last one shorter) covering ``n`` rows."""
    if rows < 1:
        raise MlseError(f"rows per shard must be a positive integer, got {rows}")
    return [(lo, min(n, lo + rows)) for lo in range(0, n, rows)]


def job_id(job: dict) -> str:
    """A short hash of everything that decides a job's output (sorted JSON of ``job``)."""
    return hashlib.sha256(json.dumps(job, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:16]


def _encode_npz(columns: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **columns)
    return buffer.getvalue()


def _encode_parquet(columns: dict[str, np.ndarray]) -> bytes:
    import pyarrow as pa  # lazy: only Parquet shards need Arrow
    import pyarrow.parquet as pq  # lazy: as above

    arrays = {}
    for name, values in columns.items():
        values = np.ascontiguousarray(values)
        if values.ndim == 2:
            arrays[name] = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
        else:
            arrays[name] = pa.array(values)
    buffer = io.BytesIO()
    pq.write_table(pa.table(arrays), buffer)
    return buffer.getvalue()


def read_shard_file(path: Path) -> dict[str, np.ndarray]:
    """The columns of one shard file (either format); a fixed-size list column comes back as a matrix [n, d]."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    import pyarrow.parquet as pq  # lazy: only Parquet shards need Arrow

    table = pq.read_table(path)
    out = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if hasattr(column.type, "list_size"):
            flat = column.flatten().to_numpy(zero_copy_only=False)
            out[name] = flat.reshape(len(column), column.type.list_size)
        else:
            out[name] = column.to_numpy(zero_copy_only=False)
    return out


class ShardFolder:
    """One job's output folder: ``open()`` it (create, resume or refuse), ``write(index, columns)`` each chunk,
    ``finish()`` at the end. ``what`` names the folder in messages (``--out out/``)."""

    def __init__(self, folder: str | Path, job: dict, *, shard_format: str = "npy", resume: bool = False, what=None):
        if shard_format not in SHARD_FORMATS:
            raise MlseError(f"unknown shard format {shard_format!r}; choose from {', '.join(SHARD_FORMATS)}")
        self.folder = Path(folder)
        self.job = job
        self.id = job_id(job)
        self.format = shard_format
        self.resume = resume
        self.what = what or str(self.folder)
        self.manifest: dict = {}
        self.started = time.monotonic()
        self.rows_at_start = 0

    @property
    def path(self) -> Path:
        return self.folder / MANIFEST

    def open(self, planned: list[tuple[int, int]], info: dict | None = None) -> None:
        """Create the folder and its manifest, or take up this job's where it stopped (``resume``); refuse a folder
        that holds anything else."""
        if self.folder.exists() and not self.folder.is_dir():
            raise MlseError(f"{self.what}: is a file, expected a folder")
        if self.path.is_file():
            try:
                old = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise MlseError(f"{self.what}: its {MANIFEST} cannot be read; use another folder") from None
            if old.get("job_id") != self.id:
                raise MlseError(
                    f"{self.what}: holds the shards of another job ({old.get('job_id')}: {_describe(old)}); this "
                    f"job is {self.id}; use another folder"
                )
            if not self.resume:
                raise MlseError(f"{self.what}: holds this job's shards ({self.id}); pass --resume to finish it")
            self.manifest = old
            for pattern in (".shard-*.tmp", f".{MANIFEST}.*.tmp"):  # writes a kill cut short: redone below
                for stale in self.folder.glob(pattern):
                    stale.unlink(missing_ok=True)
        elif self.folder.is_dir() and any(p.name.startswith("shard-") for p in self.folder.iterdir()):
            raise MlseError(f"{self.what}: holds shards without a {MANIFEST}; use another folder")
        else:
            self.manifest = {"format": FORMAT, "version": VERSION, "job_id": self.id, "job": self.job, "shards": {}}
        rows_total = sum(hi - lo for lo, hi in planned)
        self.manifest.update(info or {}, planned=[list(p) for p in planned], rows_total=rows_total)
        self.manifest["shard_format"] = self.format
        self.manifest.setdefault("complete", False)
        self.rows_at_start = self.rows_done
        self.started = time.monotonic()
        self._save()

    def done(self, index: int) -> bool:
        entry = self.manifest["shards"].get(str(index))
        return entry is not None and (self.folder / entry["file"]).is_file()

    @property
    def rows_done(self) -> int:
        return sum(e["rows"] for e in self.manifest.get("shards", {}).values())

    def write(self, index: int, columns: dict[str, np.ndarray], rows: int | None = None) -> None:
        """Shard ``index`` written atomically (a temporary file renamed into place), then marked done; ``rows``: the
        input rows it covers (default: the length of its first column)."""
        rows = len(next(iter(columns.values()))) if rows is None else rows
        data = _encode_parquet(columns) if self.format == "parquet" else _encode_npz(columns)
        name = f"shard-{index:05d}{_SUFFIX[self.format]}"
        atomic_write_bytes(self.folder / name, data)
        lo, hi = self.manifest["planned"][index]
        self.manifest["shards"][str(index)] = {"file": name, "rows": rows, "lo": lo, "hi": hi}
        self.manifest["progress"] = self.progress()
        self._save()

    def read(self, index: int) -> dict[str, np.ndarray]:
        return read_shard_file(self.folder / self.manifest["shards"][str(index)]["file"])

    def progress(self) -> dict:
        """Rows done, rows per second (this session), seconds left at that rate."""
        done, total = self.rows_done, self.manifest.get("rows_total", 0)
        elapsed = time.monotonic() - self.started
        rate = (done - self.rows_at_start) / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else None
        return {"rows_done": done, "rows_total": total, "rows_per_s": round(rate, 2), "eta_s": eta}

    def update(self, **info) -> None:
        self.manifest.update(info)
        self._save()

    def finish(self, **info) -> dict:
        """Mark the job complete (every planned shard done) and return the manifest."""
        missing = [i for i in range(len(self.manifest["planned"])) if not self.done(i)]
        if missing:
            raise MlseError(f"{self.what}: {len(missing)} shard(s) missing at the end, e.g. {missing[0]}")
        self.manifest.update(info, complete=True, progress=self.progress())
        self._save()
        return self.manifest

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.manifest["shards"] = dict(sorted(self.manifest["shards"].items(), key=lambda kv: int(kv[0])))
        atomic_write_text(self.path, json.dumps(self.manifest, indent=1, ensure_ascii=False) + "\n")


def _describe(manifest: dict) -> str:
    job = manifest.get("job", {})
    keys = ("command", "input", "model", "models")
    return ", ".join(f"{k} {job[k]}" for k in keys if k in job) or "unknown"
