"""The app's training jobs: a :class:`~mlse.train.request.TrainRequest` becomes a job for the
:class:`~mlse.train.runner.JobRunner`.

The request was validated when made; a job trusts it and runs it via :func:`mlse.train.request.request_config`.
Outputs go to ``runs_dir()/NAME``. **The budget counts training, not preparation** (loading, the one-off encoding),
with its own limit (:func:`preparation_limit_s`), so a small budget is not spent encoding. See docs/app/finetune.md.

A stop before training has anything to show saves nothing; a later stop saves the best checkpoint, marked partial. A
run that fails or is stopped early puts back the run folder it was replacing. The app trains in a spawned child
(:mod:`mlse.train.child_jobs`) so that memory returns to the system; a live orphan child refuses new child jobs, so two
runs never train at once.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from mlse.data.json_safe import finite_or_none
from mlse.errors import MlseError
from mlse.public_mode import PUBLIC_PREPARATION_MINUTES, public_mode
from mlse.runs.folders import is_model_folder, is_scorer_folder
from mlse.runs.health import recover_runs, sweep_interrupted
from mlse.runs.job_lock import live_orphans, lock_request
from mlse.stop_signal import Stopped, StopSignal
from mlse.train.child_jobs import run_in_child
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import run_finetune
from mlse.train.head_training import train_heads
from mlse.train.request import TrainRequest, request_config
from mlse.train.runner import JobFn, Report

log = logging.getLogger(__name__)

# How long a job may prepare before its budget starts: PREPARATION_BUDGETS budgets, at least PREPARATION_MIN_S.
PREPARATION_BUDGETS = 10
PREPARATION_MIN_S = 300.0


def training_job(req: TrainRequest, *, child_process: bool = False, started: float | None = None) -> JobFn:
    """A job function for :meth:`JobRunner.submit`; it trusts ``req`` (validated when it was made, never again).

    ``child_process``: train in a spawned child, but not under ZeroGPU (``spaces``), whose GPU is attached to the
    calling process. ``started``: when the clock started (a child continues its parent's); default: job start.
    """
    if child_process and importlib.util.find_spec("spaces") is None:
        refuse_while_orphans_run(req.out.parent)
        return _child_training_job(req)

    def job(report: Report, signal: StopSignal):
        out, budget, limit = req.out, float(req.budget_minutes), preparation_limit_s(req.budget_minutes)
        signal.limit(
            budget * 60,
            started=started,  # the preparation's clock starts with the job; the budget's, with training
            preparation_s=limit,
            on_encoding=lambda done, total, rate, cached: report(encoding_record(done, total, rate, budget, cached)),
            on_budget_start=lambda seconds: report(training_record(seconds, budget)),
        )
        config = request_config(req, out)  # the command line's reading of the same options
        aside = None
        if out.exists():  # renamed to a hidden sibling (the registry skips dot-folders) while it is replaced
            aside = out.with_name(f".{out.name}.replaced-{int(time.time() * 1000)}")
            out.rename(aside)
        try:
            wait = f"up to {limit / 60:.3g} min; the {budget:g}-minute budget starts when training does"
            report(_phase(f"preparing: loading data and models ({wait})"))
            train = _run_finetune if isinstance(config, FinetuneConfig) else _run_heads
            result = _maybe_on_gpu(train, limit + budget * 60)(config, req, report, signal)
        except Stopped as exc:  # stopped before anything worth keeping: leave no half-made run behind
            if out.exists() and not _has_model(out):
                shutil.rmtree(out, ignore_errors=True)
            hint = "; encoded texts are cached, so a rerun continues from there" if "encoding" in str(exc) else ""
            raise Stopped(f"{exc}: nothing was saved{hint}") from None
        finally:
            _restore(aside, out)  # keeps the new run when it saved a model, else puts the old one back
        return result

    return job


def preparation_limit_s(budget_minutes: float) -> float:
    """Seconds a job may spend preparing (loading, the one-off encoding) before training starts: ten budgets, at least
    5 minutes; on a public deployment at most :data:`~mlse.public_mode.PUBLIC_PREPARATION_MINUTES`."""
    limit = max(PREPARATION_MIN_S, PREPARATION_BUDGETS * float(budget_minutes) * 60)
    return min(limit, PUBLIC_PREPARATION_MINUTES * 60) if public_mode() else limit


def encoding_record(done: int, total: int, rate: float | None, budget_minutes: float, cached: int = 0) -> dict:
    """The progress record of the preparation's encoding: n of N texts (``cached`` of them from the embedding cache),
    texts encoded per second."""
    speed = "" if rate is None else f", {rate:,.0f} texts/s"
    from_cache = f" ({cached:,} cached)" if cached else ""
    return {
        "event": "encoding",
        "done": done,
        "total": total,
        "cached": cached,
        "rate": rate,
        "message": f"preparing: encoding {done:,} of {total:,} texts{from_cache}{speed} (before the "
        f"{budget_minutes:g}-minute budget starts; encoded texts are cached)",
    }


def training_record(prepare_s: float, budget_minutes: float) -> dict:
    """The progress record of the moment the budget's clock starts."""
    return {
        "event": "training",
        "prepare_s": round(prepare_s, 2),
        "message": f"training: the {budget_minutes:g}-minute budget starts now (preparing took "
        f"{prepare_s / 60:.1f} min)",
    }


def refuse_while_orphans_run(root: Path) -> None:
    """MlseError while a training child left by an earlier start of the app still runs (it holds its job lock).

    The message names the run, never a server path. Stale locks are swept first, so a just-ended child is not live."""
    sweep_interrupted(root)
    orphans = live_orphans(root)
    if orphans:
        names = ", ".join(sorted(info["run"] or "unnamed" for info in orphans))
        raise MlseError(
            f"a training run left by an earlier start of the app ({names}) is still running; it will end by itself "
            "within seconds, keeping its best checkpoint (marked interrupted). Try again then"
        )


def _child_training_job(req: TrainRequest) -> JobFn:
    def job(report: Report, signal: StopSignal):
        out = req.out
        started = time.monotonic()  # StopSignal's clock: system-wide, so the child keeps counting from here
        refuse_while_orphans_run(out.parent)  # again: a queued job starts later
        lock = lock_request(out.parent, out.name)
        try:
            return run_in_child(
                "mlse.train.jobs:train_in_this_process", req, started, report=report, stop=signal, lock=lock
            )
        finally:
            # a child that died without answering left its lock: mark its run interrupted (or remove a half-made one)
            sweep_interrupted(out.parent, "the training process ended without an answer")
            recover_runs(out.parent)  # and a run it was replacing goes back now, not at next start

    return job


def train_in_this_process(req: TrainRequest, started: float, *, report: Report, stop: StopSignal) -> dict:
    """The child's side of :func:`training_job` with ``child_process=True`` (an importable, picklable entry): the
    request as the parent validated it; ``stop`` relays the parent's Stop button; the budget counts from ``started``."""
    return training_job(req, started=started)(report, stop)


def _run_finetune(config: FinetuneConfig, req: TrainRequest, report: Report, signal: StopSignal) -> dict:
    """mse / ema / soft / hard / sts through :func:`mlse.train.finetune.finetune` (a stop in training keeps the best
    checkpoint)."""

    def on_eval(record: dict) -> None:
        report(
            {
                "event": "eval",
                "x": record["step"],
                "minutes": record["elapsed_s"] / 60,
                "loss": record["loss"],
                "sts_loss": finite_or_none(record.get("sts_loss")),  # the STS term's own loss (None without one)
                "dev": record["dev_spearman"],
                "best": record["best_dev_spearman"],
                "saved": record.get("saved"),
                "message": f"training: step {record['step']}, dev Spearman "
                f"{_fmt(record['dev_spearman'])} (best {_fmt(record['best_dev_spearman'])})",
            }
        )

    metrics = run_finetune(config, progress=on_eval, signal=signal)  # validated with the request
    best = f"best dev Spearman {_fmt(metrics['best_dev_spearman'])} at step {metrics['best_step']}"
    report(_phase(f"done: {metrics['stop_reason']} after {metrics['steps']} steps, {best}"))
    return {"run": f"runs/{Path(config.out).name}", "metrics": metrics}


def _run_heads(settings, req: TrainRequest, report: Report, signal: StopSignal) -> dict:
    """Stage 1 / Stage 2 heads; the budget and the stop button end them in any phase (see the module docstring)."""

    def on_epoch(record: dict) -> None:
        dev = record.get("dev_pearson")
        report(
            {
                "event": "eval",
                "x": record["epoch"],
                "minutes": signal.elapsed() / 60,
                "loss": record.get("train_loss"),
                "dev": None if dev is None else 100 * dev,
                "dev_loss": record.get("dev_loss"),
                "message": f"training: epoch {record['epoch']}",
            }
        )

    scorer = train_heads(settings, progress=on_epoch, stop=signal)
    metrics = scorer.metadata.get("metrics", {})
    if not signal.is_set() and metrics.get(f"{req.method}_stopped"):
        report(_phase(f"the {req.budget_minutes:g}-minute budget ran out; the best epoch so far is saved"))
    numbers = ", ".join(f"{k} {_fmt(v)}" for k, v in metrics.items() if isinstance(v, (int, float)))
    report(_phase(f"done: {numbers}"))
    return {"run": f"runs/{Path(settings.out).name}", "metrics": metrics}


def _phase(message: str) -> dict:
    """A progress record that says which phase the job is in (the UI shows its message)."""
    return {"event": "phase", "message": message}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _maybe_on_gpu(fn: Callable, seconds: float) -> Callable:
    """``spaces.GPU(fn, duration=...)`` when the ``spaces`` package is importable (ZeroGPU Spaces: it attaches a GPU for
    the call there; not a dependency of this project), else ``fn``.

    The duration covers ``seconds`` (preparation limit plus budget) and 10 minutes for the final evaluation and saving.
    """
    if importlib.util.find_spec("spaces") is None:
        return fn
    try:
        import spaces  # lazy: only on ZeroGPU Spaces
    except Exception:  # an unusable spaces package must not stop CPU training
        log.warning("the 'spaces' package is installed but does not import; training without spaces.GPU")
        return fn
    return spaces.GPU(fn, duration=int(seconds) + 600)


def _restore(aside: Path | None, out: Path) -> None:
    """A run that failed or saved nothing gives the replaced run folder back."""
    if aside is None:
        return
    if out.exists() and _has_model(out):
        shutil.rmtree(aside, ignore_errors=True)
        return
    shutil.rmtree(out, ignore_errors=True)
    aside.rename(out)


def _has_model(folder: Path) -> bool:
    return is_scorer_folder(folder) or is_model_folder(folder / "model")
