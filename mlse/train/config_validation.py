"""Whether a fine-tuning configuration can run: :func:`validate` refuses one that cannot, with a message naming the
option, before anything is loaded (:func:`mlse.train.finetune.finetune` calls it); :func:`refuse_frozen_student`
refuses a student that cannot train.

The configuration itself, its defaults and the way from a user's request to it are :mod:`mlse.train.config`'s.
Nothing here imports torch.
"""

from __future__ import annotations

from mlse.encoders.registry import registry
from mlse.encoders.resolve import resolve_model, spec_status
from mlse.encoders.use import refuse_as_student
from mlse.errors import MlseError
from mlse.train.config import (
    BRIDGES,
    CLOCKS,
    LABELS,
    METHODS,
    PRECISIONS,
    STS_LOSSES,
    TEACHER_METHODS,
    VOCAB_INITS,
    FinetuneConfig,
)


def validate(cfg: FinetuneConfig) -> None:
    """Refuse a configuration that cannot run, with a message naming the option (before anything is loaded)."""
    choices = [
        ("fine-tuning method", cfg.method, METHODS),
        ("soft label", cfg.label, LABELS),
        ("precision", cfg.precision, PRECISIONS),
        ("vocab_init", cfg.vocab_init, VOCAB_INITS),
        ("bridge", cfg.bridge, BRIDGES),
        ("budget_clock", cfg.budget_clock, CLOCKS),
        ("sts_loss", cfg.sts_loss, STS_LOSSES),
    ]
    for what, value, allowed in choices:
        if value not in allowed:
            raise MlseError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")
    checks = [
        (cfg.extend_vocab == 0 or cfg.extend_vocab > 100, f"extend_vocab must be 0 or > 100, got {cfg.extend_vocab}"),
        (cfg.batch_size >= 1, f"batch_size must be >= 1, got {cfg.batch_size}"),
        (cfg.lr > 0, f"lr must be > 0, got {cfg.lr}"),
        (cfg.budget_minutes > 0, f"budget_minutes must be > 0, got {cfg.budget_minutes}"),
        (cfg.eval_every_steps >= 1, f"eval_every_steps must be >= 1, got {cfg.eval_every_steps}"),
        (cfg.max_seq_length >= 8, f"max_seq_length must be >= 8, got {cfg.max_seq_length}"),
        (cfg.max_pairs is None or cfg.max_pairs >= 0, f"max_pairs must be >= 0, got {cfg.max_pairs}"),
        (cfg.max_steps is None or cfg.max_steps >= 1, f"max_steps must be >= 1, got {cfg.max_steps}"),
        (
            cfg.average_from is None or 0.0 <= cfg.average_from < 1.0,
            f"average_from must be in [0, 1), got {cfg.average_from}",
        ),
        (0.0 <= cfg.tau_base <= 1.0, f"tau_base must be in [0, 1], got {cfg.tau_base}"),
        (cfg.temperature > 0, f"temperature must be > 0, got {cfg.temperature}"),
        (cfg.tcm_alpha >= 0, f"tcm_alpha must be >= 0, got {cfg.tcm_alpha}"),
        (bool(cfg.pairs), "no training pairs given"),
        (cfg.lora_r >= 0, f"lora_r must be >= 0, got {cfg.lora_r}"),
        (cfg.lora_alpha is None or cfg.lora_alpha > 0, f"lora_alpha must be > 0, got {cfg.lora_alpha}"),
        (cfg.bridge_sentences >= 2, f"bridge_sentences must be >= 2, got {cfg.bridge_sentences}"),
        (
            cfg.bridge == "none" or cfg.method == "mse",
            f"bridge {cfg.bridge!r} maps the student into a frozen teacher's space: only method 'mse' has one",
        ),
        (
            not cfg.extend_vocab or not (cfg.lora_r or cfg.freeze_embeddings),
            "extend_vocab adds token embeddings that must train: it cannot go with lora_r or freeze_embeddings",
        ),
        (bool(cfg.dev_pairs), "no dev pairs given"),
        (
            cfg.method != "sts" or cfg.sts_loss != "none",
            "method 'sts' trains the STS term alone: choose an STS loss (sts_loss cosent or angle)",
        ),
        (  # the weight scales the term beside another loss; unused when there is no term or nothing beside it
            cfg.sts_loss == "none" or cfg.method == "sts" or cfg.sts_weight > 0,
            f"sts_weight must be > 0 when an STS loss is added, got {cfg.sts_weight}",
        ),
        (cfg.sts_batch_size >= 2, f"sts_batch_size must be >= 2 (a ranking needs two pairs), got {cfg.sts_batch_size}"),
        (bool(cfg.sts_langs), "no STS training languages given"),
    ]
    for ok, message in checks:
        if not ok:
            raise MlseError(message)
    refuse_frozen_student(cfg.student)
    if cfg.method in TEACHER_METHODS and not cfg.teacher:
        raise MlseError(f"method {cfg.method!r} needs a teacher model")
    if cfg.method == "ema" and cfg.teacher and cfg.teacher != cfg.student:
        raise MlseError(
            f"method 'ema': the teacher is an EMA copy of the student ({cfg.student!r}); "
            f"leave the teacher out or set it to the student, not {cfg.teacher!r}"
        )


def refuse_frozen_student(name: str) -> None:
    """A ``native`` model (``muse``: numpy weights, no gradients) cannot be a student; say what can.

    Only the registry is consulted (no model is loaded); a name that does not resolve is left to the loading step,
    whose message lists what is available.
    """
    try:
        spec = resolve_model(name)
    except MlseError:
        return
    if spec.source != "native":
        return
    trainable = [s.name for s in registry().values() if s.source != "native" and spec_status(s).startswith("available")]
    raise refuse_as_student(spec.name, [*trainable, "any sentence-transformers folder or run"])
