"""The Score tab's "Score a file" section: a file of sentence pairs (or pasted rows), scored by every ticked model.

The rows go through :func:`mlse.api.score_pairs` a chunk at a time, so progress moves and Stop lands between chunks,
keeping the rows scored; a failing model is named and the others score. The answer: a summary row per model, a
preview and the CSV ``python -m mlse score`` writes. Only :func:`build_section` uses gradio.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from mlse.api import CALIBRATED, COSINE, ScoreRun, column_name, failure_text, score_pairs
from mlse.data.scored_file import write_scored
from mlse.data.user_table import UserTable, stem
from mlse.dirs import assets_dir
from mlse.encoders.catalogue import chosen_models
from mlse.encoders.progress import CacheCounter, Progress
from mlse.evaluation.sts import sts_metrics
from mlse.stop_signal import StopSignal
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.tables import CALIBRATED_PLACES, COSINE_PLACES, number_text, numbers_as_text
from mlse.ui.text import md_code, md_escape
from mlse.ui.uploads import read_upload
from mlse.ui.widgets import read_only_table, upload_with_examples

# Pairs per step: a bigger chunk pads less, but a Stop waits for the chunk under way.
FILE_CHUNK = 256
PREVIEW_ROWS = 500  # rows shown on the page; the download has them all
MAX_MODELS = 12  # per file: one request cannot load every model on disk
KEPT_DOWNLOADS = 32  # scored CSVs kept on disk; Gradio copies each into its own cache when it answers
# One file at a time: a file keeps both cores busy, so two at once would each take twice as long
FILE_CONCURRENCY = 1
EXAMPLE_FILE = assets_dir() / "examples" / "pairs_to_score.tsv"
SUMMARY_COLUMNS = ["model", "kind", "rows scored", "mean cosine", f"mean {CALIBRATED}"]  # "0-5", as in the CSV
GOLD_COLUMNS = ["Pearson ×100", "Spearman ×100"]  # of cosine vs the file's score column
INTRO = (
    "Score many pairs at once: upload a file or paste rows, one pair per line (sentence 1, a tab, sentence 2, "
    "and optionally a tab and a 0–5 score). With a score column the summary shows how well each model agrees "
    "with it. Stop keeps the rows already scored."
)


class ScoreFileOutput(NamedTuple):
    preview: pd.DataFrame  # the first PREVIEW_ROWS rows: "<model> cosine" / "<model> 0-5" as text, then the input
    summary: pd.DataFrame  # one row per model that scored
    csv_path: str | None  # every row, scored or blank (None: nothing was read)
    message: str  # markdown: what was read and skipped, models not used, stopped or how fast


# -- stop requests --------------------------------------------------------------------------------------------------
class StopSignals:
    """The running uploads' stop signals, one per session's run: Stop sets its session's signal,
    :func:`mlse.api.score_pairs` asks it between chunks (cancelling the Gradio event would lose its outputs)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._signals: dict[str, StopSignal] = {}

    def begin(self, key: str | None) -> StopSignal:
        """A fresh signal for a run of session ``key`` (an earlier Stop does not stop the next run)."""
        signal = StopSignal()
        if key:
            with self._lock:
                self._signals[key] = signal
        return signal

    def stop(self, key: str | None) -> bool:
        """Ask session ``key``'s run to stop; False when it has none running."""
        with self._lock:
            signal = self._signals.get(key) if key else None
        if signal is not None:
            signal.set()
        return signal is not None

    def end(self, key: str | None, signal: StopSignal) -> None:
        with self._lock:
            if key and self._signals.get(key) is signal:
                del self._signals[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._signals)


STOP_SIGNALS = StopSignals()


