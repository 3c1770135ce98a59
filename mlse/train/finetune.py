"""Budgeted fine-tuning of a sentence-transformers student: MSE distillation, EMA teacher, soft / hard contrastive.

Methods (:mod:`mlse.train.methods`) train on filtered Tatoeba-Challenge bitext and are scored on STS Multi MT **dev**.
A run is **preparation** here (data, student, teacher targets, dev set), then **training** (:mod:`mlse.train.loop`)
under the budget. A :class:`mlse.stop_signal.StopSignal` is the one way to stop a run, asked in every phase; its
budget's clock starts when training begins. See docs/training.md.

**Output** (``out``, e.g. ``runs/NAME``, which ``load_encoder`` accepts)::

    out/model/                 the student at its best dev score (a sentence-transformers folder)
    out/adapter/               a LoRA student's adapter (mlse.train.recipes.lora)
    out/finetune_config.json   the configuration (a top-level ``config.json`` would look like a transformers model)
    out/log.jsonl              one progress record per evaluation
    out/metrics.json           final and best dev scores, steps, speed, data counts

``out/model`` is always either the previous good checkpoint or the new one. KeyboardInterrupt writes the metrics, then
propagates. A run stopped before its first step raises :class:`mlse.stop_signal.Stopped` and leaves no model; one
stopped later keeps its best checkpoint, ``"partial"`` in ``metrics.json``. On ``cuda`` it runs in mixed precision
(:mod:`mlse.train.device`); under ``torchrun`` every rank trains its own batches (:mod:`mlse.train.distributed`).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.encoders.torch import default_device
from mlse.runs.folders import FINETUNE_CONFIG_FILE, LOG_FILE
from mlse.stop_signal import Stopped, StopSignal, check, should_stop, start_budget
from mlse.train.config import FinetuneConfig, default_out
from mlse.train.config_validation import validate
from mlse.train.device import precision_record, resolve_precision
from mlse.train.distributed import (
    barrier,
    broadcast_parameters,
    gather,
    init_from_env,
    main_first,
    rank_device,
    shutdown,
)
from mlse.train.finetune_data import TrainingData, dev_scores, load_dev, prepare_data, teacher_targets
from mlse.train.loop import TrainingLoop
from mlse.train.methods import build_method
from mlse.train.student_model import (
    extend_vocabulary,
    fit_bridge,
    load_student,
    parameter_checksum,
    restrict_training,
    save_checkpoint,
    save_model_atomically,
    student_dim,
)

log = logging.getLogger(__name__)

__all__ = ["finetune", "run_finetune"]


def finetune(
    config: FinetuneConfig, *, progress: Callable[[dict], None] | None = None, signal: StopSignal | None = None
) -> dict:
    """Train ``config.student`` by ``config.method`` within the budget and write the run to ``config.out``.

    ``config`` is validated first. ``progress`` receives each evaluation's log record; a ``signal`` stop ends the run
    after the current step. Returns the final metrics (also in ``out/metrics.json``). ``config.out`` None:
    ``$MLSE_RUNS/<student>+<method>``.
    """
    validate(config)
    return run_finetune(config, progress=progress, signal=signal)


def run_finetune(
    config: FinetuneConfig, *, progress: Callable[[dict], None] | None = None, signal: StopSignal | None = None
) -> dict:
    """:func:`finetune` of a configuration already validated (an app request's)."""
    if not config.out:
        config = replace(config, out=default_out(config))
    ctx = init_from_env(config.device or default_device())
    try:
        metrics = _finetune(config, ctx, progress, signal)
        # Leave together: a rank tearing the group down while rank 0 still writes can abort in gloo's teardown.
        barrier(ctx)
        return metrics
    finally:
        shutdown(ctx)


@dataclass
class _Run:
    """What the end of a run needs: the loop (with the configuration, the student, the method, the device and the
    process group), the data, the precision, the student's own modules."""

    loop: TrainingLoop
    data: TrainingData
    precision: str
    base_modules: int

    def metrics(self, reason: str) -> dict:
        return {
            "method": self.loop.cfg.method,
            **self.loop.metrics(reason),
            "device": self.loop.device,
            "precision": self.precision,
            "grad_scaler": self.loop.scaler is not None,
            "training_data": self.data.info.get("source"),
            "n_pairs": len(self.data.src),
            "data": self.data.info["pairs"],
            "dropped": {p: v["contaminated_dropped"] for p, v in self.data.info["pairs"].items()},
            **self.loop.method.final_metrics(),
        }


def _finetune(config: FinetuneConfig, ctx, progress, signal: StopSignal | None) -> dict:
    import torch  # lazy: torch takes seconds to import, and the command line imports this module to start a run

    prepare_started, prepare_cpu = time.perf_counter(), time.process_time()
    device = rank_device(ctx, config.device or default_device())
    precision = resolve_precision(config.precision, device)  # before anything loads: fp16 on a CPU is refused
    torch.manual_seed(config.seed)
    out = Path(config.out)
    data = prepare_data(config, signal)
    check(signal, "loading the student model")
    initial = out / ".initial-model"  # several processes: rank 0's extended student, loaded by the others
    with main_first(ctx):
        if ctx.is_main:
            student = load_student(config.student, device, config.max_seq_length)
            vocab_info = extend_vocabulary(config, student, data) if config.extend_vocab else {}
            if config.extend_vocab and ctx.active:
                save_model_atomically(student, initial)
        else:  # the same tokenizer and weights as rank 0 (a re-learned vocabulary could differ)
            student = load_student(
                str(initial) if config.extend_vocab else config.student, device, config.max_seq_length
            )
            vocab_info = {}
    broadcast_parameters(student, ctx)
    check(signal, "preparing the student")
    with main_first(ctx):  # rank 0 fills the embedding cache with the teacher's targets; the others then read it
        t_src, t_tgt, teacher_info = teacher_targets(config, data, student_dim(student), device, signal)
    base_modules = len(student)
    if config.bridge != "none":  # every rank fits the same map on the same sentences and weights
        check(signal, "fitting the bridge")
        teacher_info |= fit_bridge(config, student, data, t_src)
    teacher_info |= restrict_training(config, student, base_modules)
    check(signal, "loading the dev data")
    dev = load_dev(config.dev_pairs, config.data_dir, config.dev_max_pairs, config.seed)
    if ctx.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / LOG_FILE).write_text("")  # a new run starts a new log
    barrier(ctx)
    sts_rows = None
    if config.sts_loss != "none":
        from mlse.data.sts_train import load_sts_train

        check(signal, "loading the STS training pairs")
        sts_rows = load_sts_train(config.sts_langs, config.data_dir)
        if config.translate_train:  # pseudo-rated pairs for the bitext's unrated languages (translate-train)
            from mlse.train.recipes.translate_train import with_translated_pairs

            sts_rows = with_translated_pairs(config, sts_rows, device, signal)
        teacher_info |= {"sts_training": sts_rows.info}
    method = build_method(config, student, data, (t_src, t_tgt), device, precision, sts_rows)
    # characters of the longer side: a cheap proxy of the padded token length
    lengths = np.array([max(len(a), len(b)) for a, b in zip(data.src, data.tgt)]) if config.bucket_by_length else None
    loop = TrainingLoop(
        config,
        student,
        method,
        len(data.src),
        lengths,
        evaluate=lambda stop: dev_scores(student, dev, config.batch_size, stop),
        save=lambda: save_checkpoint(student, out, base_modules),
        device=device,
        progress=progress,
        signal=signal,
        ctx=ctx,
        precision=precision,
    )
    run = _Run(loop, data, precision, base_modules)
    record = {
        **asdict(config),
        "include_src_effective": config.src_term(),
        **precision_record(device, precision),
        "world_size": ctx.world,
        "training_data": data.info.get("source"),
        **teacher_info,
        **vocab_info,
    }
    if ctx.is_main:
        import sentence_transformers  # lazy: loaded by now (the student); the versions a run was made with
        import transformers

        versions = {module.__name__: module.__version__ for module in (torch, transformers, sentence_transformers)}
        _write_json(out / FINETUNE_CONFIG_FILE, record | {"data_files": data.info["data"], "versions": versions})
    prepare_s = (time.perf_counter() - prepare_started, time.process_time() - prepare_cpu)
    start_budget(signal)  # a job's budget counts training, not the preparation above (mlse.stop_signal)
    try:
        reason = loop.run()
    except KeyboardInterrupt:
        _finish(run, "interrupted", prepare_s, final_eval=False)
        raise
    if loop.step == 0 and should_stop(signal):  # stopped before any training: nothing worth keeping
        if ctx.is_main:
            shutil.rmtree(out, ignore_errors=True)
        raise Stopped("stopped before the first training step")
    # a stop, or the caller's budget, ends the run now: no extra evaluation after it
    return _finish(run, reason, prepare_s, final_eval=not should_stop(signal))


