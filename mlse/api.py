"""The public API behind ``import mlse``: load a model as the app uses it, score sentence pairs, read a user's file.

``load_model`` returns the model the app's Score tab uses: a backbone with its cosine -> 0-5 calibration attached when
one was fitted on its weights (:mod:`mlse.calibration.backbone`), a scorer with its Stage-2 calibration. ``pair_scores``
is the one place a pair's cosine and calibrated score are computed; the app calls it too, so a script and the page give
the same numbers. ``score_pairs`` streams a table through every model in chunks (the embedding cache makes a rerun
cheap and an interrupted run resumable) and returns a pandas DataFrame: the input's columns first, then two columns per
model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mlse.data.user_files import UserTable, read_pairs, read_rows
from mlse.encoders.identity import DEFAULT_BACKEND
from mlse.encoders.registry import DEFAULT_MODEL
from mlse.errors import MlseError
from mlse.evaluation.sts import cosine_predictions

CHUNK_PAIRS = 512  # pairs encoded per step: bounded memory, and a Stop lands within one chunk
COSINE, CALIBRATED = "cosine", "0-5"

# progress(done_rows, total_rows, rows_per_second)
Progress = Callable[[int, int, float], None]


def load_model(name: str = DEFAULT_MODEL, *, backend: str = DEFAULT_BACKEND, calibrated: bool = True, **kwargs):
    """The model called ``name`` (a backbone, a shipped or trained scorer, a student, a folder) on ``backend``.

    With ``calibrated`` (the default) a backbone comes with its cosine -> 0-5 map when one was fitted on its exact
    weights, so ``pair_scores`` gives the calibrated score the app shows; a Stage-2 scorer has its own. Other keyword
    arguments go to :func:`mlse.models.load_model` (``device``, ``cache``, ``backbone``).
    """
    from mlse.models import load_model as load_plain

    model = load_plain(name, backend=backend, **kwargs)
    return attach_calibration(model)[0] if calibrated else model


def attach_calibration(model) -> tuple[object, str]:
    """(``model`` with its cosine -> 0-5 map, "") when a calibration was fitted on its weights; a scorer (which
    calibrates with its Stage-2 head) as it is; else (``model``, why none is used, or "" when none exists)."""
    from mlse.calibration.backbone import with_calibration

    if getattr(model, "calibrated_score", None) is not None:
        return model, ""
    return with_calibration(model)


def column_name(model: str, what: str) -> str:
    """The scored file's column for ``model``: ``"me5-small cosine"``, ``"me5-small 0-5"``."""
    return f"{model} {what}"