# -- the handler ----------------------------------------------------------------------------------------------------
def score_file(
    state, file, pasted, models, *, progress: Callable[[Progress], None] | None = None, stop: StopSignal | None = None
) -> ScoreFileOutput:
    """Score an uploaded file (or, without one, pasted rows) of sentence pairs with each model in ``models``.

    ``progress(step)`` after each step and chunk; ``stop`` asked before each chunk (keeping what is scored). Bad input
    never raises."""
    report = progress or (lambda step: None)
    report(Progress("reading the file"))
    table, read_note = read_upload(file, pasted, kind="pairs")
    if table is None:
        return _nothing(read_note)
    notes = [read_note]
    if not len(table):
        return _nothing(_join(notes, "No pair left to score."))
    names, asked, failures = chosen_models(models, set(state.model_names()), MAX_MODELS)
    if asked > len(names) + len(failures):
        notes.append(f"Scored with the first {MAX_MODELS} of the {asked} models ticked.")
    if not names and not failures:
        return _nothing(_join(notes, "Choose at least one model."))
    loaded = {}
    for i, name in enumerate(names):
        report(Progress(f"loading the models (now {name})", len(names), i, unit="models", timed=False))
        try:
            loaded[name] = state.encoder(name)
        except Exception as exc:  # an unknown name, missing files, a broken run: the others still score
            failures.append((name, failure_text(exc)))
    if not loaded:  # nothing loaded: say why, score nothing
        notes += _outcome_notes(state, [], failures, None, {})
        return ScoreFileOutput(_preview(table.frame()), empty_summary(table.gold is not None), None, _join(notes))
    job, counter = Progress("scoring", len(table)), CacheCounter(loaded.values())

    def chunk_done(done: int, total: int, _rate: float) -> None:
        report(job.update(done, total=total, encoded=counter.items(done)))

    # one model's failure leaves the others scoring (mlse.api.score_pairs, skip_failing)
    frame = score_pairs(table, loaded, chunk=FILE_CHUNK, progress=chunk_done, stop=stop, skip_failing=True)
    run = frame.attrs["run"]
    failures += run.failures
    columns = {key: frame[key].to_numpy() for key in run.columns}
    scored = [name for name in loaded if column_name(name, COSINE) in columns]
    notes += _outcome_notes(state, scored, failures, run, columns)
    if not scored:
        return ScoreFileOutput(_preview(frame), empty_summary(table.gold is not None), None, _join(notes))
    csv_path = write_scored_csv(table, frame, table.name)
    if len(frame) > PREVIEW_ROWS:
        notes.append(f"The preview shows the first {PREVIEW_ROWS:,} of {len(frame):,} rows; the download holds all.")
    summary = summary_table(state, scored, columns, table.gold)
    return ScoreFileOutput(_preview(frame), summary, csv_path, _join(notes))


def _outcome_notes(
    state, scored: list[str], failures: list[tuple[str, str]], run: ScoreRun | None, columns: dict[str, np.ndarray]
) -> list[str]:
    notes = []
    if failures:
        notes.append("**Not scored:** " + "; ".join(f"`{md_code(n)}`: {md_escape(why)}" for n, why in failures))
    if not scored:
        return notes
    speed = f" ({run.rows_per_second:,.0f} rows/s)" if math.isfinite(run.rows_per_second) else ""
    if run.stopped:
        notes.append(
            f"**Stopped after {run.done:,} of {run.total:,} rows**{speed}. The summary covers those rows; "
            "the download holds every row, blank where not scored."
        )
    else:
        notes.append(f"Scored {run.total:,} row(s) with {len(scored)} model(s) in {run.seconds:.1f} s{speed}.")
    uncalibrated = [n for n in scored if column_name(n, CALIBRATED) not in columns]
    if uncalibrated:
        why = getattr(state, "calibration_notes", {})
        notes.append(
            "No 0–5 score for "
            + ", ".join(f"`{md_code(n)}`" + (f" ({md_escape(why[n])})" if n in why else "") for n in uncalibrated)
            + ": no calibration fitted on its weights (python -m mlse calibrate --model NAME makes one)."
        )
    return notes


def _join(notes: list[str], *more: str) -> str:
    return "\n\n".join(n for n in [*notes, *more] if n)


def _nothing(message: str) -> ScoreFileOutput:
    return ScoreFileOutput(pd.DataFrame(columns=["sentence1", "sentence2"]), empty_summary(), None, message)


# -- the tables -----------------------------------------------------------------------------------------------------
def empty_summary(with_gold: bool = False) -> pd.DataFrame:
    return pd.DataFrame(columns=SUMMARY_COLUMNS + (GOLD_COLUMNS if with_gold else []))


def _mean(values: np.ndarray | None) -> float | None:
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def summary_table(state, names: list[str], columns: dict[str, np.ndarray], gold: np.ndarray | None) -> pd.DataFrame:
    """One row per model: kind, rows scored, mean cosine and 0-5, with gold Pearson and Spearman x 100 (as text)."""
    rows = []
    for name in names:
        cosine = columns[column_name(name, COSINE)]
        row = [
            name,
            state.model_kind(name),
            int(np.isfinite(cosine).sum()),
            number_text(_mean(cosine), 4),
            number_text(_mean(columns.get(column_name(name, CALIBRATED))), 2),
        ]
        if gold is not None:  # Pearson and Spearman x 100 of the scored rows; blank under two rows, or constant values
            scored = np.isfinite(cosine) & np.isfinite(gold)
            found = sts_metrics(cosine[scored], gold[scored], n_boot=0) if scored.sum() >= 2 else {}
            row += [number_text(found.get(key), 2) for key in ("pearson", "spearman")]
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS + (GOLD_COLUMNS if gold is not None else []))


