"""Background jobs for the app: one run at a time, a short bounded queue, progress the UI can poll.

Two runs at once would fight over the one CPU/GPU. A job is a callable ``fn(report, signal) -> result`` that reports
progress records (appended to ``job.records``, which the UI polls) and asks ``signal``, its
:class:`~mlse.stop_signal.StopSignal`, whether to stop. All sessions share one runner: a start while one runs is queued
(up to ``max_queued``) or refused. A failing job ends ``"failed"``; it never takes the runner down.

A job may have an ``owner`` (an unguessable per-session token): asked with an owner, :meth:`JobRunner.stop` and
:meth:`JobRunner.latest` reach only that owner's jobs; others learn only that a run is busy (:meth:`busy_text`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlse.errors import MlseError
from mlse.stop_signal import Stopped, StopSignal

log = logging.getLogger(__name__)

Report = Callable[[dict], None]
JobFn = Callable[[Report, StopSignal], Any]

FINISHED_STATES = ("finished", "stopped", "failed", "cancelled")


class JobBusyError(MlseError):
    """A job was submitted while the runner (and its queue) is full."""


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
    started: float | None = None
    finished: float | None = None
    signal: StopSignal = field(default_factory=StopSignal)  # its Stop button; the job adds its budget
    owner: str | None = None  # the submitter's token: stop / progress with an owner reach only their own jobs

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

    ``max_queued``: jobs that may wait behind the running one (0: refuse a second submit); ``keep``: finished jobs kept.
    ``on_finish``: called with each job once it has ended; its errors are logged, never raised into the runner.
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
    def submit(
        self, name: str, fn: JobFn, description: str = "", meta: dict | None = None, owner: str | None = None
    ) -> Job:
        """Queue ``fn``; it starts at once when nothing runs. Raises :class:`JobBusyError` when the queue is full.
        ``owner``: the submitter's token; the busy message then names no other owner's job."""
        with self._lock:
            if len(self._active_jobs()) > self.max_queued:  # one running (or about to) + max_queued waiting
                raise JobBusyError(self._busy_text() if owner is None else self.busy_text(owner, locked=True))
            if any(j.name == name for j in self._active_jobs()):
                raise JobBusyError(f"a job named {name!r} is already running or queued")
            job = Job(self._next_id, name, fn, description, dict(meta or {}), owner=owner)
            self._next_id += 1
            self._queue.append(job)
            job.message = "queued" if self._running is not None else "starting"
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="mlse-job-runner", daemon=True)
                self._worker.start()
            return job

    def stop(self, name: str | None = None, *, owner: str | None = None) -> str:
        """Ask the running job (or the named one) to stop; a queued job is cancelled. Returns what happened.

        ``owner``: only a job of that owner is reached (the running one first, else their first queued one); another
        owner's job is never stopped, and the answer does not name it."""
        with self._lock:
            if owner is not None:
                target = next((j for j in self._active_jobs() if j.owner == owner), None)
                if target is None:
                    return "You have no run in progress." + (
                        " The run in progress was started by someone else; only they can stop it."
                        if self._active_jobs()
                        else ""
                    )
            elif name is None:  # the running job, or the one just submitted that the worker has not picked up yet
                target = self._running or (self._queue[0] if self._queue else None)
            else:
                target = next((j for j in self._active_jobs() if j.name == name), None)
            if target is None:
                return "No job is running." if name is None else f"No running or queued job named {name!r}."
            if target.state == "queued":
                self._queue.remove(target)
                target.state, target.message, target.finished = "cancelled", "cancelled before it started", time.time()
                self._history.append(target)
                self._idle.notify_all()
                return f"Cancelled the queued job {target.name!r}."
            target.signal.set()
            target.message = "stop requested; finishing the current step"
            return f"Stop requested for {target.name!r}; it ends after the current step."

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job runs or waits (tests, scripts); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running is None and not self._queue, timeout)

    # -- what the UI reads ------------------------------------------------------------------------------------------
    def running(self) -> Job | None:
        with self._lock:
            return self._running

    def queued(self) -> list[Job]:
        with self._lock:
            return list(self._queue)

    def latest(self, owner: str | None = None) -> Job | None:
        """The running job, else the next queued one, else the most recently finished one (what the tab shows).
        With ``owner``: that owner's, in the same order (None when they have none)."""
        with self._lock:
            jobs = [*self._active_jobs(), *reversed(self._history)]  # running, queued, then the latest finished first
            return next((j for j in jobs if owner is None or j.owner == owner), None)

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

    def busy_text(self, owner: str | None, *, locked: bool = False) -> str:
        """What a visitor who is not the owner may know: whether a run is busy, for how long, how many wait; no name,
        description or progress of another owner's job."""
        if not locked:
            with self._lock:
                return self.busy_text(owner, locked=True)
        others = [j for j in self._active_jobs() if j.owner != owner or owner is None]
        if not others:
            return "No other training run in progress."
        running = self._running if self._running in others else None
        text = "Another visitor's training run is in progress"
        text += f" (running for {running.elapsed() / 60:.1f} min)." if running is not None else "."
        waiting = len([j for j in others if j is not running])
        if waiting:
            text += f" {waiting} more wait{'s' if waiting == 1 else ''}."
        return text + " One run at a time: try again when it ends."

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
            result = job.fn(report, job.signal)
            last = job.message if job.records else ""
            if job.signal.is_set():
                state, message = "stopped", f"stopped; the last good checkpoint is kept. {last}".strip()
            else:
                state, message = "finished", last or "finished"
            error = None
        except Stopped as exc:  # the job ended early: a stop check raised it
            result, state, message, error = None, "stopped", str(exc) or "stopped", None
        except MlseError as exc:  # the user's input or environment: the message is the whole story
            result, state, message, error = None, "failed", f"failed: {exc}", str(exc)
        except Exception as exc:  # a bug: keep the traceback in the log, the message in the UI
            log.exception("job %r failed", job.name)
            result, state, message, error = None, "failed", f"failed: {type(exc).__name__}: {exc}", repr(exc)
        with self._lock:
            job.result, job.state, job.message, job.error = result, state, message, error
            job.finished = time.time()
