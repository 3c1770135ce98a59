"""The training loop of a fine-tuning run, which knows no method: batches, the learning-rate schedule, the budget and
the reasons to stop, the evaluation cadence, checkpoints and the log.

What a method does with a batch comes in through a :class:`mlse.train.methods.Method` (``batch_loss(idx)``,
``after_step``, what it adds to the records); the dev score and the checkpoint come in as callbacks.

**Budget.** ``budget_minutes`` covers training *and* the dev evaluations in it, on :func:`effective_clock`. The total
step count ``K`` (for the warm-up over ``warmup_fraction`` of it, and the EMA schedule) is re-estimated after every step
as ``steps done + remaining budget / seconds per training step``, capped by ``max_steps``; evaluation time is spent but
not counted per step, so ``K`` overestimates slightly while evaluations remain. Before the first step is timed, ``K``
is ``max_steps`` or :data:`PROVISIONAL_STEPS` (the first step runs at a tiny learning rate). After the warm-up the
learning rate stays constant: a budgeted run can stop at any moment, so there is no known end to decay to.

**Stopping** is asked before every step. With several processes only rank 0 evaluates, saves and logs; the others wait
at the next gradient all-reduce. **Weight averaging** (``average_from``): from the step that reaches that fraction of
``K`` the trainable weights are averaged uniformly (:mod:`mlse.train.weight_average`); evaluations score and
checkpoints save the average while training goes on from the current weights, and only averages compete for the
checkpoint, so an averaged run always ends on an averaged model.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np

from mlse.data.json_safe import finite_or_none
from mlse.runs.folders import LOG_FILE
from mlse.stop_signal import Stopped, StopSignal
from mlse.train.config import FinetuneConfig
from mlse.train.device import needs_grad_scaler
from mlse.train.distributed import DistContext, agree, average_gradients
from mlse.train.methods import Method
from mlse.train.weight_average import WeightAverage

BUCKET_BATCHES = 50  # batches per length-sorted chunk (bucket_by_length)
PROVISIONAL_STEPS = 10_000  # K before the first step has been timed


def effective_clock(kind: str, device: str) -> str:
    """The clock a run on ``device`` counts its budget on: ``"cpu"`` only where the CPU does the work. On a GPU the
    process's CPU seconds leave out the device's time, so the wall clock stands in."""
    return "wall" if kind == "cpu" and device.split(":")[0] != "cpu" else kind


def budget_clock(kind: str) -> Callable[[], float]:
    """The budget's clock: ``"wall"`` seconds, or ``"cpu"``: seconds of CPU time of this process divided by torch's
    thread count (on a shared machine it slows down with the share of the cores the process gets)."""
    if kind == "wall":
        return time.perf_counter
    import torch  # lazy: torch takes seconds to import, and the command line imports this module to start a run

    threads = max(1, torch.get_num_threads())
    return lambda: time.process_time() / threads


def epoch_batches(
    n: int,
    batch_size: int,
    rng: np.random.Generator,
    lengths: np.ndarray | None = None,
    chunk_batches: int = BUCKET_BATCHES,
) -> list[np.ndarray]:
    """One epoch of batches over ``range(n)``: every index exactly once, a short last batch kept.

    With ``lengths`` (length bucketing) each chunk of ``chunk_batches`` batches is sorted by length before it is cut,
    and the batch order is shuffled: batches pad to similar lengths while which sentences meet stays random.
    """
    order = rng.permutation(n)
    if lengths is not None:
        chunks = np.array_split(order, max(1, math.ceil(n / (batch_size * chunk_batches))))
        order = np.concatenate([c[np.argsort(lengths[c], kind="stable")] for c in chunks])
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if lengths is not None:
        batches = [batches[j] for j in rng.permutation(len(batches))]
    return batches


class TrainingLoop:
    """One run's loop over ``n`` training examples (``lengths``: their lengths, for bucketing; None: no bucketing).

    ``evaluate(signal)`` returns the dev score per dev set, asking ``signal`` as it goes (it may raise
    :class:`~mlse.stop_signal.Stopped`); ``save()`` writes a checkpoint, called whenever the mean dev score improves.
    Each evaluation appends one record to ``out/log.jsonl`` and hands it to ``progress``.
    """

    def __init__(
        self,
        cfg: FinetuneConfig,
        model,
        method: Method,
        n: int,
        lengths: np.ndarray | None,
        *,
        evaluate: Callable[[StopSignal | None], dict[str, float]],
        save: Callable[[], None],
        device: str,
        progress: Callable[[dict], None] | None = None,
        signal: StopSignal | None = None,
        ctx: DistContext | None = None,
        precision: str = "fp32",
    ):
        import torch  # lazy: as in budget_clock

        self.cfg, self.model, self.method, self.n, self.lengths = cfg, model, method, n, lengths
        self.evaluate_dev, self.save, self.device = evaluate, save, device
        self.ctx = ctx or DistContext()
        self.progress, self.signal = progress, signal
        self.out = Path(cfg.out)
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        # float16: the loss is scaled so that small gradients survive
        self.scaler = torch.amp.GradScaler(device.split(":")[0]) if needs_grad_scaler(precision) else None
        self.clock_kind = effective_clock(cfg.budget_clock, device)
        self.clock = budget_clock(self.clock_kind)
        self.rng = np.random.default_rng([cfg.seed, self.ctx.rank] if self.ctx.active else cfg.seed)
        self.queue: list[np.ndarray] = []
        self.step = 0
        self.pairs_seen = 0
        self.sentences = 0  # sentences run through the student in training
        self.train_s = 0.0
        self.eval_s = 0.0
        self.losses: list[float] = []
        self.best = -math.inf
        self.best_step: int | None = None
        self.last_dev: dict[str, float] = {}
        self.last_eval_step: int | None = None
        self.total_steps = cfg.max_steps or PROVISIONAL_STEPS
        self.average = WeightAverage(model) if cfg.average_from is not None else None
        self.average_from_step: int | None = None  # the step the average starts at, once reached
        self.started = 0.0
        self.wall_started = 0.0

    # -- batches and schedules ---------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.started

    def estimate_total_steps(self) -> int:
        """K = steps done + remaining budget / seconds per training step (capped at max_steps)."""
        if self.step == 0 or self.train_s <= 0:
            return self.total_steps
        remaining = max(0.0, self.cfg.budget_minutes * 60 - self.elapsed())
        k = self.step + int(remaining / (self.train_s / self.step))
        return max(self.step, min(k, self.cfg.max_steps or k))

    def lr_at(self, step: int) -> float:
        """Linear warm-up over the first ``warmup_fraction`` of the estimated steps, then constant."""
        warmup = max(1, math.ceil(self.cfg.warmup_fraction * self.total_steps))
        return self.cfg.lr * min(1.0, (step + 1) / warmup)

    # -- one step ----------------------------------------------------------------------------------------------------
    def train_step(self) -> None:
        import torch  # lazy: as in budget_clock

        t0 = self.clock()
        if not self.queue:  # a fresh seeded epoch of batches (epoch_batches) when the last is used
            self.queue = epoch_batches(self.n, self.cfg.batch_size, self.rng, self.lengths)[::-1]
        idx = self.queue.pop()  # indices of the next batch
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(self.step)
        loss = self.method.batch_loss(idx)
        self.optimizer.zero_grad(set_to_none=True)
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        average_gradients(self.model, self.ctx)  # no-op in a single process
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        if self.scaler is None:
            self.optimizer.step()
        else:  # skips the step when a gradient overflowed, and adapts the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.method.after_step(self.step, self.total_steps)
        self.step += 1
        # K is re-estimated every step, so the average's start is fixed the first time the step reaches it
        if self.average is not None:
            if self.average_from_step is None and self.step >= self.cfg.average_from * self.total_steps:
                self.average_from_step = self.step
            if self.average_from_step is not None:
                self.average.update()
        self.pairs_seen += len(idx) * self.ctx.world  # every rank trains on its own batch
        self.sentences += len(idx) * self.method.sentences_per_pair * self.ctx.world
        self.losses.append(float(loss.detach()))
        self.train_s += self.clock() - t0
        self.total_steps = self.estimate_total_steps()

    # -- evaluation, checkpoint, log ---------------------------------------------------------------------------------
    def evaluate(self) -> dict:
        """Score on dev, save when the mean score improves, log and report one progress record (rank 0 only).
        Once weights are being averaged, the average is what is scored and saved, and only averages compete."""
        if not self.ctx.is_main:
            self.last_eval_step = self.step
            return {}
        with self.averaged():
            return self._evaluate()

    def averaged(self) -> AbstractContextManager:
        """The weights to score or save in the model for a ``with`` block: the average once weights are being averaged
        (the trained ones back after the block), else the model as it is."""
        return self.average.swapped_in() if self.average is not None else nullcontext()

    def _evaluate(self) -> dict:
        t0 = self.clock()
        try:
            self.last_dev = self.evaluate_dev(self.signal)
        except Stopped:  # abandoned half-way: the checkpoint on disk stays the best so far
            self.eval_s += self.clock() - t0
            return {}
        mean = float(np.mean(list(self.last_dev.values())))
        if None not in (self.average_from_step, self.best_step) and self.best_step < self.average_from_step:
            # an averaged run stands for its average: a plain-weights dev peak from before averaging no longer counts
            self.best = -math.inf
        saved = math.isfinite(mean) and mean > self.best
        if saved:
            self.best, self.best_step = mean, self.step
            self.save()
        self.eval_s += self.clock() - t0
        self.last_eval_step = self.step
        record = {
            "step": self.step,
            "epoch": round(self.pairs_seen / self.n, 4),
            "loss": finite_or_none(float(np.mean(self.losses))) if self.losses else None,
            "elapsed_s": round(self.elapsed(), 2),
            "wall_s": round(time.perf_counter() - self.wall_started, 2),
            "dev_spearman": finite_or_none(mean),
            "best_dev_spearman": finite_or_none(self.best),
            "dev": {k: finite_or_none(v) for k, v in self.last_dev.items()},
            "lr": self.lr_at(max(self.step - 1, 0)),
            "estimated_total_steps": self.total_steps,
            "sentences_per_s": round(self.sentences / self.train_s, 2) if self.train_s else None,
            "saved": saved,
            **({"averaged_steps": self.average.count} if self.average is not None else {}),
            **self.method.record(),
        }
        self.losses = []
        with open(self.out / LOG_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.progress is not None:
            self.progress(record)
        return record

    def stop_reason(self) -> str | None:
        """Why to stop now (None: go on); with several processes rank 0 decides for all (it owns the clock)."""
        reason = self.signal.reason() if self.signal is not None else None  # the stop button, or the job's budget
        if reason is None and self.cfg.max_steps is not None and self.step >= self.cfg.max_steps:
            reason = "max_steps"
        if reason is None and self.elapsed() >= self.cfg.budget_minutes * 60:
            reason = "budget"
        if self.ctx.active:
            reasons = [None, "stopped", "max_steps", "budget"]
            reason = reasons[agree(self.ctx, reasons.index(reason), self.device)]
        return reason

    def run(self) -> str:
        """Train until a stop reason; evaluate every ``eval_every_steps`` (and at step 0 when asked)."""
        self.started, self.wall_started = self.clock(), time.perf_counter()
        if self.cfg.eval_at_start:
            self.evaluate()
        while (reason := self.stop_reason()) is None:
            self.train_step()
            if self.step % self.cfg.eval_every_steps == 0:
                self.evaluate()
        return reason

    def metrics(self, reason: str) -> dict:
        """The loop's part of ``metrics.json``: why it stopped, the dev scores, steps, speed and time."""
        mean = float(np.mean(list(self.last_dev.values()))) if self.last_dev else math.nan
        return {
            "stop_reason": reason,
            "final_dev_spearman": finite_or_none(mean),
            "final_dev": {k: finite_or_none(v) for k, v in self.last_dev.items()},
            "final_dev_step": self.last_eval_step,
            "best_dev_spearman": finite_or_none(self.best),
            "best_step": self.best_step,
            "steps": self.step,
            "epochs": round(self.pairs_seen / self.n, 4),
            "pairs_seen": self.pairs_seen,
            "sentences_per_s": round(self.sentences / self.train_s, 2) if self.train_s else None,
            "pairs_per_s": round(self.pairs_seen / self.train_s, 2) if self.train_s else None,
            "train_s": round(self.train_s, 2),
            "eval_s": round(self.eval_s, 2),
            "elapsed_s": round(self.elapsed(), 2),
            "wall_s": round(time.perf_counter() - self.wall_started, 2),
            "budget_clock": self.clock_kind,
            "estimated_total_steps": self.total_steps,
            **(
                {"weight_average": {"from_step": self.average_from_step, "steps": self.average.count}}
                if self.average is not None
                else {}
            ),
            **({"grad_scale": float(self.scaler.get_scale())} if self.scaler is not None else {}),
        }