def _preview(frame: pd.DataFrame) -> pd.DataFrame:
    """The first PREVIEW_ROWS rows, the scores first (long sentences would push them off the page) as text with the
    Score tab's decimals, blank where not scored; then the input's columns."""
    head = frame.head(PREVIEW_ROWS)
    scores = [key for key in head.columns if key.endswith((f" {COSINE}", f" {CALIBRATED}"))]
    head = numbers_as_text(head, {key: COSINE_PLACES if key.endswith(COSINE) else CALIBRATED_PLACES for key in scores})
    return head[[*scores, *(key for key in head.columns if key not in scores)]]


# -- the download ---------------------------------------------------------------------------------------------------
_kept: deque[Path] = deque()
_kept_lock = threading.Lock()


def scored_file_name(display_name: str) -> str:
    """``pairs.tsv`` -> ``pairs-scored.csv``; pasted text -> ``pasted-scored.csv``; odd characters become ``_``."""
    base = re.sub(r"[^\w.-]+", "_", stem(display_name)).strip("._")[:80] or "pairs"
    return f"{base}-scored.csv"


def write_scored_csv(table: UserTable, frame: pd.DataFrame, display_name: str) -> str:
    """The scored file written into a fresh temporary folder -> its path; only the newest KEPT_DOWNLOADS are kept."""
    folder = Path(tempfile.mkdtemp(prefix="mlse-scored-"))
    path = write_scored(table, frame, folder / scored_file_name(display_name))
    with _kept_lock:
        _kept.append(folder)
        old = [_kept.popleft() for _ in range(max(0, len(_kept) - KEPT_DOWNLOADS))]
    for gone in old:
        shutil.rmtree(gone, ignore_errors=True)
    return str(path)


# -- layout ---------------------------------------------------------------------------------------------------------
def build_section(state) -> list[ModelPicker]:
    """The "Score a file" section, inside the Score tab's ``gr.Tab`` -> its model picker (the app keeps it current)."""
    import gradio as gr  # lazy: importing the handlers (tests, benchmarks) must not load gradio

    choices = [(m.label, m.name) for m in state.models()]
    selected = state.loaded_defaults() or [n for n in [state.preferred_model()] if n]
    with gr.Accordion("Score a file", open=True):
        gr.Markdown(INTRO)
        upload, pasted = upload_with_examples(
            "File of sentence pairs",
            "…or paste pairs: sentence 1 <TAB> sentence 2 [<TAB> score]",
            {"Paste the example file": EXAMPLE_FILE},
            lines=5,
            max_lines=12,
        )
        models = gr.CheckboxGroup(choices, value=selected, label="Models for the file")
        with gr.Row():
            start = gr.Button("Score file", variant="primary")
            stop = gr.Button("Stop", variant="stop")
        message = gr.Markdown()
        summary = gr.Dataframe(value=empty_summary(), label="Summary (one row per model)", interactive=False)
        preview = read_only_table(label=f"Scored pairs (the first {PREVIEW_ROWS:,})")
        download = gr.File(label="Scored CSV (every row)", interactive=False)

        def score_pairs_file(pairs_file, pasted_pairs, models, request, progress=gr.Progress()):
            key = getattr(request, "session_hash", None)
            signal = STOP_SIGNALS.begin(key)

            def report(step: Progress) -> None:  # a step without a count (reading the file): its name, no bar
                progress(step.fraction(), desc=step.line())

            try:
                out = score_file(state, pairs_file, pasted_pairs, models, progress=report, stop=signal)
            finally:
                STOP_SIGNALS.end(key, signal)
            return out.message, out.summary, out.preview, out.csv_path

        def stop_scoring(request) -> None:
            STOP_SIGNALS.stop(getattr(request, "session_hash", None))

        for handler in (score_pairs_file, stop_scoring):  # real objects: this module's annotations are strings, and
            handler.__annotations__ = {"request": gr.Request}  # gr (imported here) is not among its globals
        start.click(
            score_pairs_file,
            [upload, pasted, models],
            [message, summary, preview, download],
            api_name="score_file",
            concurrency_limit=FILE_CONCURRENCY,
            concurrency_id="score_file",
        )
        # Unqueued, so it is handled at once while the file is being scored (not behind it)
        stop.click(stop_scoring, None, None, api_name="stop_score_file", queue=False)
        check_inputs(models, allowed=state.model_names)
    return [ModelPicker(models, multi=True, labelled=True)]
