"""Background training jobs for the app: one run at a time, a short bounded queue, progress the UI can poll.

Why a runner of its own: a training run lasts minutes, far longer than a web request should block, and two runs at
once would fight over the one CPU/GPU. :class:`JobRunner` runs one job at a time in a daemon thread; a job is a plain
callable ``fn(report, stop) -> result`` that calls ``report(record)`` with progress records (appended to
``job.records``, which the UI polls) and checks the ``stop`` event (the app's stop button). Every session of the app
shares one runner, so everybody sees that a run is in progress, and a start while one runs is queued (up to
``max_queued``) or refused with a message naming the running job. A failing job ends in state ``"failed"`` with its
message; it never takes the runner (or the app) down.

The second half builds training jobs from a :class:`TrainRequest`: Stage-1 / Stage-2 heads (:mod:`mlse.training`)
and the fine-tuning methods of :mod:`mlse.finetune` (``mse``, ``ema``, ``soft``, ``hard``). Outputs go to
``runs_dir()/NAME``, where the model registry finds them, so a finished run appears in every model list.

Stopping: every training job gets one :class:`mlse.stopping.StopSignal` (the stop button plus the time budget, whose
clock starts with the job, so the budget counts loading, encoding, training, evaluation and saving alike). Every phase
asks it: data loading between files, encoding and teacher targets between chunks of a few batches (finished chunks
stay in the embedding cache, so a rerun continues), training after every step (fine-tuning) or epoch (heads), dev
evaluations between chunks. A stop before training has anything to show ends the job with nothing saved; a stop
later saves the best checkpoint so far, marked partial (``partial`` in the scorer's metadata / the run's
``metrics.json``). A run that fails, is stopped early or is cancelled puts back the run folder it was replacing.

ZeroGPU (Hugging Face Spaces): when the ``spaces`` package is importable the training call is wrapped in
``spaces.GPU(duration=budget + margin)``, which attaches a GPU for that call on ZeroGPU hardware and does nothing
elsewhere. ``spaces`` is not a dependency of this project; the Space's own environment provides it.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlse.child_jobs import run_in_child
from mlse.data.pairs import DEV_PAIRS, ENGLISH_PAIRS, SEED_PARALLEL_PAIRS, STAGE2_PAIRS
from mlse.dirs import runs_dir
from mlse.encoders.torch import default_device
from mlse.errors import MlseError
from mlse.finetune import FinetuneConfig, finetune
from mlse.run_health import recover_runs
from mlse.runs import is_model_folder, is_scorer_folder, run_name
from mlse.stopping import Stopped, StopSignal
from mlse.training import train_stage1, train_stage2

log = logging.getLogger(__name__)

Report = Callable[[dict], None]
JobFn = Callable[[Report, threading.Event], Any]

FINISHED_STATES = ("finished", "stopped", "failed", "cancelled")


class JobBusyError(MlseError):
    """A job was submitted while the runner (and its queue) is full."""


# Raised inside a job (by a stop check or a progress callback) to end it early; the job ends as ``"stopped"``.
JobStopped = Stopped


@dataclass
class Job:
    """One submitted job and everything the UI shows about it (mutated only under the runner's lock)."""

    id: int
    name: str
    fn: JobFn
    description: str = ""
    meta: dict = field(default_factory=dict)  # whatever the caller wants to show with the job (e.g. its request)
    state: str = "queued"  # queued -> running -> finished | stopped | failed; queued -> cancelled
    message: str = ""
    records: list[dict] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)

    @property
    def done(self) -> bool:
        return self.state in FINISHED_STATES

    def elapsed(self) -> float:
        """Seconds since the job started (0 while queued; frozen once finished)."""
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started


