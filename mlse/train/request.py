"""A fine-tune request: what the app's Fine-tune form (and its API) asks for, one pydantic model validated once, when
it is made, where it enters; the job (in the app's process or its child) trusts it.

A refusal is one :class:`~mlse.errors.MlseError` naming the form's field and what it allows (``Batch size: must be >=
1, got 0``). Checked in order: field types, the request's own rules, a public deployment's limits, the run folder, then
the configuration it becomes (:func:`request_config`) by :func:`mlse.train.config_validation.validate`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from mlse.dirs import runs_dir
from mlse.encoders.identity import BACKENDS, DEFAULT_BACKEND
from mlse.errors import MlseError
from mlse.public_mode import check_finetune_request, public_mode
from mlse.train.config import (
    JOB_METHODS,
    MAX_PAIRS,
    PAIR_METHODS,
    TEACHER_METHODS,
    FinetuneConfig,
    Stage1Settings,
    Stage2Settings,
    default_of,
    finetune_config,
    stage1_settings,
    stage2_settings,
)
from mlse.train.config_validation import OptionError, allowed, option_problem, validate

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,79}$")
# each field as the form labels it (an API caller's parameter names are these words, mlse.ui.finetune_tab)
LABELS = {
    "method": "Method",
    "model": "Student / backbone / Stage-1 scorer",
    "name": "Run name",
    "teacher": "Teacher",
    "pairs": "Language pairs",
    "max_pairs": "Max pairs per language pair",
    "budget_minutes": "Time budget (minutes)",
    "overwrite": "Overwrite",
    "batch_size": "Batch size",
    "lr": "Learning rate",
    "eval_every_steps": "Evaluate every N steps",
    "max_steps": "Max steps",
    "max_epochs": "Max epochs",
    "dev_max_pairs": "Dev rows per dev pair",
    "extend_vocab": "Extend vocabulary",
    "precision": "Precision",
    "probe": "Language-ID probe",
    "backend": "Backend",
    "sts_loss": "STS loss",
    "sts_weight": "STS term weight",
}
# a configuration's option that is a request field of another name
_MODEL_OPTIONS = ("student", "backbone", "stage1")
_OPTIONAL_NUMBERS = ("max_pairs", "lr", "max_steps", "max_epochs", "dev_max_pairs")  # form: empty or 0 = the default
# pydantic's error type -> what the field takes
_KINDS = {"int": "a whole number", "float": "a number", "bool": "yes or no", "list": "a list of names"}


class TrainRequest(BaseModel):
    """What the app's Fine-tune tab asks for (left-out options take the configurations' defaults); validated when made
    (see the module docstring). ``TrainRequest.model_validate(form, context={"offered": names})`` gives a public
    deployment the models it offers."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # made valid, it stays as it was made

    method: str  # one of JOB_METHODS
    model: str  # stage1: backbone; stage2: a Stage-1 scorer; others: the student
    name: str  # run folder name under runs_dir()
    teacher: str | None = None  # mse / soft
    pairs: list[str] = []  # empty: the method's default
    max_pairs: int | None = MAX_PAIRS  # per language pair (stage1 and fine-tuning); None: all
    budget_minutes: float = default_of(FinetuneConfig, "budget_minutes")  # training only (see mlse.train.jobs)
    overwrite: bool = False
    batch_size: int = default_of(FinetuneConfig, "batch_size")
    lr: float | None = None  # None: the method's default
    eval_every_steps: int = default_of(FinetuneConfig, "eval_every_steps")
    max_steps: int | None = None
    max_epochs: int | None = None  # stage1 / stage2
    dev_pairs: list[str] | None = None
    dev_max_pairs: int | None = default_of(FinetuneConfig, "dev_max_pairs")  # None: all
    extend_vocab: int = default_of(FinetuneConfig, "extend_vocab")
    precision: str = default_of(FinetuneConfig, "precision")
    probe: bool = default_of(Stage1Settings, "probe")  # stage1: the language-ID probe (FLORES; slow the first time)
    seed: int = 0
    data_dir: str | None = None
    device: str | None = None  # default: cuda when available, else cpu
    backend: str = DEFAULT_BACKEND  # the app's --backend: the heads' backbone (fine-tuning trains on torch)
    sts_loss: str = default_of(FinetuneConfig, "sts_loss")  # fine-tuning: the STS term on scored pairs (sts: required)
    sts_weight: float = default_of(FinetuneConfig, "sts_weight")  # beside a translation method's loss

    @field_validator(*_OPTIONAL_NUMBERS, mode="before")
    @classmethod
    def _empty_is_default(cls, value):
        return None if value is None or (isinstance(value, str) and not value.strip()) or value == 0 else value

    @field_validator("extend_vocab", mode="before")
    @classmethod
    def _empty_is_off(cls, value):
        return 0 if value is None or (isinstance(value, str) and not value.strip()) else value

    @field_validator("method", "model", "name", "precision", "sts_loss", mode="before")
    @classmethod
    def _stripped(cls, value):
        return value.strip() if isinstance(value, str) else value

    @model_validator(mode="wrap")
    @classmethod
    def _one_message(cls, data: Any, handler):
        """A field of the wrong type -> one MlseError naming it and what it allows."""
        try:
            return handler(data)
        except ValidationError as exc:
            raise MlseError(_type_message(exc.errors()[0])) from None

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> TrainRequest:
        for field, choices_and_bounds in (
            ("method", {"choices": JOB_METHODS}),
            ("backend", {"choices": BACKENDS}),
            ("budget_minutes", FinetuneConfig.__dataclass_fields__["budget_minutes"].metadata),  # every job's budget
        ):
            problem = option_problem(getattr(self, field), choices_and_bounds)
            if problem:
                raise MlseError(f"{LABELS[field]}: {problem}")
        if not self.model:
            raise MlseError("choose a model")
        run_name(self.name)
        if self.method in PAIR_METHODS and not self.pairs:
            raise MlseError("Choose at least one language pair.")
        if self.method in TEACHER_METHODS and not self.teacher:  # the form names one (the command line has a default)
            raise MlseError(f"{LABELS['teacher']}: method {self.method!r} needs a teacher")
        if public_mode():
            offered = (info.context or {}).get("offered")  # the names the app offers, or a function giving them
            check_finetune_request(self, list((offered() if callable(offered) else offered) or []))
        out = self.out
        if {self.model, self.teacher} & {f"runs/{self.name}", str(out)}:
            raise MlseError(f"run {self.name!r} is an input of this run; choose another name")
        if out.exists() and not self.overwrite:
            raise MlseError(f"run {self.name!r} already exists ({out}); tick 'overwrite' or choose another name")
        try:
            validate(request_config(self, out))
        except OptionError as exc:
            field = "model" if exc.option in _MODEL_OPTIONS else exc.option
            raise MlseError(f"{LABELS.get(field, field)}: {exc.problem}") from None
        return self

    @property
    def out(self) -> Path:
        """The run folder: ``runs_dir()/name``."""
        return runs_dir() / self.name


