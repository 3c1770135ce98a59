"""Run a job in a child process, so that the memory it used goes back to the operating system when it ends.

Freed in the app's own process, most of a job's memory stays in the allocator's arenas; a ``spawn`` child returns
every page when it exits.

The job is an importable ``"module:function"`` called as ``function(*args, report=..., stop=...)`` (a
:class:`mlse.train.runner.JobRunner` job's contract; ``stop`` is the child's own signal, whose Stop button is an event
the parent sets). Outcomes come back as in-process: a return value, :class:`~mlse.stop_signal.Stopped`,
:class:`~mlse.errors.MlseError` (message only), any other exception as ``RuntimeError``. A child that dies unanswered
is an ``MlseError`` with its exit code; one that ignores Stop for :data:`STOP_GRACE_S` seconds is terminated.

**A child never outlives its app**: the Linux kernel SIGTERMs it when the parent *thread* ends
(``prctl(PR_SET_PDEATHSIG)``; that thread waits in :func:`run_in_child`), a watchdog thread polls the parent, and
SIGTERM sets the stop; a child alive :data:`EXIT_GRACE_S` seconds later exits hard.

**The job lock** (``lock``) is held while the child lives and removed once it has answered a live parent, unless told
to wind down; a lock left behind tells the next start that the job died unanswered.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import multiprocessing
import os
import queue as queue_module
import signal
import sys
import threading
import time
from collections.abc import Callable

from mlse.errors import MlseError
from mlse.runs.job_lock import LockRequest, hold
from mlse.stop_signal import Stopped, StopSignal

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0  # after Stop, how long a child may take to end on its own before it is terminated
EXIT_GRACE_S = 7.0  # after its parent died (or a SIGTERM), how long a child may take to save and end before _exit
PARENT_POLL_S = 0.5  # how often the child's watchdog looks for its parent
ORPHAN_EXIT_CODE = 75  # the hard exit of a child that outlived its grace
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_POLL_S = 0.1
_winding_down = threading.Event()  # in the child: the stop has been given, the hard exit is armed


def run_in_child(target: str, *args, report: Callable[[dict], None], stop: StopSignal, lock: LockRequest | None = None):
    """Call ``target`` (``"module:function"``) with ``args`` in a spawned child; returns what it returns.

    ``stop`` and ``lock``: see the module docstring. On Linux the child is signalled when the calling thread ends.
    """
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    child_stop = context.Event()
    child = context.Process(
        target=_child_main,
        args=(target, args, messages, child_stop, os.getpid(), lock),
        daemon=True,
        name=f"mlse-job:{target}",
    )
    child.start()
    outcome, stop_seen = None, None
    try:
        while outcome is None:
            if stop.is_set() and stop_seen is None:
                child_stop.set()
                stop_seen = time.monotonic()
            try:
                kind, payload = messages.get(timeout=_POLL_S)
            except queue_module.Empty:
                if not child.is_alive():
                    outcome = _drain(messages) or ("died", child.exitcode)
                elif stop_seen is not None and time.monotonic() - stop_seen > STOP_GRACE_S:
                    log.warning("job %s ignored Stop for %.0f s; terminating it", target, STOP_GRACE_S)
                    child.terminate()
                    outcome = ("stopped", f"stopped (the job did not end within {STOP_GRACE_S:.0f} s and was ended)")
                continue
            if kind == "record":
                report(payload)
            else:
                outcome = (kind, payload)
    finally:
        child.join(timeout=STOP_GRACE_S)
        if child.is_alive():
            child.kill()
            child.join()
        messages.close()
    return _result(outcome, target)


def _drain(messages) -> tuple | None:
    """The outcome a child put on the queue just before it exited (the queue's feeder may deliver it late)."""
    try:
        while True:
            kind, payload = messages.get(timeout=1.0)
            if kind != "record":
                return kind, payload
    except queue_module.Empty:
        return None


def _result(outcome: tuple, target: str):
    kind, payload = outcome
    if kind == "result":
        return payload
    errors = {"stopped": Stopped, "user-error": MlseError, "error": RuntimeError}
    if kind in errors:
        raise errors[kind](payload)
    raise MlseError(
        f"the training process ended without an answer (exit code {payload}); if it ran out of memory, "
        "try fewer pairs or a smaller batch"
    )


def _child_main(
    target: str, args: tuple, messages, stop_event, parent_pid: int, lock: LockRequest | None = None
) -> None:
    """In the child: import and call the target, sending its records and then exactly one outcome. ``stop_event``
    (shared with the parent) is the Stop button of the signal the target gets."""
    stop = StopSignal(stop_event)
    _end_with_parent(stop, parent_pid)
    held = None
    try:
        held = hold(lock) if lock is not None else None  # before the imports: the lock covers the whole job
        module, _, name = target.partition(":")
        function = getattr(importlib.import_module(module), name)
        result = function(*args, report=lambda record: messages.put(("record", record)), stop=stop)
        messages.put(("result", result))
    except Stopped as exc:
        messages.put(("stopped", str(exc)))
    except MlseError as exc:
        messages.put(("user-error", str(exc)))
    except BaseException as exc:  # noqa: BLE001 -- reported to the parent, whose job then fails with it
        messages.put(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        parent_alive = _parent_alive(parent_pid)
        messages.close()
        if parent_alive:
            messages.join_thread()  # deliver everything before the process exits
        else:
            messages.cancel_join_thread()  # nobody reads the queue any more: do not wait to flush it
        # a child told to end has not answered, even while a killed app's last threads make the parent look alive
        if held is not None:
            held.release(remove=parent_alive and not _winding_down.is_set())  # left behind: the job died unanswered


def _end_with_parent(stop: StopSignal, parent_pid: int) -> None:
    """Make this child end when its parent dies (see the module docstring): the kernel's signal where there is one,
    a SIGTERM handler, and a watchdog thread."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
                log.warning(
                    "prctl(PR_SET_PDEATHSIG) failed (errno %d); the watchdog alone ends this job", ctypes.get_errno()
                )
        except (OSError, AttributeError):
            log.warning("prctl is not available; the watchdog alone ends this job with its app")
    if threading.current_thread() is threading.main_thread():  # a spawned child's target runs there; only it may
        signal.signal(signal.SIGTERM, lambda signum, frame: _wind_down(stop, "SIGTERM"))
    watchdog = threading.Thread(target=_watch_parent, args=(stop, parent_pid), daemon=True, name="mlse-parent-watch")
    watchdog.start()


def _watch_parent(stop: StopSignal, parent_pid: int) -> None:
    """The watchdog thread: poll the parent (it may have died before the kernel was asked to tell us)."""
    while _parent_alive(parent_pid):
        time.sleep(PARENT_POLL_S)
    _wind_down(stop, "its app ended")


def _parent_alive(parent_pid: int) -> bool:
    """Whether the process that started this child still runs: still our parent (an orphan is re-parented), and its
    end of the spawn pipe still open (works where process ids say nothing, e.g. Windows)."""
    if os.getppid() != parent_pid:
        return False
    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


def _wind_down(stop: StopSignal, why: str) -> None:
    """Stop the job (it ends at its next check, keeping its best checkpoint) and exit hard if it has not ended after
    :data:`EXIT_GRACE_S` seconds; the first call counts."""
    if _winding_down.is_set():
        return
    _winding_down.set()
    log.warning("training job ending: %s", why)
    stop.set()
    timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(ORPHAN_EXIT_CODE,))
    timer.daemon = True
    timer.start()
