"""Warm start: compute what each tab's first view needs before anyone asks, so that first view comes in seconds.

``python -m mlse warm`` (:mod:`mlse.cli.warm`) runs the cached steps; the app runs them all in a background thread
(:func:`start_app_warm`) and tabs still waiting say "preparing (n %)" (from :func:`warm_status`). See docs/deploy.md.
:func:`run_warm`: a step whose input is missing is skipped with the reason, one whose output is there is left alone
(a second warm computes nothing), one failing does not stop the others. Outputs are written atomically (embedding
rows in transactions, files renamed into place), so a stopped warm resumes where it stopped.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mlse.errors import MlseError
from mlse.foreground import background, wait_for_foreground
from mlse.serving import gc_freeze
from mlse.serving.procmem import release_free_memory
from mlse.serving.warm_steps import TAB_DEFAULTS, TabDefaults, WarmStep
from mlse.stop_signal import Stopped, StopSignal

log = logging.getLogger(__name__)

FINAL = ("warm", "computed", "skipped", "failed")  # a step in one of these states needs nothing more from the warm
FETCH_POLL_S = 1.0
FOLLOW_POLL_S = 0.2  # follow_step: how often a visitor's wait reads the warm's status


@dataclass(frozen=True)
class StepStatus:
    """One step as the app and the command show it. ``state``: waiting, running, warm (found done), computed,
    skipped, failed or stopped; ``note``: why it was skipped or failed."""

    name: str
    label: str
    tabs: tuple[str, ...]
    weight: float
    state: str = "waiting"
    fraction: float = 0.0  # of this step, while it runs
    seconds: float = 0.0
    note: str = ""
    request: tuple = ()  # the step's WarmStep.request (the map: sentences, method, seed)

    @property
    def finished(self) -> bool:
        return self.state in FINAL


@dataclass(frozen=True)
class WarmStatus:
    """A snapshot of the warm: whether one is under way, and each step's state."""

    active: bool = False
    planning: bool = False  # started, the steps not listed yet
    steps: tuple[StepStatus, ...] = ()

    @property
    def fraction(self) -> float:
        """Share of the work done, each step weighted by its rough cost (0 while planning, 1 with no steps)."""
        return _weighted(self.steps, planning=self.planning)

    @property
    def current(self) -> StepStatus | None:
        return next((s for s in self.steps if s.state == "running"), None)

    def pending(self, tab: str) -> list[StepStatus]:
        """The steps ``tab``'s first view needs that a running warm has not finished (all of them while planning)."""
        return [s for s in self.steps if tab in s.tabs and not s.finished] if self.active else []

    def tab_fraction(self, tab: str) -> float:
        return _weighted([s for s in self.steps if tab in s.tabs], planning=self.planning)


def _weighted(steps, *, planning: bool) -> float:
    if planning:
        return 0.0
    total = sum(s.weight for s in steps)
    return 1.0 if total == 0 else sum(s.weight * (1.0 if s.finished else s.fraction) for s in steps) / total


_lock = threading.Lock()
_status = WarmStatus()


def warm_status() -> WarmStatus:
    """The current warm's snapshot (thread-safe; the dataclasses are frozen, so it never changes under the reader)."""
    with _lock:
        return _status


def _set(**changes) -> None:
    global _status
    with _lock:
        _status = replace(_status, **changes)


def _set_step(name: str, **changes) -> None:
    global _status
    with _lock:
        _status = replace(_status, steps=tuple(replace(s, **changes) if s.name == name else s for s in _status.steps))


# -- running --------------------------------------------------------------------------------------------------------
@dataclass
class WarmReport:
    """What :func:`run_warm` did: the final status of every step, and whether it was stopped."""

    steps: list[StepStatus]
    stopped: bool = False
    seconds: float = 0.0

    def count(self, state: str) -> int:
        return sum(s.state == state for s in self.steps)

    @property
    def all_warm(self) -> bool:
        """Nothing had to be computed (every step found done or skipped), nothing failed."""
        return not self.stopped and all(s.state in ("warm", "skipped") for s in self.steps)


StepLine = Callable[[StepStatus, float], None]  # (a step's status, the warm's overall fraction) -> show it


def check_steps(steps: Sequence[WarmStep]) -> list[StepStatus]:
    """Each step's state without computing anything: warm, skipped (with the reason) or waiting (missing)."""
    return [_status_of(step, *_found(step)) for step in steps]


def run_warm(
    steps: Sequence[WarmStep],
    *,
    on_step: StepLine | None = None,
    on_progress: StepLine | None = None,
    stop: StopSignal | None = None,
    before_data: Callable[[], None] | None = None,
) -> WarmReport:
    """Take the steps in order; ``on_step`` is told each one's outcome, ``on_progress`` how a running one advances.

    ``stop``: asked between steps and encoding chunks; ends the warm with ``stopped`` set (finished work stays cached).
    ``before_data``: called once before the first step that reads a dataset (the app waits for its data fetch)."""
    stop = stop or StopSignal()  # nothing stops this warm but its end
    started = time.perf_counter()
    _set(active=True, planning=False, steps=tuple(_status_of(s) for s in steps))
    stopped, waited = False, before_data is None
    try:
        for step in steps:
            if stop.should_stop():
                stopped = True
                break
            if step.data and not waited:
                before_data()
                waited = True
            if _run_step(step, stop, on_step, on_progress) == "stopped":
                stopped = True
                break
    finally:
        _set(active=False)
    return WarmReport(list(warm_status().steps), stopped, time.perf_counter() - started)