class JobRunner:
    """Runs submitted jobs one at a time, in submission order, in a background thread.

    ``max_queued``: how many jobs may wait behind the running one (0: a second submit is refused).
    ``keep``: how many finished jobs are remembered (for ``latest()`` and ``history()``).
    ``on_finish``: called with each job once it has ended (the app rescans its model list there, so a new run joins
    every model picker at once); its errors are logged, never raised into the runner.
    """

    def __init__(self, max_queued: int = 0, keep: int = 20, on_finish: Callable[[Job], None] | None = None):
        self.max_queued = max_queued
        self.on_finish = on_finish
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queue: collections.deque[Job] = collections.deque()
        self._running: Job | None = None
        self._history: collections.deque[Job] = collections.deque(maxlen=keep)
        self._next_id = 1
        self._worker: threading.Thread | None = None

    # -- submitting and stopping ------------------------------------------------------------------------------------
    def submit(self, name: str, fn: JobFn, description: str = "", meta: dict | None = None) -> Job:
        """Queue ``fn``; it starts at once when nothing runs. Raises :class:`JobBusyError` when the queue is full."""
        with self._lock:
            if len(self._active_jobs()) > self.max_queued:  # one running (or about to) + max_queued waiting
                raise JobBusyError(self._busy_text())
            if any(j.name == name for j in self._active_jobs()):
                raise JobBusyError(f"a job named {name!r} is already running or queued")
            job = Job(self._next_id, name, fn, description, dict(meta or {}))
            self._next_id += 1
            self._queue.append(job)
            job.message = "queued" if self._running is not None else "starting"
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="mlse-job-runner", daemon=True)
                self._worker.start()
            return job

    def stop(self, name: str | None = None) -> str:
        """Ask the running job (or the named one) to stop; a queued job is cancelled. Returns what happened."""
        with self._lock:
            target = self._running if name is None else next((j for j in self._active_jobs() if j.name == name), None)
            if target is None:
                return "No job is running." if name is None else f"No running or queued job named {name!r}."
            if target.state == "queued":
                self._queue.remove(target)
                target.state, target.message, target.finished = "cancelled", "cancelled before it started", time.time()
                self._history.append(target)
                self._idle.notify_all()
                return f"Cancelled the queued job {target.name!r}."
            target.stop_event.set()
            target.message = "stop requested; finishing the current step"
            return f"Stop requested for {target.name!r}; it ends after the current step."

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job runs or waits (tests, scripts); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._running is not None or self._queue:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    # -- what the UI reads ------------------------------------------------------------------------------------------
    def running(self) -> Job | None:
        with self._lock:
            return self._running

    def queued(self) -> list[Job]:
        with self._lock:
            return list(self._queue)

    def history(self) -> list[Job]:
        """Finished jobs, oldest first."""
        with self._lock:
            return list(self._history)

    def latest(self) -> Job | None:
        """The running job, else the next queued one, else the most recently finished one (what the tab shows)."""
        with self._lock:
            if self._running is not None:
                return self._running
            if self._queue:
                return self._queue[0]
            return self._history[-1] if self._history else None

    def get(self, job_id: int) -> Job | None:
        with self._lock:
            jobs = [*self._active_jobs(), *self._history]
            return next((j for j in jobs if j.id == job_id), None)

    def records(self, job: Job) -> list[dict]:
        """A copy of the job's progress records (the list grows while the job runs)."""
        with self._lock:
            return list(job.records)

    def status_text(self) -> str:
        """One line for every session: what runs, for how long, and what waits."""
        with self._lock:
            if not self._active_jobs():
                return "No training run in progress."
            return self._busy_text(refused=False)

    # -- internals --------------------------------------------------------------------------------------------------
    def _active_jobs(self) -> list[Job]:
        return ([self._running] if self._running is not None else []) + list(self._queue)

    def _busy_text(self, refused: bool = True) -> str:
        job = self._running or self._queue[0]
        text = f"A training run is in progress: {job.name!r}"
        text += f" ({job.description})" if job.description else ""
        text += f", running for {job.elapsed() / 60:.1f} min."
        waiting = [j for j in self._queue if j is not job]
        if waiting:
            text += f" Queued: {', '.join(repr(j.name) for j in waiting)}."
        if refused:
            text += " The queue is full; try again when it ends."
        return text

    def _work(self) -> None:
        """The worker thread: run queued jobs until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    self._running = None
                    self._worker = None
                    self._idle.notify_all()
                    return
                job = self._queue.popleft()
                self._running = job
                job.state, job.started, job.message = "running", time.time(), "running"
            try:
                self._run_one(job)
            finally:  # even a BaseException leaves the runner usable
                self._finished(job)
                with self._lock:
                    self._history.append(job)
                    self._running = None
                    self._idle.notify_all()

    def _finished(self, job: Job) -> None:
        if self.on_finish is None:
            return
        try:
            self.on_finish(job)
        except Exception:  # a failing hook must not wedge the runner or hide the job's own outcome
            log.exception("on_finish hook failed for job %r", job.name)

    def _run_one(self, job: Job) -> None:
        """Run one job; its outcome (never an exception) lands in ``job.state`` / ``message`` / ``error``."""

        def report(record: dict) -> None:
            with self._lock:
                job.records.append({"t": round(time.time() - (job.started or time.time()), 3), **record})
                if record.get("message"):
                    job.message = str(record["message"])

        try:
            result = job.fn(report, job.stop_event)
            last = job.message if job.records else ""
            if job.stop_event.is_set():
                state, message = "stopped", f"stopped; the last good checkpoint is kept. {last}".strip()
            else:
                state, message = "finished", last or "finished"
            error = None
        except JobStopped as exc:
            result, state, message, error = None, "stopped", str(exc) or "stopped", None
        except MlseError as exc:  # the user's input or environment: the message is the whole story
            result, state, message, error = None, "failed", f"failed: {exc}", str(exc)
        except Exception as exc:  # a bug: keep the traceback in the log, the message in the UI
            log.exception("job %r failed", job.name)
            result, state, message, error = None, "failed", f"failed: {type(exc).__name__}: {exc}", repr(exc)
        with self._lock:
            job.result, job.state, job.message, job.error = result, state, message, error
            job.finished = time.time()


# ------------------------------------------------------------------------------------------------- training jobs
METHODS = ("stage1", "stage2", "mse", "ema", "soft", "hard")
HEAD_METHODS = ("stage1", "stage2")
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,79}$")


@dataclass
class TrainRequest:
    """What the fine-tune tab asks for; :func:`training_job` turns it into a job."""

    method: str
    model: str  # stage1: backbone; stage2: a Stage-1 scorer; others: the student
    name: str  # run folder name under runs_dir()
    teacher: str | None = None  # mse / soft
    pairs: list[str] = field(default_factory=list)  # empty: the method's default
    max_pairs: int | None = 2000  # per language pair (stage1 and fine-tuning)
    budget_minutes: float = 3.0
    overwrite: bool = False
    batch_size: int = 32
    lr: float | None = None  # None: the method's default
    eval_every_steps: int = 20
    max_steps: int | None = None
    max_epochs: int | None = None  # stage1 / stage2
    dev_pairs: list[str] | None = None
    dev_max_pairs: int | None = 200
    extend_vocab: int = 0
    precision: str = "auto"
    probe: bool = False  # stage1: the language-ID probe (FLORES; slow the first time)
    seed: int = 0
    data_dir: str | None = None
    device: str | None = None  # default: mlse.encoders.default_device()


def validate_run_name(name: str | None) -> str:
    """A safe folder name (letters, digits, ``. _ + -``; no path separators, no leading dot) or an MlseError."""
    name = (name or "").strip()
    if not name:
        raise MlseError("give the run a name")
    if not _RUN_NAME.match(name) or ".." in name:
        raise MlseError(f"run name {name!r} is not a safe folder name: use letters, digits and . _ + - (max 80), "
                        "starting with a letter or digit")  # fmt: skip
    return name


def default_run_name(model: str, method: str) -> str:
    """``runs/x`` + ``mse`` -> ``x+mse`` (the CLI's naming: :func:`mlse.runs.run_name`)."""
    return run_name(model, method)


def check_request(req: TrainRequest) -> Path:
    """Refuse a request that cannot run, before anything is queued; returns the run folder."""
    if req.method not in METHODS:
        raise MlseError(f"unknown method {req.method!r}; expected one of {', '.join(METHODS)}")
    if not (req.model or "").strip():
        raise MlseError("choose a model")
    if not req.budget_minutes or req.budget_minutes <= 0:
        raise MlseError(f"the time budget must be > 0 minutes, got {req.budget_minutes}")
    name = validate_run_name(req.name)
    out = runs_dir() / name
    if req.model.strip() in (f"runs/{name}", str(out)) or (req.teacher or "").strip() in (f"runs/{name}", str(out)):
        raise MlseError(f"run {name!r} is an input of this run; choose another name")
    if out.exists() and not req.overwrite:
        raise MlseError(f"run {name!r} already exists ({out}); tick 'overwrite' or choose another name")
    if req.method in ("mse", "soft") and not req.teacher:
        raise MlseError(f"method {req.method!r} needs a teacher")
    return out


def training_job(req: TrainRequest, *, child_process: bool = False, started: float | None = None) -> JobFn:
    """A job function for :meth:`JobRunner.submit` (call :func:`check_request` first for early errors).

    ``child_process``: train in a spawned child (:mod:`mlse.child_jobs`), so that the job's memory returns to the
    system when it ends (the app does this); progress and Stop work as in-process. Not under ZeroGPU (``spaces``),
    whose GPU is attached to the calling process. ``started``: when the budget's clock started (a child continues
    its parent's clock); default: when the job starts.
    """
    out = check_request(req)
    if child_process and importlib.util.find_spec("spaces") is None:
        return _child_training_job(req, out)

    def job(report: Report, stop: threading.Event):
        signal = StopSignal(stop, float(req.budget_minutes) * 60, started)  # the clock of the whole job
        aside = _move_aside(out) if out.exists() else None
        try:
            report({"event": "phase", "message": "preparing: loading data and models"})
            train = _run_heads if req.method in HEAD_METHODS else _run_finetune
            result = _maybe_on_gpu(train, req.budget_minutes)(req, out, report, signal)
        except Stopped as exc:  # stopped before anything worth keeping: leave no half-made run behind
            if out.exists() and not _has_model(out):
                shutil.rmtree(out, ignore_errors=True)
            _restore(aside, out)
            hint = "; encoded texts are cached, so a rerun continues from there" if "encoding" in str(exc) else ""
            raise Stopped(f"{exc}: nothing was saved{hint}") from None
        except BaseException:
            _restore(aside, out)
            raise
        _discard(aside, out)
        return result

    return job


def _child_training_job(req: TrainRequest, out: Path) -> JobFn:
    def job(report: Report, stop: threading.Event):
        started = time.monotonic()  # StopSignal's clock: system-wide, so the child keeps counting from here
        try:
            return run_in_child("mlse.jobs:train_in_this_process", req, started, report=report, stop=stop)
        finally:  # a child that died mid-replacement left the old run aside: put it back now, not at next start
            recover_runs(out.parent)

    return job


def train_in_this_process(req: TrainRequest, started: float, *, report: Report, stop) -> dict:
    """The child's side of :func:`training_job` with ``child_process=True`` (an importable, picklable entry)."""
    return training_job(req, started=started)(report, stop)


def _run_finetune(req: TrainRequest, out: Path, report: Report, signal: StopSignal) -> dict:
    """mse / ema / soft / hard through :func:`mlse.finetune.finetune` (a stop in training keeps the best checkpoint)."""
    teacher = req.teacher if req.method in ("mse", "soft") else None
    config = FinetuneConfig(
        method=req.method, student=req.model, teacher=teacher, pairs=list(req.pairs or ENGLISH_PAIRS),
        max_pairs=req.max_pairs or None, budget_minutes=float(req.budget_minutes), batch_size=int(req.batch_size),
        lr=req.lr or 1e-4, eval_every_steps=int(req.eval_every_steps), max_steps=req.max_steps or None,
        dev_pairs=list(req.dev_pairs or DEV_PAIRS), dev_max_pairs=req.dev_max_pairs or None, seed=int(req.seed),
        out=str(out), data_dir=req.data_dir, device=req.device or default_device(),
        extend_vocab=int(req.extend_vocab or 0), precision=req.precision,
    )  # fmt: skip

    def on_eval(record: dict) -> None:
        report({"event": "eval", "x": record["step"], "minutes": record["elapsed_s"] / 60, "loss": record["loss"],
                "dev": record["dev_spearman"], "best": record["best_dev_spearman"], "saved": record.get("saved"),
                "message": f"training: step {record['step']}, dev Spearman "
                           f"{_fmt(record['dev_spearman'])} (best {_fmt(record['best_dev_spearman'])})"})  # fmt: skip

    metrics = finetune(config, progress=on_eval, stop=signal.event, signal=signal)
    report({"event": "phase", "message": f"done: {metrics['stop_reason']} after {metrics['steps']} steps, best dev "
                                         f"Spearman {_fmt(metrics['best_dev_spearman'])} at step "
                                         f"{metrics['best_step']}"})  # fmt: skip
    return {"run": f"runs/{out.name}", "metrics": metrics}


def _run_heads(req: TrainRequest, out: Path, report: Report, signal: StopSignal) -> dict:
    """Stage 1 / Stage 2 heads; the budget and the stop button end them in any phase (see the module docstring)."""
    def on_epoch(record: dict) -> None:
        dev = record.get("dev_pearson")
        report({"event": "eval", "x": record["epoch"], "minutes": signal.elapsed() / 60,
                "loss": record.get("train_loss"), "dev": None if dev is None else 100 * dev,
                "dev_loss": record.get("dev_loss"), "message": f"training: epoch {record['epoch']}"})  # fmt: skip

    should_stop = signal.should_stop
    stop = signal.event
    extra = {k: v for k, v in (("lr", req.lr), ("max_epochs", req.max_epochs)) if v}
    if req.method == "stage1":
        scorer = train_stage1(req.model, out=out, pairs=list(req.pairs or SEED_PARALLEL_PAIRS),
                              max_pairs=req.max_pairs or None, data_dir=req.data_dir, seed=int(req.seed),
                              probe=req.probe, progress=on_epoch, should_stop=should_stop, **extra)  # fmt: skip
    else:
        scorer = train_stage2(req.model, out=out, pairs=list(req.pairs or STAGE2_PAIRS), data_dir=req.data_dir,
                              seed=int(req.seed), progress=on_epoch, should_stop=should_stop, **extra)  # fmt: skip
    if not stop.is_set() and scorer.metadata.get("metrics", {}).get(f"{req.method}_stopped"):
        report({"event": "phase", "message": f"the {req.budget_minutes:g}-minute budget ran out; the best epoch so "
                                             "far is saved"})  # fmt: skip
    metrics = scorer.metadata.get("metrics", {})
    report({"event": "phase", "message": "done: " + ", ".join(f"{k} {_fmt(v)}" for k, v in metrics.items()
                                                             if isinstance(v, (int, float)))})  # fmt: skip
    return {"run": f"runs/{out.name}", "metrics": metrics}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _maybe_on_gpu(fn: Callable, budget_minutes: float) -> Callable:
    """``spaces.GPU(fn, duration=...)`` when the ``spaces`` package is importable (ZeroGPU Spaces), else ``fn``.

    The duration covers the budget plus 10 minutes for loading, data preparation and the final evaluation.
    """
    if importlib.util.find_spec("spaces") is None:
        return fn
    try:
        import spaces  # lazy: only on ZeroGPU Spaces
    except Exception:  # an unusable spaces package must not stop CPU training
        log.warning("the 'spaces' package is installed but does not import; training without spaces.GPU")
        return fn
    return spaces.GPU(fn, duration=int(budget_minutes * 60) + 600)


def _move_aside(out: Path) -> Path:
    """Rename an existing run folder to a hidden sibling (the registry skips dot-folders) while it is replaced."""
    aside = out.with_name(f".{out.name}.replaced-{int(time.time() * 1000)}")
    out.rename(aside)
    return aside


def _restore(aside: Path | None, out: Path) -> None:
    """A run that failed or saved nothing gives the replaced run folder back."""
    if aside is None:
        return
    if out.exists() and _has_model(out):
        shutil.rmtree(aside, ignore_errors=True)
        return
    shutil.rmtree(out, ignore_errors=True)
    aside.rename(out)


def _discard(aside: Path | None, out: Path) -> None:
    if aside is not None:
        _restore(aside, out)  # keeps the new run when it saved a model, else puts the old one back


def _has_model(folder: Path) -> bool:
    return is_scorer_folder(folder) or is_model_folder(folder / "model")
