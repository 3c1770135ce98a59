"""Whether a training configuration can run: :func:`validate` refuses one that cannot, before anything is loaded, with
an :class:`OptionError` naming the option and what it allows; :func:`refuse_frozen_student` refuses a student that
cannot train.

The rules live with the options: each field's ``choices`` and ``bounds`` (:func:`mlse.train.config.option`), then
the rules that tie options together (:func:`_finetune_rules`). Nothing here imports torch.
"""

from __future__ import annotations

import operator
from dataclasses import fields

from mlse.encoders.catalogue import resolve_model, spec_status
from mlse.encoders.registry import registry
from mlse.encoders.use import refuse_as_student
from mlse.errors import MlseError
from mlse.train.config import TEACHER_METHODS, FinetuneConfig

# the list options a fine-tune needs one or more of, and what they list
_NOT_EMPTY = {"pairs": "training pairs", "dev_pairs": "dev pairs", "sts_langs": "STS training languages"}
_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "le": (operator.le, "<="), "lt": (operator.lt, "<")}


class OptionError(MlseError):
    """A configuration refused: ``option`` names the option as the configuration spells it, ``problem`` says what is
    wrong with its value and what is allowed; the message is ``"option: problem"``."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"{option}: {problem}")
        self.option, self.problem = option, problem


def allowed(bounds: dict) -> str:
    """A number's range in words: ``> 0``, ``>= 1``, ``>= 0 and < 1``."""
    return " and ".join(f"{_BOUNDS[key][1]} {bound:g}" for key, bound in bounds.items())


def option_problem(value, metadata) -> str | None:
    """What is wrong with ``value`` for an option of this field ``metadata`` (its ``choices`` and ``bounds``), None
    when it is allowed. None is always allowed here (a field that may not be None says so by its type)."""
    if value is None:
        return None
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        return f"{value!r} is not offered; choose from {', '.join(map(str, choices))}"
    bounds = metadata.get("bounds") or {}
    if not all(_BOUNDS[key][0](value, bound) for key, bound in bounds.items()):
        return f"must be {allowed(bounds)}, got {value:g}"
    return None


def validate(cfg) -> None:
    """Refuse a configuration (:class:`~mlse.train.config.FinetuneConfig`, ``Stage1Settings``, ``Stage2Settings``) that
    cannot run: :class:`OptionError` naming the first option at fault (before anything is loaded)."""
    for f in fields(cfg):
        problem = option_problem(getattr(cfg, f.name), f.metadata)
        if problem:
            raise OptionError(f.name, problem)
    if isinstance(cfg, FinetuneConfig):
        _finetune_rules(cfg)


def _finetune_rules(cfg: FinetuneConfig) -> None:
    """The rules of a fine-tuning configuration that tie options together, in the order they are asked."""
    if cfg.extend_vocab != 0 and cfg.extend_vocab <= 100:
        raise OptionError("extend_vocab", f"must be 0 or > 100, got {cfg.extend_vocab}")
    for option, what in _NOT_EMPTY.items():
        if not getattr(cfg, option):
            raise OptionError(option, f"no {what} given")
    if cfg.bridge != "none" and cfg.method != "mse":
        problem = f"{cfg.bridge!r} maps the student into a frozen teacher's space: only method 'mse' has one"
        raise OptionError("bridge", problem)
    if cfg.extend_vocab and (cfg.lora_r or cfg.freeze_embeddings):
        problem = "adds token embeddings that must train: it cannot go with lora_r or freeze_embeddings"
        raise OptionError("extend_vocab", problem)
    if cfg.method == "sts" and cfg.sts_loss == "none":
        problem = "method 'sts' trains the STS term alone: choose an STS loss (cosent or angle)"
        raise OptionError("sts_loss", problem)
    # the weight scales the term beside another loss; unused when there is no term or nothing beside it
    if cfg.sts_loss != "none" and cfg.method != "sts" and not cfg.sts_weight > 0:
        raise OptionError("sts_weight", f"must be > 0 when an STS loss is added, got {cfg.sts_weight:g}")
    if cfg.translate_train and cfg.sts_loss == "none":
        problem = "adds pseudo-rated pairs to the STS term: choose an STS loss (sts_loss cosent or angle)"
        raise OptionError("translate_train", problem)
    if cfg.method in TEACHER_METHODS and not cfg.teacher:
        raise OptionError("teacher", f"method {cfg.method!r} needs a teacher")
    if cfg.method == "ema" and cfg.teacher and cfg.teacher != cfg.student:
        problem = (
            f"method 'ema': the teacher is an EMA copy of the student ({cfg.student!r}); leave the teacher out or "
            f"set it to the student, not {cfg.teacher!r}"
        )
        raise OptionError("teacher", problem)
    refuse_frozen_student(cfg.student)


def refuse_frozen_student(name: str) -> None:
    """A ``native`` model (``muse``: numpy weights, no gradients) cannot be a student; say what can.

    Only the registry is consulted; a name that does not resolve is left to the loading step.
    """
    try:
        spec = resolve_model(name)
    except MlseError:
        return
    if spec.source != "native":
        return
    trainable = [s.name for s in registry().values() if s.source != "native" and spec_status(s).startswith("available")]
    raise refuse_as_student(spec.name, [*trainable, "any sentence-transformers folder or run"])
