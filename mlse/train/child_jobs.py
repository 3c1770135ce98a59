"""Run a job in a child process, so that the memory it used goes back to the operating system when it ends.

Why: a training job loads models, optimiser state, datasets and embedding matrices; freed in the app's own process,
most of that stays in the allocator's arenas, and three small fine-tunes grew the app by a gigabyte. A ``spawn``
child (a fresh interpreter, no copy of the app's loaded models) returns every page when it exits.

The boundary is kept narrow. The job is named by an importable ``"module:function"`` called as
``function(*args, report=..., stop=...)``, the same contract as a :class:`mlse.train.runner.JobRunner` job. Progress
records and the outcome travel over a queue; the Stop button is a shared event the child's stop checks read, so Stop
keeps working. Outcomes come back as in-process: a return value, :class:`~mlse.runs.stop_signal.Stopped`, an
:class:`~mlse.errors.MlseError` (the message only), or any other exception as a ``RuntimeError`` naming it. A child
that dies without an answer (killed, out of memory) is an ``MlseError`` with its exit code; one that ignores Stop for
:data:`STOP_GRACE_S` seconds is terminated.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import queue as queue_module
import threading
import time
from collections.abc import Callable

from mlse.errors import MlseError
from mlse.runs.stop_signal import Stopped

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0  # after Stop, how long a child may take to end on its own before it is terminated
_POLL_S = 0.1


def run_in_child(target: str, *args, report: Callable[[dict], None], stop: threading.Event):
    """Call ``target`` (``"module:function"``) with ``args`` in a spawned child; returns what it returns."""
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    child_stop = context.Event()
    child = context.Process(
        target=_child_main, args=(target, args, messages, child_stop), daemon=True, name=f"mlse-job:{target}"
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
    if kind == "stopped":
        raise Stopped(payload)
    if kind == "user-error":
        raise MlseError(payload)
    if kind == "error":
        raise RuntimeError(payload)
    raise MlseError(
        f"the training process ended without an answer (exit code {payload}); if it ran out of memory, "
        "try fewer pairs or a smaller batch"
    )


def _child_main(target: str, args: tuple, messages, stop) -> None:
    """In the child: import and call the target, sending its records and then exactly one outcome."""
    try:
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
        messages.close()
        messages.join_thread()  # deliver everything before the process exits