def _run_step(step: WarmStep, stop: StopSignal, on_step: StepLine | None, on_progress: StepLine | None) -> str:
    t0 = time.perf_counter()
    _set_step(step.name, state="running", fraction=0.0)
    outcome, note = _found(step)
    if outcome == "waiting":

        def progress(fraction: float, message: str = "") -> None:
            _set_step(
                step.name, fraction=min(max(float(fraction), 0.0), 0.99), seconds=time.perf_counter() - t0, note=message
            )
            if on_progress is not None:
                on_progress(_step_status(step.name), warm_status().fraction)

        outcome, note = _compute(step, progress, stop)
        release_free_memory()  # a step's encode or conversion buffers: back to the system, not kept at the peak
        gc_freeze.freeze_survivors()  # what the step keeps (models, memos) stays out of the collector's scans
    _set_step(step.name, state=outcome, note=note, seconds=time.perf_counter() - t0, fraction=0.0)
    if on_step is not None:
        on_step(_step_status(step.name), warm_status().fraction)
    return outcome


def _compute(step: WarmStep, progress, stop: StopSignal) -> tuple[str, str]:
    try:
        step.run(progress, stop)
    except Stopped as exc:
        return "stopped", str(exc)
    except MlseError as exc:  # a missing file, a model that will not load: the library's own message
        return "failed", str(exc)
    except Exception as exc:  # a bug in one step must not take the others down; its traceback goes to the log
        log.warning("warm step %s failed", step.name, exc_info=True)
        return "failed", f"{type(exc).__name__}: {str(exc)[:300]}"
    return "computed", ""


def _found(step: WarmStep) -> tuple[str, str]:
    """(state, note) before computing: skipped with why it cannot run here, warm when its output is there, else
    waiting."""
    try:
        reason = step.needs()
    except MlseError as exc:
        reason = str(exc)
    if reason:
        return "skipped", reason
    try:
        return ("warm" if step.done() else "waiting"), ""
    except MlseError:  # cannot tell (a model folder half there, say): computing it will say what is wrong
        return "waiting", ""


def _status_of(step: WarmStep, state: str = "waiting", note: str = "") -> StepStatus:
    tabs, weight, request = tuple(step.tabs), float(step.weight), tuple(step.request)
    return StepStatus(step.name, step.label, tabs, weight, state=state, note=note, request=request)


def _step_status(name: str) -> StepStatus:
    return next(s for s in warm_status().steps if s.name == name)


def follow_step(name: str, on_progress: StepLine | None = None, poll_s: float = FOLLOW_POLL_S) -> StepStatus | None:
    """Wait while the warm runs step ``name``, telling ``on_progress`` its status now and then -> its status after.

    For a visitor asking for what the warm is computing: shows the warm's own count and ETA. Returns at once when the
    step is not running."""
    while True:
        status = warm_status()
        step = next((s for s in status.steps if s.name == name), None)
        if step is None or step.state != "running" or not status.active:
            return step
        if on_progress is not None:
            on_progress(step, status.fraction)
        time.sleep(poll_s)


# -- the app --------------------------------------------------------------------------------------------------------
def wait_for_fetch(stop: StopSignal | None = None, poll_s: float = FETCH_POLL_S) -> None:
    """Return once the app's data fetch (mlse.data.fetch) has nothing running or queued, or when ``stop`` asks to."""
    from mlse.data import fetch_status

    while not (stop is not None and stop.should_stop()):
        current = fetch_status.status()
        if current.running is None and not current.waiting:
            return
        time.sleep(poll_s)


def start_app_warm(
    state,
    *,
    openings: dict[str, str | None] | None = None,
    on_step: StepLine | None = None,
    models: Sequence[str] | None = None,
    stop: StopSignal | None = None,
    only: Callable[[str], bool] | None = None,
    defaults: TabDefaults = TAB_DEFAULTS,
) -> threading.Thread:
    """Warm the app in a daemon thread: every step (those held in memory too), data steps after the data fetch.

    ``openings``: as :func:`mlse.serving.warm_plan.warm_plan`. The status says "planning" at once. ``stop.set()`` ends
    it after the current chunk; ``only`` (benchmarks) filters step names; ``defaults``: the tabs' first views."""
    from mlse.serving.warm_plan import warm_plan

    button = stop or StopSignal()
    _set(active=True, planning=True, steps=())

    def yield_then_ask() -> bool:  # between chunks: a visitor's computing goes first (mlse.foreground)
        wait_for_foreground(button)
        return button.should_stop()

    signal = StopSignal(also=yield_then_ask)  # the warm's signal: the button, asked after a visitor's computing

    def run() -> None:
        try:
            steps = warm_plan(state, models=models, openings=openings, scope="all", defaults=defaults)
            steps = [step for step in steps if only is None or only(step.name)]
        except MlseError as exc:
            log.warning("warm start not run: %s", exc)
            _set(active=False, planning=False)
            return
        with background():
            report = run_warm(
                steps, on_step=on_step or print_step, stop=signal, before_data=lambda: wait_for_fetch(button)
            )
        log.info("warm start finished in %.0f s: %d computed", report.seconds, report.count("computed"))

    thread = threading.Thread(target=run, name="mlse-warm", daemon=True)
    thread.start()
    return thread


def step_line(status: StepStatus, fraction: float) -> str:
    """``[ 45 %] me5-small: model files (torch): computed in 5.2 s`` -- one line per finished step."""
    outcome = {
        "warm": "already warm",
        "computed": f"computed in {status.seconds:.1f} s",
        "skipped": f"skipped: {status.note}",
        "failed": f"failed after {status.seconds:.1f} s: {status.note}",
        "stopped": f"stopped after {status.seconds:.1f} s",
    }.get(status.state, status.state)
    return f"[{fraction * 100:3.0f} %] {status.label}: {outcome}"


def print_step(status: StepStatus, fraction: float) -> None:
    print(f"mlse warm: {step_line(status, fraction)}", file=sys.stderr, flush=True)