def run_name(name: str | None) -> str:
    """A safe folder name (letters, digits, ``. _ + -``; no path separators, no leading dot) or an MlseError."""
    name = (name or "").strip()
    if not name:
        raise MlseError("give the run a name")
    if not _RUN_NAME.match(name) or ".." in name:
        raise MlseError(
            f"run name {name!r} is not a safe folder name: use letters, digits and . _ + - (max 80), "
            "starting with a letter or digit"
        )
    return name


def _type_message(error: dict) -> str:
    """A pydantic type error in the form's words: the field's label, what was given, what the field allows."""
    field = str(error["loc"][0]) if error.get("loc") else ""
    if error["type"] == "extra_forbidden":
        return f"{field}: not a field of a fine-tune request; expected {', '.join(TrainRequest.model_fields)}"
    if error["type"] == "missing":
        return f"{LABELS.get(field, field)}: missing"
    kind = error["type"].split("_")[0]
    what = _KINDS.get(kind, "text")
    meta = FinetuneConfig.__dataclass_fields__.get(field)
    bounds = meta.metadata.get("bounds") if meta is not None and kind in ("int", "float") else None
    given = "empty" if error.get("input") in (None, "") else f"{str(error.get('input'))[:80]!r} is not {what}"
    return f"{LABELS.get(field, field)}: {given}; expected {what}" + (f" {allowed(bounds)}" if bounds else "")


def request_config(req: TrainRequest, out: Path) -> FinetuneConfig | Stage1Settings | Stage2Settings:
    """The configuration of an app request whose run folder is ``out``, through the command line's functions.

    The teacher field counts only for a method with a frozen teacher (it may hold a stale value while hidden). The
    backend reaches only the heads' backbone; fine-tuning runs on torch.
    """
    make, settings, model = {
        "stage1": (stage1_settings, Stage1Settings, "backbone"),
        "stage2": (stage2_settings, Stage2Settings, "stage1"),
    }.get(req.method, (finetune_config, FinetuneConfig, "student"))
    # the form's model is the configuration's student, backbone or Stage-1 scorer; every field the two share, by name
    shared = req.model_dump(include=set(settings.__dataclass_fields__) - {"teacher"})
    if req.method in TEACHER_METHODS:
        shared["teacher"] = req.teacher
    return make(**shared, **{model: req.model}, out=str(out))
