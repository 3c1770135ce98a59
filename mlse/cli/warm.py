"""``python -m mlse warm``: compute into the cache what each tab of the app shows first, for its default models.

The steps are the app's own (:mod:`mlse.serving.warm_plan`), one line each. A second run computes nothing; one stopped
with Ctrl-C (exit 130) resumes next time. ``--check`` lists what is missing (exit 1 when something is).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from mlse.cli.args import csv_list
from mlse.dirs import cache_root
from mlse.encoders.identity import BACKENDS, DEFAULT_BACKEND
from mlse.errors import MlseError
from mlse.stop_signal import StopSignal

INTERRUPTED_EXIT = 130
LIVE_EVERY_S = 0.5  # a running step's live line (on a terminal) is redrawn at most this often
LOG_EVERY_S = 30.0  # elsewhere (a log file, a docker build) a running step prints a line this often


def add_warm_parser(sub) -> None:
    """Register ``warm`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    wa = sub.add_parser(
        "warm",
        help="compute what each tab of the app shows first into the cache (idempotent)",
        description="Compute what each tab's first view needs for the default models (model files, "
        "example embeddings, the default STS pair, Tatoeba language and map) into the "
        "cache. A second run computes nothing; a stopped run resumes.",
    )
    wa.add_argument(
        "--backend",
        choices=BACKENDS,
        default=os.environ.get("MLSE_BACKEND", DEFAULT_BACKEND),
        help="runtime the app will use: torch, onnx or onnx-int8 (default: MLSE_BACKEND, else torch)",
    )
    wa.add_argument(
        "--models",
        type=csv_list,
        default=None,
        help="comma-separated models (default: those the Score tab ticks, and the one each other tab "
        "opens on; given, the first stands for the Map, Tatoeba and Gold tabs)",
    )
    wa.add_argument("--data-dir", default=None, help="datasets folder (else $MLSE_DATA, else ../shared/data)")
    wa.add_argument("--check", action="store_true", help="list what is warm and what is missing; compute nothing")


def cmd_warm(args: argparse.Namespace) -> int:
    from mlse.serving.app_state import AppState  # the app's model list and default selection (no gradio)
    from mlse.serving.warm import check_steps, run_warm, step_line
    from mlse.serving.warm_plan import tab_openings, warm_plan

    if not args.verbose:  # one line per chunk encoded would drown the step lines
        logging.getLogger("mlse.encoders.cache").setLevel(logging.WARNING)
    state = AppState(backend=args.backend, data_dir=args.data_dir)
    steps = warm_plan(state, models=args.models, openings=tab_openings(state), scope="disk")
    print(
        f"warm: {len(steps)} steps on {args.backend}; cache {cache_root()}; data {_data_dir(args.data_dir)}", flush=True
    )
    if args.check:
        return _check(check_steps(steps))
    stop = StopSignal()  # Ctrl-C sets it: the warm ends after the current chunk
    live = _Live() if sys.stderr.isatty() else _Periodic()  # a log (docker build) gets a line every half minute

    def on_step(status, fraction: float) -> None:
        live.clear()
        print(step_line(status, fraction), flush=True)

    previous = _catch_sigint(stop)
    try:
        report = run_warm(steps, on_step=on_step, on_progress=live.show, stop=stop)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    failed = [s for s in report.steps if s.state == "failed"]
    if report.stopped:
        left = sum(not s.finished for s in report.steps)
        print(
            f"stopped after {report.seconds:.0f} s: {left} step(s) left; run it again to go on from here",
            file=sys.stderr,
            flush=True,
        )
        return INTERRUPTED_EXIT
    if report.all_warm:
        print(f"everything is already warm ({len(steps)} steps, {report.count('skipped')} skipped): nothing computed")
        return 0
    print(
        f"warm in {report.seconds:.0f} s: {report.count('computed')} computed, {report.count('warm')} already warm, "
        f"{report.count('skipped')} skipped, {len(failed)} failed"
    )
    if failed:
        raise MlseError(f"{len(failed)} warm step(s) failed: " + "; ".join(f"{s.label} ({s.note})" for s in failed))
    return 0


def _check(statuses) -> int:
    labels = {"warm": "warm", "skipped": "skipped", "waiting": "missing"}
    for status in statuses:
        note = f": {status.note}" if status.note else ""
        print(f"{labels[status.state]:8} {status.label}{note}")
    missing = sum(s.state == "waiting" for s in statuses)
    if missing:
        print(f"{missing} of {len(statuses)} steps missing: python -m mlse warm computes them")
        return 1
    print(f"everything is warm ({len(statuses)} steps)")
    return 0


def _data_dir(data_dir) -> str:
    from mlse.data.paths import resolve_data_dir

    try:
        return str(resolve_data_dir(data_dir))
    except MlseError:
        return "(none found: the data steps are skipped)"


def _catch_sigint(stop: StopSignal):
    """First Ctrl-C: stop after the current chunk (what is done stays cached); second: KeyboardInterrupt at once."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_sigint(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after the current chunk (Ctrl-C again to quit at once) ...", file=sys.stderr, flush=True)

    return signal.signal(signal.SIGINT, on_sigint)


def _running(status, fraction: float) -> str:
    text = f"[{fraction * 100:3.0f} %] {status.label}: {status.fraction * 100:.0f} % after {status.seconds:.0f} s"
    return text + (f" ({status.note})" if status.note else "")


class _Live:
    """A running step's progress on a terminal, redrawn in place on stderr."""

    def __init__(self):
        self._shown = 0.0
        self._width = 0

    def show(self, status, fraction: float) -> None:
        now = time.monotonic()
        if now - self._shown < LIVE_EVERY_S:
            return
        self._shown = now
        text = _running(status, fraction)
        self._width = max(self._width, len(text))
        print(f"\r{text:{self._width}}", end="", file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self._width:
            print(f"\r{'':{self._width}}\r", end="", file=sys.stderr, flush=True)
            self._width = 0


class _Periodic:
    """A running step's progress where stderr is no terminal: one line every :data:`LOG_EVERY_S` seconds."""

    def __init__(self, every_s: float = LOG_EVERY_S):
        self._every_s = every_s
        self._since: dict[str, float] = {}

    def show(self, status, fraction: float) -> None:
        now = time.monotonic()
        if now - self._since.setdefault(status.name, now) >= self._every_s:
            self._since[status.name] = now
            print(_running(status, fraction), flush=True)

    def clear(self) -> None:
        pass
