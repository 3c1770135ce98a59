"""What a training run is: the configuration dataclasses, and the one way from what a user asked for (the command
line's flags, the app's form) to a configuration (their validation is :mod:`mlse.train.config_validation`'s).

**The one source of defaults and rules.** Every option's default, help text and allowed values live in a field below
(:func:`option`). The command line builds its flags from these fields and the app's form its initial values; both then
go through :func:`finetune_config`, :func:`stage1_settings` and :func:`stage2_settings`, which read "left out", "0: all"
and "empty list: the default pairs" the same way.

Nothing here imports torch: the command line and the app import this module to start a run.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from mlse.data.layout import STS_LANGS
from mlse.data.pairs import DEV_PAIRS, ENGLISH_PAIRS, SEED_PARALLEL_PAIRS, STAGE2_PAIRS
from mlse.dirs import runs_dir
from mlse.encoders.identity import BACKENDS, DEFAULT_BACKEND
from mlse.errors import MlseError
from mlse.heads.choices import NONLINEARITIES
from mlse.losses.defaults import DEFAULT_TEMPERATURE, LABEL_MODES
from mlse.runs.folders import training_run_name

PAIR_METHODS = ("mse", "ema", "soft", "hard")  # methods that learn from translation pairs (mlse.train.methods)
METHODS = (*PAIR_METHODS, "sts")  # every fine-tuning method; sts: the supervised STS term alone (scored pairs)
STS_LOSSES = ("none", "cosent", "angle")  # the supervised STS term (mlse.losses.cosent, mlse.losses.angle)
TEACHER_METHODS = ("mse", "soft")  # the methods with a frozen teacher
HEAD_METHODS = ("stage1", "stage2")  # heads on a frozen backbone (mlse.train.head_training)
JOB_METHODS = (*HEAD_METHODS, *METHODS)  # what the app's fine-tune tab trains
PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # mlse.train.device: auto -> bf16 / fp16 (CUDA, loss-scaled) / fp32
VOCAB_INITS = ("aligned", "subword")
BRIDGES = ("none", "linear")
CLOCKS = ("wall", "cpu")
DEFAULT_TEACHER = "minilm-en"
# Translation pairs per language pair after the contamination filter, for Stage 1 and fine-tuning alike.
MAX_PAIRS = 2000


def option(
    default: Any = MISSING,
    help: str = "",
    *,
    factory=None,
    flag: str | None = None,
    choices=None,
    zero_is_none: bool = False,
    required: bool = False,
    const: Any = None,
    **bounds: float,
):
    """A dataclass field with what the command line needs to offer it and what values it allows.

    ``flag``: the name when not ``--field-name`` (a bool defaulting to True gets ``--no-field-name``); ``const``: what
    a bare flag stores; ``zero_is_none``: 0 means None ("all"); ``required``: the command line insists on it.
    ``choices`` and ``bounds`` (``ge``, ``gt``, ``le``, ``lt``; None passes where the field may be None) are what
    :func:`mlse.train.config_validation.validate` checks.
    """
    metadata = dict(
        help=help, flag=flag, choices=choices, zero_is_none=zero_is_none, required=required, const=const, bounds=bounds
    )
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class FinetuneConfig:
    """Everything that defines a fine-tuning run (written to ``out/finetune_config.json``)."""

    method: str = option(
        "mse",
        "the method: MSE / EMA distillation, soft / hard contrastive, sts: the supervised STS term alone",
        choices=METHODS,
        required=True,
    )
    teacher: str | None = option(
        DEFAULT_TEACHER, "mse/soft: the frozen teacher; ema: none or the student itself; hard: unused"
    )
    student: str = option("minilm-en", "a sentence-transformers model name, folder or run")
    pairs: list[str] = option(help="English-X parallel pairs", factory=lambda: list(ENGLISH_PAIRS))
    max_pairs: int | None = option(
        MAX_PAIRS, "cap per language pair after the contamination filter (0: all)", zero_is_none=True, ge=0
    )
    budget_minutes: float = option(
        10.0, "training + dev evaluation time (loading and teacher encoding come before)", gt=0
    )
    batch_size: int = option(64, "translation pairs per step", ge=1)
    lr: float = option(1e-4, "learning rate (AdamW; linear warm-up, then constant)", gt=0)
    max_seq_length: int = option(128, "tokens per sentence", ge=8)
    eval_every_steps: int = option(50, "steps between STS dev evaluations", flag="--eval-every", ge=1)
    dev_pairs: list[str] = option(help="STS Multi MT dev pairs", factory=lambda: list(DEV_PAIRS))
    dev_max_pairs: int | None = option(
        500, "seeded subset of rows per dev pair (0: all, ~1,500)", zero_is_none=True, ge=1
    )
    tau_base: float = option(0.999, "ema: tau_base (1.0 = frozen teacher)", ge=0, le=1)
    label: str = option("priority", "soft: teacher labels", choices=LABEL_MODES)
    temperature: float = option(
        DEFAULT_TEMPERATURE, "soft/hard: softmax temperature (Park et al.'s released value)", gt=0
    )
    tcm_alpha: float = option(0.0, "soft: weight of the mono-lingual TCM term", ge=0)
    include_src: bool | None = option(
        None,
        "mse: only MSE(student(tgt), teacher(src)) (ema has no src term unless a caller sets include_src)",
        flag="--no-src-term",
        const=False,
    )
    seed: int = option(0, "seed of the data sample, the batches and the initialisation")
    out: str | None = option(None, "run folder (default: $MLSE_RUNS/<student>+<method>)")
    max_steps: int | None = option(None, "stop after this many steps even if budget is left", ge=1)
    eval_at_start: bool = option(
        True, "evaluate (and save) the untouched student first: the curve starts at the baseline"
    )
    warmup_fraction: float = option(0.05, "linear learning-rate warm-up over this fraction of the estimated steps")
    weight_decay: float = option(0.01, "AdamW weight decay")
    max_grad_norm: float = option(1.0, "gradient norm clipping")
    average_from: float | None = option(
        None,
        "average the trained weights uniformly from this fraction of the estimated steps on (SWA, "
        "mlse.train.weight_average); evaluations and checkpoints then use the average (off unless given)",
        ge=0,
        lt=1,
    )
    data_dir: str | None = option(None, "datasets folder (else $MLSE_DATA, else ../shared/data)")
    device: str | None = option(None, "cpu, cuda, ... (default: cuda if available)")
    extend_vocab: int = option(
        0,
        "learn a WordPiece vocabulary of this size on the non-English side and add it "
        "(mlse.train.recipes.vocab; 0: off; else more than 100)",
        ge=0,
    )
    vocab_init: str = option(
        "aligned",
        "embeddings of added pieces: from parallel-data alignment, or from their old sub-words",
        choices=VOCAB_INITS,
    )
    precision: str = option(
        "auto",
        "autocast of the transformer: bf16, or fp16 with loss scaling (CUDA only); auto: "
        "bf16 where the CPU/GPU computes it natively, else fp16 on a GPU, else fp32",
        choices=PRECISIONS,
    )
    bucket_by_length: bool = option(
        True, "batches of similar length (less padding); the batch order stays random", flag="--no-bucket"
    )
    freeze_embeddings: bool = option(False, "keep the token embedding matrix fixed (e5: 96M of its 118M weights)")
    lora_r: int = option(0, "> 0: train LoRA adapters of this rank instead of the transformer's weights (peft)", ge=0)
    lora_alpha: float | None = option(None, "LoRA scale numerator (default: 2 x rank)", gt=0)
    bridge: str = option(
        "none", "mse: start from a least-squares map of the student's space onto the teacher's", choices=BRIDGES
    )
    bridge_sentences: int = option(5000, "English training sentences the bridge is fitted on", ge=2)
    # "cpu" is unfair on an oversubscribed machine: torch's threads are charged while they spin-wait for a core
    budget_clock: str = option(
        "wall",
        "cpu: count the budget in process CPU seconds / threads (equal compute beside light work; wall on a GPU)",
        choices=CLOCKS,
    )

    # the supervised STS term (mlse.train.sts_term), added to the method's loss (method "sts": the term alone)
    sts_loss: str = option(
        "none", "a supervised STS loss on STS Multi MT train pairs added to the method's", choices=STS_LOSSES
    )
    # 0.001: a CoSENT batch's gradient dwarfs the EMA loss's (python -m benchmarks.sts_term_balance)
    sts_weight: float = option(1e-3, "weight of the STS term beside the method's loss (method sts: unused)", ge=0)
    sts_batch_size: int = option(32, "scored pairs per step in the STS term (a ranking needs two pairs)", ge=2)
    sts_langs: list[str] = option(
        help="STS Multi MT languages the STS term pairs (every ordered pairing, same-language included)",
        factory=lambda: list(STS_LANGS),
    )
    translate_train: bool | None = option(
        None,
        "add pseudo-rated pairs for bitext languages without rated pairs to the STS term (translate-train)",
        flag="--translate-train",
        const=True,
    )
    translate_teacher: str | None = option(
        None, "translate-train: the model scoring the English side (default: the student)"
    )

    def src_term(self) -> bool:
        """Whether the MSE losses include the src term (the method's default unless set)."""
        return self.include_src if self.include_src is not None else self.method == "mse"


@dataclass
class Stage1Settings:
    """A Stage-1 run (``python -m mlse train stage1``, the app's stage1 jobs):
    :func:`mlse.train.head_training.train_stage1`."""

    backbone: str = option("minilm-en", "any model name the registry accepts")
    prelayer: bool = option(False, "a fully connected layer before Stage 1")
    pairs: list[str] = option(
        help="Tatoeba-Challenge parallel pairs (the seed's 15)", factory=lambda: list(SEED_PARALLEL_PAIRS)
    )
    max_pairs: int | None = option(
        MAX_PAIRS, "cap per language pair after the contamination filter (0: all)", zero_is_none=True, ge=0
    )
    lr: float | None = option(None, "learning rate (default: the head's own, mlse.heads.stage1)", gt=0)
    max_epochs: int | None = option(None, "epochs at most (default: the head's own)", ge=1)
    probe: bool = option(True, "the language-ID probe on FLORES after training")
    backend: str = option(
        DEFAULT_BACKEND,
        "runtime of the backbone: torch, onnx (fp32) or onnx-int8 (dynamic int8; "
        "exported once and cached; MLSE_THREADS sets the CPU threads)",
        choices=BACKENDS,
    )
    out: str | None = option(None, "run folder (default: under $MLSE_RUNS, named after the heads)")
    seed: int = option(0, "seed of the data sample and the head")
    data_dir: str | None = option(None, "datasets folder (else $MLSE_DATA, else ../shared/data)")


@dataclass
class Stage2Settings:
    """A Stage-2 run (``python -m mlse train stage2``, the app's stage2 jobs):
    :func:`mlse.train.head_training.train_stage2`."""

    stage1: str | None = option(None, "a Stage-1 scorer (run name or folder)", required=True)
    conv: bool = option(False, "1-D convolutional prelayer")
    nonlinearity: str = option("identity", "f of the cosine", choices=NONLINEARITIES)
    pairs: list[str] = option(help="STS Multi MT train pairs (the seed's six)", factory=lambda: list(STAGE2_PAIRS))
    lr: float | None = option(None, "learning rate (default: the head's own, mlse.heads.stage2)", gt=0)
    max_epochs: int | None = option(None, "epochs at most (default: the head's own)", ge=1)
    backend: str = option(
        DEFAULT_BACKEND, "runtime of the Stage-1 scorer's backbone: torch, onnx or onnx-int8", choices=BACKENDS
    )
    out: str | None = option(None, "run folder (default: under $MLSE_RUNS, named after the heads)")
    seed: int = option(0, "seed of the head")
    data_dir: str | None = option(None, "datasets folder (else $MLSE_DATA, else ../shared/data)")


def default_of(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls`` (a fresh list for a list field)."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default_factory() if f.default_factory is not MISSING else f.default


# ------------------------------------------------------------------------------------------- request -> configuration
def _settings(cls: type, options: dict) -> Any:
    """``cls(**options)`` where a left-out option, or None for a field that cannot be None, keeps the default; 0 is
    None for a ``zero_is_none`` field; an empty list keeps the default list."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"{cls.__name__} has no option {', '.join(unknown)}")
    values = {}
    for name, value in options.items():
        f = known[name]
        if f.metadata.get("zero_is_none") and value == 0 and not isinstance(value, bool):
            value = None
        if value is None and "None" not in str(f.type):
            continue
        if isinstance(value, (list, tuple)) and not value and f.default_factory is not MISSING:
            continue
        values[name] = list(value) if isinstance(value, tuple) else value
    return cls(**values)


def finetune_config(**options) -> FinetuneConfig:
    """The fine-tuning configuration of ``options`` (FinetuneConfig fields), as the command line and the app read them.

    The teacher defaults only where the method has a frozen teacher (``mse``, ``soft``); ``out`` defaults to
    :func:`default_out`. Not validated here (:func:`mlse.train.config_validation.validate`)."""
    config = _settings(FinetuneConfig, {k: v for k, v in options.items() if k != "teacher"})
    teacher = options.get("teacher")
    config.teacher = teacher or (DEFAULT_TEACHER if config.method in TEACHER_METHODS else None)
    config.out = config.out or default_out(config)
    return config


def default_out(config: FinetuneConfig) -> str:
    """Where a fine-tuning run goes when ``out`` is not given: ``$MLSE_RUNS/<student>+<method>``."""
    return str(runs_dir() / training_run_name(config.student, config.method))


def stage1_settings(**options) -> Stage1Settings:
    """A Stage-1 run of ``options`` (Stage1Settings fields); ``out`` defaults to the folder named after the heads."""
    settings = _settings(Stage1Settings, options)
    settings.out = settings.out or str(
        runs_dir() / training_run_name(settings.backbone, "stage1", prelayer=settings.prelayer)
    )
    return settings


def stage2_settings(**options) -> Stage2Settings:
    """A Stage-2 run of ``options`` (Stage2Settings fields); ``out`` defaults to the folder named after the heads."""
    settings = _settings(Stage2Settings, options)
    if not settings.stage1:
        raise MlseError("Stage 2 needs a Stage-1 scorer (a run name or folder)")
    settings.out = settings.out or str(
        runs_dir()
        / training_run_name(str(settings.stage1), "stage2", conv=settings.conv, nonlinearity=settings.nonlinearity)
    )
    return settings