def _finish(run: _Run, reason: str, prepare_s: tuple[float, float], *, final_eval: bool) -> dict:
    """Last evaluation (unless the last step was just evaluated), a model on disk in any case, metrics.json.

    Ranks other than 0 write nothing and return their own metrics (``rank`` set). ``prepare_s``: wall and CPU seconds.
    """
    loop, out = run.loop, Path(run.loop.cfg.out)
    ctx, student = loop.ctx, loop.model
    if not ctx.is_main:
        checksum = parameter_checksum(student)
        gather(ctx, checksum)  # rank 0 records every rank's checksum (collective: every rank takes part)
        return run.metrics(reason) | {"rank": ctx.rank, "world_size": ctx.world, "parameter_checksum": checksum}
    shutil.rmtree(out / ".initial-model", ignore_errors=True)
    if final_eval and loop.last_eval_step != loop.step:
        loop.evaluate()
    if not (out / "model").is_dir():  # no finite dev score ever (or interrupted before the first evaluation)
        with loop.averaged():
            save_checkpoint(student, out, run.base_modules)
    wall, cpu = prepare_s
    metrics = run.metrics(reason) | {"prepare_s": round(wall, 2), "prepare_cpu_s": round(cpu, 2)}
    metrics["world_size"] = ctx.world
    if reason in ("stopped", "interrupted"):  # ended by hand before its budget: usable, but say how far it got
        metrics["partial"] = {"reason": reason, "steps": loop.step, "best_step": loop.best_step}
    if ctx.active:  # equal checksums on every rank: the ranks trained one model together
        metrics["parameter_checksum"] = parameter_checksum(student)
        metrics["rank_checksums"] = gather(ctx, metrics["parameter_checksum"])
    _write_json(out / "metrics.json", metrics)
    log.info(
        "finetune %s: %s after %d steps, best dev %.2f at step %s",
        loop.cfg.method,
        reason,
        loop.step,
        loop.best,
        loop.best_step,
    )
    return metrics


def _write_json(path: Path, obj: dict) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, default=str, allow_nan=False) + "\n")