def pair_scores(
    model, sentences1: Sequence[str], sentences2: Sequence[str], *, batch_size: int = 64, encode: Callable | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """(cosine [n], calibrated 0-5 [n] or None) of ``sentences1[i]`` vs ``sentences2[i]`` under ``model``.

    Both sides are encoded in one call (a text on both sides is encoded once). ``encode(model, texts)``: another way
    to get the L2-normalised embeddings (the app's micro-batcher); default ``model.encode``.
    """
    s1, s2 = list(sentences1), list(sentences2)
    if len(s1) != len(s2):
        raise MlseError(f"pair_scores: {len(s1)} first sentences but {len(s2)} second sentences")
    if not s1:
        return np.zeros(0, dtype=np.float32), None
    texts = [*s1, *s2]
    emb = encode(model, texts) if encode is not None else model.encode(texts, batch_size=batch_size)  # [2n, d]
    emb = np.asarray(emb, dtype=np.float32)
    cos = np.clip(cosine_predictions(emb[: len(s1)], emb[len(s1) :]), -1.0, 1.0).astype(np.float32)  # [n], shown
    calibrate = getattr(model, "calibrated_score", None)
    calibrated = calibrate(cos) if calibrate is not None else None
    return cos, (None if calibrated is None else np.asarray(calibrated, dtype=np.float32))


@dataclass
class ScoreRun:
    """What :func:`score_rows` did: rows scored (a prefix of the table), whether it was stopped, how fast."""

    done: int
    total: int
    stopped: bool
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else float("nan")


def score_rows(
    models: dict[str, object],
    s1: Sequence[str],
    s2: Sequence[str],
    *,
    chunk: int = CHUNK_PAIRS,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    encode: Callable | None = None,
) -> tuple[dict[str, np.ndarray], ScoreRun]:
    """Score every pair with every model, ``chunk`` pairs at a time -> ({column: values [n]}, run).

    Rows past a stop stay NaN; each chunk is scored by every model before the next starts, so a stopped run keeps
    complete rows. Only one chunk's embeddings are in memory at a time.
    """
    n = len(s1)
    columns: dict[str, np.ndarray] = {}
    for name in models:
        columns[column_name(name, COSINE)] = np.full(n, np.nan, dtype=np.float32)
    calibrated_models: set[str] = set()
    start, done, stopped = time.perf_counter(), 0, False
    for lo in range(0, n, max(1, chunk)):
        if should_stop is not None and should_stop():
            stopped = True
            break
        hi = min(n, lo + chunk)
        for name, model in models.items():
            cos, cal = pair_scores(model, s1[lo:hi], s2[lo:hi], encode=encode)
            columns[column_name(name, COSINE)][lo:hi] = cos
            if cal is not None:
                key = column_name(name, CALIBRATED)
                if key not in columns:
                    columns[key] = np.full(n, np.nan, dtype=np.float32)
                    calibrated_models.add(name)
                columns[key][lo:hi] = cal
        done = hi
        if progress is not None:
            elapsed = time.perf_counter() - start
            progress(done, n, done / elapsed if elapsed > 0 else float("nan"))
    ordered = {}
    for name in models:  # each model's cosine, then its 0-5 score
        ordered[column_name(name, COSINE)] = columns[column_name(name, COSINE)]
        if name in calibrated_models:
            ordered[column_name(name, CALIBRATED)] = columns[column_name(name, CALIBRATED)]
    return ordered, ScoreRun(done, n, stopped, time.perf_counter() - start)


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


def score_pairs(
    pairs,
    models: Sequence[str] | str = (DEFAULT_MODEL,),
    *,
    backend: str = DEFAULT_BACKEND,
    chunk: int = CHUNK_PAIRS,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
):
    """Score sentence pairs with each model -> pandas DataFrame.

    ``pairs``: a path or a file's bytes (read by :func:`mlse.read_pairs`), a
    :class:`~mlse.data.user_files.UserTable`, a DataFrame (``sentence1`` / ``sentence2`` / ``score`` columns or the
    other names the reader knows; default ``0, 1`` columns by position), or (sentence1, sentence2[, score]) tuples.
    Rows are checked as a file's are: an empty sentence or a bad score is one DataError naming the row (from 1); the
    sentences are scored exactly as given. ``models``: names (or loaded models). The frame holds the input's columns
    (a DataFrame's own, with its dtypes and index; tuples' as sentence1, sentence2, score), then
    ``"<model> cosine"`` and, where the model is calibrated, ``"<model> 0-5"``. ``frame.attrs["run"]`` is the
    :class:`ScoreRun` (rows done, stopped or not).
    """
    table = _as_table(pairs)
    names = [models] if isinstance(models, str) else list(models)
    if not names:
        raise MlseError("score_pairs: name at least one model")
    loaded = {}
    for m in names:
        if isinstance(m, str):
            loaded[m] = load_model(m, backend=backend)
        else:
            loaded[getattr(m, "name", f"model{len(loaded) + 1}")] = m
    scores, run = score_rows(
        loaded,
        table.role("sentence1"),
        table.role("sentence2"),
        chunk=chunk,
        progress=progress,
        should_stop=should_stop,
    )
    frame = pairs.copy() if _is_frame(pairs) else table.frame()  # a frame keeps its own dtypes and index
    for key, values in scores.items():
        frame[key] = values
    frame.attrs["run"] = run
    return frame
