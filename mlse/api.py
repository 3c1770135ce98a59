"""The public API behind ``import mlse``: score a table of sentence pairs, as the app and the command line do.

:func:`score_pairs` is the one scoring path for many pairs (CLI, app, scripts): it streams the table through every
model in chunks, each scored by :func:`mlse.encoders.protocol.similarity`, so a script and the page agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlse.data.user_files import UserTable, read_pairs, read_rows
from mlse.encoders.catalogue import DEFAULT_MODEL
from mlse.encoders.identity import DEFAULT_BACKEND
from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.stop_signal import StopSignal, should_stop

CHUNK_PAIRS = 512  # pairs encoded per step: bounded memory, and a Stop lands within one chunk
COSINE, CALIBRATED = "cosine", "0-5"

# progress(done_rows, total_rows, rows_per_second)
Progress = Callable[[int, int, float], None]


def column_name(model: str, what: str) -> str:
    """The scored file's column for ``model``: ``"me5-small cosine"``, ``"me5-small 0-5"``."""
    return f"{model} {what}"


def ordered_columns(models, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``columns`` in the scored file's order: each of ``models``' cosine, then its 0-5 score where it has one."""
    keys = [column_name(name, what) for name in models for what in (COSINE, CALIBRATED)]
    return {key: columns[key] for key in keys if key in columns}


@dataclass
class ScoreRun:
    """What :func:`score_pairs` did: rows scored (a prefix of the table), whether it was stopped, how fast, the score
    columns it added and the models that failed (``skip_failing``)."""

    done: int
    total: int
    stopped: bool
    seconds: float
    columns: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (model, why)

    @property
    def rows_per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else float("nan")


def score_pairs(
    pairs,
    models: Sequence | Mapping | str = (DEFAULT_MODEL,),
    *,
    backend: str = DEFAULT_BACKEND,
    chunk: int = CHUNK_PAIRS,
    progress: Progress | None = None,
    stop: StopSignal | None = None,
    skip_failing: bool = False,
):
    """Score sentence pairs with each model -> pandas DataFrame.

    ``pairs``: a path or a file's bytes (read by :func:`mlse.read_pairs`), a
    :class:`~mlse.data.user_files.UserTable`, a DataFrame (``sentence1`` / ``sentence2`` / ``score`` columns or the
    other names the reader knows; default ``0, 1`` columns by position), or (sentence1, sentence2[, score]) tuples.
    Rows are checked as a file's are: an empty sentence or a bad score is one DataError naming the row (from 1); the
    sentences are scored exactly as given. ``models``: names, loaded models, or ``{name: model}``. The frame holds the
    input's columns (a DataFrame's own, with its dtypes and index; else the strings as read, the score column as
    numbers), then ``"<model> cosine"`` and, where the model is calibrated, ``"<model> 0-5"``.

    ``progress(done, total, rows_per_s)`` after each chunk of ``chunk`` pairs; ``stop`` (a
    :class:`~mlse.stop_signal.StopSignal`: its Stop, ``also`` or budget) asked before each: once it says stop, the
    rows scored so far are kept and the rest stay NaN (``run.stopped``). ``skip_failing``: a model that fails is left
    out (named in the run's ``failures``) while the others score, instead of the error ending the call.
    ``frame.attrs["run"]`` is the :class:`ScoreRun`.
    """
    table = _as_table(pairs)
    loaded = _loaded(models, backend)
    columns, run = _score_chunks(loaded, table, chunk, progress, stop, skip_failing)
    frame = pairs.copy() if _is_frame(pairs) else table.frame()  # a frame keeps its own dtypes and index
    for key, values in columns.items():
        frame[key] = values
    frame.attrs["run"] = run
    return frame


def _loaded(models, backend: str) -> dict[str, object]:
    """{name: model}: names loaded by :func:`mlse.load_model`, a loaded model named by its ``name``."""
    from mlse.models import load_model  # lazy: importing mlse must not load the model stack

    if isinstance(models, Mapping):
        loaded = dict(models)
    else:
        loaded = {}
        for m in [models] if isinstance(models, str) else list(models):
            name = m if isinstance(m, str) else getattr(m, "name", f"model{len(loaded) + 1}")
            loaded[name] = load_model(m, backend=backend) if isinstance(m, str) else m
    if not loaded:
        raise MlseError("score_pairs: name at least one model")
    return loaded


def _score_chunks(
    models: dict, table: UserTable, chunk: int, progress, stop: StopSignal | None, skip_failing: bool
) -> tuple[dict[str, np.ndarray], ScoreRun]:
    """Every pair with every model, ``chunk`` pairs at a time -> ({column: values [n]}, run). Each chunk is scored by
    every model before the next starts, so a stopped run keeps complete rows."""
    s1, s2 = table.role("sentence1"), table.role("sentence2")
    n, models = len(s1), dict(models)
    columns = {column_name(name, COSINE): np.full(n, np.nan, dtype=np.float32) for name in models}
    failures: list[tuple[str, str]] = []
    start, done, stopped = time.perf_counter(), 0, False
    for lo in range(0, n, max(1, chunk)):
        if should_stop(stop):
            stopped = True
            break
        hi = min(n, lo + chunk)
        for name, model in list(models.items()):
            try:
                cos, cal = similarity(model, s1[lo:hi], s2[lo:hi])
            except Exception as exc:  # noqa: BLE001 - with skip_failing one model's failure leaves the others
                if not skip_failing:
                    raise
                failures.append((name, failure_text(exc)))
                del models[name]
                continue
            columns[column_name(name, COSINE)][lo:hi] = cos
            if cal is not None:
                columns.setdefault(column_name(name, CALIBRATED), np.full(n, np.nan, dtype=np.float32))[lo:hi] = cal
        done = hi
        if progress is not None:
            elapsed = time.perf_counter() - start
            progress(done, n, done / elapsed if elapsed > 0 else float("nan"))
    ordered = ordered_columns(models, columns)
    return ordered, ScoreRun(done, n, stopped, time.perf_counter() - start, list(ordered), failures)


def failure_text(exc: Exception) -> str:
    """Why a model could not score, in one line: an MlseError's own message (unknown model, missing files), else the
    exception named and cut short (a broken run folder)."""
    if isinstance(exc, MlseError):
        return str(exc)
    return f"could not be used ({type(exc).__name__}: {str(exc)[:300]})"


def _is_frame(value) -> bool:
    return hasattr(value, "columns") and hasattr(value, "itertuples")  # a pandas DataFrame


def _as_table(pairs) -> UserTable:
    """The pairs to score, checked as a file's rows are (an empty sentence or a bad score is refused by row)."""
    if isinstance(pairs, UserTable):
        if pairs.kind != "pairs":
            raise MlseError(f"{pairs.name}: a {pairs.kind} table, expected sentence pairs")
        return pairs
    if _is_frame(pairs):
        # named columns by name; a frame's default 0, 1, 2 columns by position
        positional = all(isinstance(c, int) for c in pairs.columns)
        columns = None if positional else [str(c) for c in pairs.columns]
        return read_rows(pairs.itertuples(index=False, name=None), columns=columns, name="DataFrame")
    if isinstance(pairs, str | bytes | bytearray) or hasattr(pairs, "__fspath__"):
        return read_pairs(pairs)  # a path, or a file's bytes
    rows = []
    for i, pair in enumerate(pairs, start=1):
        size = len(pair) if hasattr(pair, "__len__") and not isinstance(pair, str | bytes) else None
        if size not in (2, 3):
            got = f"{size} value(s)" if size is not None else f"a {type(pair).__name__}"
            raise MlseError(
                f"score_pairs: pair {i}: expected (sentence1, sentence2) or (sentence1, sentence2, score), got {got}"
            )
        rows.append(list(pair))
    names = ["sentence1", "sentence2", "score"][: len(rows[0])] if rows else None  # the frame's first columns
    return read_rows(rows, columns=names, name="pairs")
