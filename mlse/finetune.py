"""Budgeted fine-tuning of a sentence-transformers student: MSE distillation, EMA teacher, soft / hard contrastive.

The three method families of issue 4, trained under a wall-clock budget on contamination-filtered Tatoeba-Challenge
bitext (English -> X; English is always the src / anchor side) and evaluated on STS Multi MT **dev** while training:

* ``mse``  -- Reimers & Gurevych 2020: ``MSE(s(src), t(src)) + MSE(s(tgt), t(src))`` with a frozen teacher
  (``include_src=False`` keeps only the second term).
* ``ema``  -- Ham & Kim 2021: the teacher is a copy of the student at step 0, run under ``no_grad`` in eval mode, and
  after every optimiser step ``xi <- tau xi + (1 - tau) theta`` with ``tau = ema_tau(k, K, tau_base)``. The loss is
  Ham & Kim's Eq. 1, ``MSE(s(tgt), t(src))`` (``include_src`` defaults to False here; True adds the src term).
  ``tau_base = 1`` is the frozen-teacher ablation. The ``teacher`` option must be empty or the student itself.
* ``soft`` -- Park et al. 2024: bidirectional contrastive loss with the frozen teacher's softmaxed similarities as
  labels (``label="priority"``: English side; ``"average"``: both sides, a multilingual teacher), plus TCM with weight
  ``tcm_alpha``. Teacher and student dimensions may differ.
* ``hard`` -- in-batch-negatives InfoNCE (the contrastive baseline); no teacher.

Frozen-teacher embeddings (``mse``, ``soft``) are computed once through :func:`mlse.encoders.load_encoder`, i.e. the
on-disk embedding cache, so a second run with the same teacher and data encodes nothing.

**Budget.** ``budget_minutes`` covers the training loop *and* the dev evaluations inside it; data loading, model
loading and teacher pre-encoding happen before the clock starts (reported as ``prepare_s``). A caller that needs a
budget over the whole run (the app's jobs) passes a :class:`mlse.stopping.StopSignal` (stop button + budget); it, or
the plain ``stop`` event, is asked in every phase: between data files, between chunks of teacher encoding and of dev
evaluation, and after every step. The total number of
steps ``K`` (for the 5 % linear learning-rate warm-up and the EMA schedule) is not known in advance: after every step
it is re-estimated as ``steps done + remaining budget / measured seconds per training step`` (evaluation time is
spent from the budget but not counted in seconds/step, so ``K`` overestimates slightly while evaluations remain),
capped by ``max_steps``. Before the first step is timed the estimate is ``max_steps`` or 10,000 (so the very first
step runs at a tiny learning rate). After the warm-up the learning rate stays constant: a budgeted run can stop at
any moment, so there is no decay to a known end.

**Output** (``out``, e.g. ``runs/NAME``; ``load_encoder("runs/NAME")`` and ``python -m mlse eval --model runs/NAME``
accept it)::

    out/model/                 the student at its best dev score (a sentence-transformers folder)
    out/finetune_config.json   the configuration (not ``config.json``: a ``config.json`` at the top of a folder makes
                               the registry take the folder itself for a plain transformers model)
    out/log.jsonl              one progress record per evaluation
    out/metrics.json           final and best dev scores, steps, speed, data counts

``out/model`` is written to a temporary sibling and renamed into place, so it is always either the previous good
checkpoint or the new one. A run stops at the budget, at ``max_steps``, when the ``stop`` event is set (the app's
stop button) or on KeyboardInterrupt (metrics are written, then the interrupt propagates). A run stopped before its
first training step raises :class:`mlse.stopping.Stopped` and leaves no model; one stopped later keeps its best
checkpoint and says ``"partial"`` in ``metrics.json``.

**GPU.** The same code runs on ``cuda`` when available (``MLSE_DEVICE`` or ``FinetuneConfig.device`` override).
Multi-GPU data parallelism is not implemented: ``accelerate launch`` would need the loop wrapped by an
``Accelerator`` (prepare model/optimiser, ``accelerator.backward``); see the report of this module's issue.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_dir
from mlse.data.bitext import load_filtered_bitext, seed_per_pair
from mlse.data.pairs import DEV_PAIRS, ENGLISH_PAIRS
from mlse.data.stsb import load_sts
from mlse.errors import MlseError
from mlse.runs import FINETUNE_CONFIG_FILE as CONFIG_FILE
from mlse.stopping import ShouldStop, Stopped, StopSignal, check, encode_in_chunks

log = logging.getLogger(__name__)

METHODS = ("mse", "ema", "soft", "hard")
LABELS = ("priority", "average")
PRECISIONS = ("auto", "fp32", "bf16")
VOCAB_INITS = ("aligned", "subword")
BRIDGES = ("none", "linear")
CLOCKS = ("wall", "cpu")
_BUCKET_BATCHES = 50  # batches per length-sorted chunk (bucket_by_length)
_ENGLISH = ("en", "eng")
_PROVISIONAL_STEPS = 10_000  # K before the first step has been timed


@dataclass
class FinetuneConfig:
    """Everything that defines a fine-tuning run (written to ``out/finetune_config.json``)."""

    method: str = "mse"
    teacher: str | None = "minilm-en"  # mse / soft: frozen teacher; ema: None or the student; hard: unused
    student: str = "minilm-en"
    pairs: list[str] = field(default_factory=lambda: list(ENGLISH_PAIRS))
    max_pairs: int | None = 5000  # per language pair, after the contamination filter (None: all)
    budget_minutes: float = 15.0
    batch_size: int = 64
    lr: float = 1e-4
    max_seq_length: int = 128
    eval_every_steps: int = 100
    dev_pairs: list[str] = field(default_factory=lambda: list(DEV_PAIRS))
    dev_max_pairs: int | None = None  # seeded subset of each dev pair (None: all ~1,500 rows)
    tau_base: float = 0.999  # ema; 1.0 = frozen teacher
    label: str = "priority"  # soft: "priority" | "average"
    temperature: float = 0.1  # soft / hard (Park et al.'s released default)
    tcm_alpha: float = 0.0  # soft: weight of the mono-lingual TCM term
    include_src: bool | None = None  # mse / ema: also MSE(s(src), t(src)); None: mse True, ema False
    seed: int = 0
    out: str = "runs/finetune"
    max_steps: int | None = None  # stop after this many steps even if budget is left
    eval_at_start: bool = True  # evaluate (and save) the untouched student first: the curve starts at the baseline
    warmup_fraction: float = 0.05
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    data_dir: str | None = None
    device: str | None = None  # default: cuda when available, else cpu
    extend_vocab: int = 0  # > 0: learn a WordPiece vocabulary of this size on the tgt side and add it (mlse.vocab)
    vocab_init: str = "aligned"  # new-piece embeddings: "aligned" (parallel-data Dice) or "subword"
    precision: str = "auto"  # "fp32" | "bf16" (autocast of the transformer) | "auto": bf16 where the device has it
    bucket_by_length: bool = True  # batches of similar length (less padding); batch order stays random
    freeze_embeddings: bool = False  # keep the token embedding matrix fixed (e5: 96M of its 118M weights)
    lora_r: int = 0  # > 0: train LoRA adapters of this rank instead of the transformer's weights (mlse.lora)
    lora_alpha: float | None = None  # LoRA scale numerator (None: 2 * lora_r)
    bridge: str = "none"  # mse: "linear" appends a least-squares map from the student's space to the teacher's
    bridge_sentences: int = 5000  # English training sentences the bridge is fitted on
    # "cpu": the budget (and the step-time estimate) counts the process's CPU seconds divided by its torch threads, so
    # runs sharing a machine with other work still get equal compute; "wall": seconds on the clock (the app's jobs)
    budget_clock: str = "wall"

    def src_term(self) -> bool:
        """Whether the MSE losses include the src term (the method's default unless set)."""
        return self.include_src if self.include_src is not None else self.method == "mse"


@dataclass
class TrainingData:
    """Shuffled translation pairs; ``src`` is English."""

    src: list[str]
    tgt: list[str]
    info: dict


# ------------------------------------------------------------------------------------------------------- validation
def validate(cfg: FinetuneConfig) -> None:
    """Refuse a configuration that cannot run, with a message naming the option (before anything is loaded)."""
    if cfg.method not in METHODS:
        raise MlseError(f"unknown fine-tuning method {cfg.method!r}; expected one of {', '.join(METHODS)}")
    if cfg.label not in LABELS:
        raise MlseError(f"unknown soft label {cfg.label!r}; expected one of {', '.join(LABELS)}")
    if cfg.precision not in PRECISIONS:
        raise MlseError(f"unknown precision {cfg.precision!r}; expected one of {', '.join(PRECISIONS)}")
    if cfg.vocab_init not in VOCAB_INITS:
        raise MlseError(f"unknown vocab_init {cfg.vocab_init!r}; expected one of {', '.join(VOCAB_INITS)}")
    if cfg.bridge not in BRIDGES:
        raise MlseError(f"unknown bridge {cfg.bridge!r}; expected one of {', '.join(BRIDGES)}")
    if cfg.budget_clock not in CLOCKS:
        raise MlseError(f"unknown budget_clock {cfg.budget_clock!r}; expected one of {', '.join(CLOCKS)}")
    checks = [
        (cfg.extend_vocab == 0 or cfg.extend_vocab > 100, f"extend_vocab must be 0 or > 100, got {cfg.extend_vocab}"),
        (cfg.batch_size >= 1, f"batch_size must be >= 1, got {cfg.batch_size}"),
        (cfg.lr > 0, f"lr must be > 0, got {cfg.lr}"),
        (cfg.budget_minutes > 0, f"budget_minutes must be > 0, got {cfg.budget_minutes}"),
        (cfg.eval_every_steps >= 1, f"eval_every_steps must be >= 1, got {cfg.eval_every_steps}"),
        (cfg.max_seq_length >= 8, f"max_seq_length must be >= 8, got {cfg.max_seq_length}"),
        (cfg.max_pairs is None or cfg.max_pairs >= 0, f"max_pairs must be >= 0, got {cfg.max_pairs}"),
        (cfg.max_steps is None or cfg.max_steps >= 1, f"max_steps must be >= 1, got {cfg.max_steps}"),
        (0.0 <= cfg.tau_base <= 1.0, f"tau_base must be in [0, 1], got {cfg.tau_base}"),
        (cfg.temperature > 0, f"temperature must be > 0, got {cfg.temperature}"),
        (cfg.tcm_alpha >= 0, f"tcm_alpha must be >= 0, got {cfg.tcm_alpha}"),
        (bool(cfg.pairs), "no training pairs given"),
        (cfg.lora_r >= 0, f"lora_r must be >= 0, got {cfg.lora_r}"),
        (cfg.lora_alpha is None or cfg.lora_alpha > 0, f"lora_alpha must be > 0, got {cfg.lora_alpha}"),
        (cfg.bridge_sentences >= 2, f"bridge_sentences must be >= 2, got {cfg.bridge_sentences}"),
        (cfg.bridge == "none" or cfg.method == "mse",
         f"bridge {cfg.bridge!r} maps the student into a frozen teacher's space: only method 'mse' has one"),
        (not cfg.extend_vocab or not (cfg.lora_r or cfg.freeze_embeddings),
         "extend_vocab adds token embeddings that must train: it cannot go with lora_r or freeze_embeddings"),
        (bool(cfg.dev_pairs), "no dev pairs given"),
    ]
    for ok, message in checks:
        if not ok:
            raise MlseError(message)
    refuse_frozen_student(cfg.student)
    if cfg.method in ("mse", "soft") and not cfg.teacher:
        raise MlseError(f"method {cfg.method!r} needs a teacher model")
    if cfg.method == "ema" and cfg.teacher and cfg.teacher != cfg.student:
        raise MlseError(
            f"method 'ema': the teacher is an EMA copy of the student ({cfg.student!r}); "
            f"leave the teacher out or set it to the student, not {cfg.teacher!r}"
        )


# ------------------------------------------------------------------------------------------------------------- data
def english_first(pair: str) -> tuple[str, str]:
    """``"de-en"`` -> ``("en", "de")``: English is the anchor (src) side whenever it is in the pair."""
    a, sep, b = pair.strip().partition("-")
    if not sep or not a or not b:
        raise MlseError(f"bad language pair {pair!r}; expected e.g. en-de")
    if b.lower() in _ENGLISH and a.lower() not in _ENGLISH:
        a, b = b, a
    return a, b


def prepare_data(cfg: FinetuneConfig, should_stop: ShouldStop | None = None) -> TrainingData:
    """Contamination-filtered English-X pairs (:func:`mlse.data.bitext.load_filtered_bitext`), each pair capped at
    ``max_pairs`` (pair ``i`` sampled with seed ``[seed, i]``), all shuffled together."""
    pairs = ["-".join(english_first(pair)) for pair in cfg.pairs]
    bitext = load_filtered_bitext(pairs, max_pairs=cfg.max_pairs, sample_seed=seed_per_pair(cfg.seed),
                                  data_dir=cfg.data_dir, should_stop=should_stop, label="finetune data")  # fmt: skip
    src, tgt, info = bitext.src, bitext.tgt, bitext.info
    if not src:
        raise MlseError(
            f"no training pairs left after the contamination filter and max_pairs={cfg.max_pairs} "
            f"(pairs: {', '.join(cfg.pairs)})"
        )
    order = np.random.default_rng(cfg.seed).permutation(len(src))
    info["n_pairs"] = len(src)
    return TrainingData([src[j] for j in order], [tgt[j] for j in order], info)


@dataclass
class DevSet:
    """STS Multi MT dev pairs flattened: unique texts once, and per pair the rows of s1 / s2 in ``texts``."""

    texts: list[str]
    pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # pair -> (s1 rows [n], s2 rows [n], gold [n])


def load_dev(pairs: Sequence[str], data_dir: str | None, max_rows: int | None, seed: int) -> DevSet:
    """Dev pairs for the in-training score; the texts are deduplicated (en-xx pairs share their English side)."""
    index: dict[str, int] = {}
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for pair in pairs:
        ds = load_sts(pair, "dev", data_dir)
        rows = np.arange(len(ds.scores))
        if max_rows and len(rows) > max_rows:
            rows = np.sort(np.random.default_rng(seed).choice(len(rows), max_rows, replace=False))
        s1 = np.array([index.setdefault(ds.s1[r], len(index)) for r in rows])
        s2 = np.array([index.setdefault(ds.s2[r], len(index)) for r in rows])
        out[pair] = (s1, s2, ds.scores[rows].astype(np.float64))
    return DevSet(list(index), out)


def refuse_frozen_student(name: str) -> None:
    """A ``native`` model (``muse``: numpy weights, no gradients) cannot be a student; say what can.

    Only the registry is consulted (no model is loaded); a name that does not resolve is left to the loading step,
    whose message lists what is available.
    """
    from mlse.encoders.registry import registry, resolve_model, spec_status

    try:
        spec = resolve_model(name)
    except MlseError:
        return
    if spec.source != "native":
        return
    from mlse.encoders.use import refuse_as_student

    trainable = [s.name for s in registry().values() if s.source != "native" and spec_status(s).startswith("available")]
    raise refuse_as_student(spec.name, [*trainable, "any sentence-transformers folder or run"])


# ----------------------------------------------------------------------------------------------------------- models
def load_student(name: str, device: str, max_seq_length: int):
    """The student as a trainable ``SentenceTransformer`` (a plain model folder; scorers have frozen backbones)."""
    from mlse.encoders.registry import materialise, resolve_model
    from mlse.encoders.torch import load_sentence_transformer

    refuse_frozen_student(name)
    spec = resolve_model(name)
    if spec.source == "scorer":
        raise MlseError(f"student {name!r} is a scorer (backbone + heads); give a plain sentence-transformers model")
    model = load_sentence_transformer(materialise(spec), device=device)
    model.max_seq_length = max_seq_length
    model.train()
    return model


def student_dim(student) -> int:
    """Output dimension; encodes one text when the model cannot tell (e.g. a custom last module)."""
    dim = student.get_embedding_dimension()
    if dim:
        return int(dim)
    return int(student.encode(["x"], convert_to_numpy=True).shape[1])


def teacher_targets(
    cfg: FinetuneConfig, data: TrainingData, dim: int, device: str, should_stop: ShouldStop | None = None
) -> tuple:
    """Frozen-teacher embeddings (mse, soft): ``(t(src) [N, d_t], t(tgt) [N, d_t] or None, info)``.

    Encoded once through the embedding cache (unnormalised: MSE targets are the teacher's raw outputs, and the soft
    labels are cosines, which ignore the norm). The dimension check runs on one text before the bulk encoding.
    """
    from mlse.models import load_model

    if cfg.method not in ("mse", "soft"):
        return None, None, {}
    teacher = load_model(cfg.teacher, device=device)  # the same cache entries as `mlse eval` of the teacher
    probe = teacher.encode(data.src[:1], normalize=False)  # [1, d_t]
    if cfg.method == "mse" and cfg.bridge == "none" and probe.shape[1] != dim:
        raise MlseError(
            f"method 'mse' needs equal teacher and student dimensions: teacher {cfg.teacher!r} is {probe.shape[1]}-d, "
            f"student {cfg.student!r} is {dim}-d (use 'soft' or 'hard', --bridge linear, or a student of the "
            f"teacher's dimension)"
        )
    t0 = time.perf_counter()
    def targets(texts: list[str]) -> np.ndarray:  # stoppable between chunks; finished chunks stay cached
        return encode_in_chunks(teacher, texts, should_stop=should_stop, batch_size=cfg.batch_size, normalize=False)

    t_src = targets(data.src)  # [N, d_t]
    t_tgt = None
    if cfg.method == "soft" and cfg.label == "average":
        t_tgt = targets(data.tgt)  # [N, d_t]
    info = {
        "teacher_identity": teacher.identity,
        "teacher_dim": int(probe.shape[1]),
        "teacher_encode_s": round(time.perf_counter() - t0, 2),
        "teacher_cache": dict(getattr(teacher, "stats", {})),
    }
    return t_src, t_tgt, info


def build_loss(cfg: FinetuneConfig, student):
    """The loss module of ``cfg.method`` (all take ``(src_features, tgt_features, teacher_src, teacher_tgt)``).

    ``student``: the model, or any callable ``features -> {"sentence_embedding": [B, d]}`` (e.g. AutocastForward).
    """
    from mlse.losses.contrastive import HardContrastiveLoss
    from mlse.losses.mse import MSEDistillLoss
    from mlse.losses.soft_contrastive import SoftContrastiveLoss

    if cfg.method in ("mse", "ema"):
        return MSEDistillLoss(student, include_src=cfg.src_term())
    if cfg.method == "soft":
        return SoftContrastiveLoss(student, label=cfg.label, temperature=cfg.temperature, tcm_alpha=cfg.tcm_alpha)
    return HardContrastiveLoss(student, temperature=cfg.temperature)


def parameter_checksum(module) -> str:
    """sha256 (16 hex digits) over a module's parameter names and bytes: equal iff every weight is bit-identical."""
    digest = hashlib.sha256()
    for name, param in sorted(module.named_parameters(), key=lambda kv: kv[0]):
        digest.update(name.encode() + b"\0")
        digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def tokenize(student, texts: list[str], device: str) -> dict:
    """Model inputs of ``texts`` on ``device``: ``preprocess`` in sentence-transformers >= 6, else ``tokenize``.

    The student's own prefix (e5's ``"query: "``) goes first, as ``encode`` adds it at evaluation time: training
    and evaluation must see the same text.
    """
    from mlse.encoders.identity import text_prefix

    prefix = text_prefix(student)
    if prefix:
        texts = [prefix + t for t in texts]
    prepare = getattr(student, "preprocess", None) or student.tokenize
    return to_device(prepare(texts), device)


def to_device(features: dict, device: str) -> dict:
    """Move the tensors of a tokenizer output to ``device`` (other entries pass through)."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def resolve_precision(precision: str, device: str) -> str:
    """``"auto"`` -> ``"bf16"`` where the device computes bfloat16 natively (AVX-512-BF16 / AMX CPUs, Ampere+ GPUs)."""
    import torch

    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"
    if device == "cpu":
        try:
            return "bf16" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"
        except (AttributeError, RuntimeError):
            return "fp32"
    return "fp32"


class AutocastForward:
    """Call a sentence-transformers model with its first module (the transformer) under bf16 autocast.

    The pooling / normalisation modules and everything after run in float32 on float32 token embeddings, so the
    losses see float32 sentence embeddings; the weights and optimiser state stay float32 (mixed precision). With
    ``dtype=None`` it is the plain model call.
    """

    def __init__(self, model, device: str, dtype=None):
        self.model, self.device_type, self.dtype = model, device.split(":")[0], dtype

    def __call__(self, features: dict) -> dict:
        import torch

        if self.dtype is None:
            return self.model(features)
        with torch.autocast(self.device_type, dtype=self.dtype):
            out = self.model[0](features)
        out = dict(out)
        out["token_embeddings"] = out["token_embeddings"].float()  # [B, L, d]
        for module in list(self.model)[1:]:
            out = module(out)
        return out


def dev_scores(student, dev: DevSet, batch_size: int, should_stop: ShouldStop | None = None) -> dict[str, float]:
    """Spearman x 100 of the cosine per dev pair; the student is encoded in eval mode and put back in train mode.

    ``should_stop`` is asked between chunks of the dev texts (:class:`~mlse.stopping.Stopped` abandons the evaluation).
    """
    import torch

    from mlse.evaluation.sts import cosine_predictions, sts_metrics

    student.eval()
    try:
        with torch.no_grad():
            emb = encode_in_chunks(student, dev.texts, should_stop=should_stop, batch_size=batch_size,
                                   convert_to_numpy=True, show_progress_bar=False,
                                   normalize_embeddings=True)  # [n_texts, d]  # fmt: skip
    finally:
        student.train()
    return {
        pair: sts_metrics(cosine_predictions(emb[s1], emb[s2]), gold, n_boot=0)["spearman"]
        for pair, (s1, s2, gold) in dev.pairs.items()
    }


def save_model_atomically(student, folder: Path) -> None:
    """Save into a temporary sibling, then rename over ``folder``: a reader never sees a half-written model.

    A LoRA student is saved with its adapter merged: the folder is an ordinary sentence-transformers model.
    """
    from mlse.lora import merged_copy

    with atomic_dir(folder) as tmp:
        merged_copy(student).save(str(tmp), create_model_card=False)


def save_checkpoint(student, out: Path, base_modules: int) -> None:
    """The best student so far: ``out/model`` (merged) and, for a LoRA student, ``out/adapter`` (adapter + the
    modules appended after the base model's first ``base_modules``, e.g. a bridge)."""
    from mlse.lora import has_lora, save_adapter

    save_model_atomically(student, out / "model")
    if has_lora(student):
        with atomic_dir(out / "adapter") as tmp:
            save_adapter(student, tmp, extra_from=base_modules)


def cpu_clock() -> Callable[[], float]:
    """Seconds of CPU time of this process divided by torch's thread count: on an idle machine it runs at the wall
    clock's pace; on a shared one it slows down with the share of the cores the process gets."""
    import torch

    threads = max(1, torch.get_num_threads())
    return lambda: time.process_time() / threads


def fit_bridge(cfg: FinetuneConfig, student, data: TrainingData, t_src: np.ndarray) -> dict:
    """Append a linear map from the student's outputs to the teacher's, fitted on English training sentences."""
    from mlse.bridge import dense_layer, fit_linear_map, r2_score

    n = min(cfg.bridge_sentences, len(data.src))
    student.eval()
    try:
        source = student.encode(data.src[:n], batch_size=cfg.batch_size, convert_to_numpy=True,
                                show_progress_bar=False, normalize_embeddings=False)  # [n, d_s]  # fmt: skip
    finally:
        student.train()
    w, b = fit_linear_map(source, t_src[:n])
    dense = dense_layer(w, b).to(next(student.parameters()).device)
    student.append(dense)
    return {"bridge": {"kind": cfg.bridge, "sentences": n, "r2": round(r2_score(source, t_src[:n], w, b), 4),
                       "dims": [int(w.shape[0]), int(w.shape[1])]}}  # fmt: skip


def restrict_training(cfg: FinetuneConfig, student) -> dict:
    """Freeze the token embeddings and/or wrap the transformer in LoRA adapters, as configured."""
    from mlse.lora import apply_lora, trainable_parameters

    if cfg.freeze_embeddings:
        student[0].auto_model.get_input_embeddings().weight.requires_grad_(False)
    if cfg.lora_r:
        apply_lora(student, cfg.lora_r, cfg.lora_alpha)
    return {"trainable_parameters": trainable_parameters(student),
            "parameters": sum(p.numel() for p in student.parameters())}  # fmt: skip


def _write_json(path: Path, obj: dict) -> None:
    from mlse.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1, default=str, allow_nan=False) + "\n")


def _finite(x: float | None) -> float | None:
    """NaN / inf -> None, so that JSON files stay standard."""
    return None if x is None or not math.isfinite(x) else float(x)


# ---------------------------------------------------------------------------------------------------------- trainer
def epoch_batches(n: int, batch_size: int, rng: np.random.Generator, lengths: np.ndarray | None = None,
                  chunk_batches: int = _BUCKET_BATCHES) -> list[np.ndarray]:  # fmt: skip
    """One epoch of batches over ``range(n)``: every index exactly once, a short last batch kept.

    Without ``lengths``: consecutive slices of a seeded permutation. With ``lengths`` (length bucketing): the
    permutation is cut into chunks of ``chunk_batches`` batches, each chunk is sorted by length before it is cut into
    batches, and the batch order is shuffled, so a batch pads to a similar length (less wasted compute) while which
    sentences meet in a batch, and when, stays random.
    """
    order = rng.permutation(n)
    if lengths is not None:
        chunks = np.array_split(order, max(1, math.ceil(n / (batch_size * chunk_batches))))
        order = np.concatenate([c[np.argsort(lengths[c], kind="stable")] for c in chunks])
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if lengths is not None:
        batches = [batches[j] for j in rng.permutation(len(batches))]
    return batches


class _Run:
    """One training run's state: the loop, the budget clock, evaluation, checkpointing and logging."""

    def __init__(self, cfg: FinetuneConfig, student, data: TrainingData, targets: tuple, dev: DevSet, device: str,
                 progress: Callable[[dict], None] | None, stop: threading.Event | None, ctx=None,
                 signal: StopSignal | None = None, base_modules: int = 0):  # fmt: skip
        import torch

        from mlse.distributed import DistContext

        self.cfg, self.student, self.data, self.dev, self.device = cfg, student, data, dev, device
        self.ctx = ctx or DistContext()
        self.t_src, self.t_tgt = targets
        self.progress, self.stop, self.signal = progress, stop, signal
        self.should_stop = signal.should_stop if signal is not None else None
        self.out = Path(cfg.out)
        self.precision = resolve_precision(cfg.precision, device)
        dtype = torch.bfloat16 if self.precision == "bf16" else None
        self.loss_fn = build_loss(cfg, AutocastForward(student, device, dtype))
        self.base_modules = base_modules or len(student)
        trainable = [p for p in student.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.clock = cpu_clock() if cfg.budget_clock == "cpu" else time.perf_counter
        self.ema_teacher = None
        if cfg.method == "ema":
            self.ema_teacher = copy.deepcopy(student).eval().requires_grad_(False)
        self.teacher_forward = AutocastForward(self.ema_teacher, device, dtype) if self.ema_teacher else None
        self.rng = np.random.default_rng([cfg.seed, self.ctx.rank] if self.ctx.active else cfg.seed)
        self.queue: list[np.ndarray] = []
        self._lengths: np.ndarray | None = None
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
        self.total_steps = cfg.max_steps or _PROVISIONAL_STEPS
        self.tau = 1.0
        self.started = 0.0
        self.wall_started = 0.0

    # -- batches and schedules ---------------------------------------------------------------------------------------
    def next_batch(self) -> np.ndarray:
        """Indices of the next batch; a fresh seeded epoch of batches (:func:`epoch_batches`) when the last is used."""
        if not self.queue:
            if self.cfg.bucket_by_length and self._lengths is None:
                # characters of the longer side: a cheap proxy of the padded token length
                self._lengths = np.array([max(len(a), len(b)) for a, b in zip(self.data.src, self.data.tgt)])
            lengths = self._lengths if self.cfg.bucket_by_length else None
            self.queue = epoch_batches(len(self.data.src), self.cfg.batch_size, self.rng, lengths)[::-1]
        return self.queue.pop()

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
    def teacher_batch(self, idx: np.ndarray, src_features: dict):
        """Teacher embeddings of the batch: precomputed rows, or the EMA teacher's forward under no_grad."""
        import torch

        if self.ema_teacher is not None:
            with torch.no_grad():
                return self.teacher_forward(src_features)["sentence_embedding"], None  # [B, d]
        if self.t_src is None:
            return None, None
        t_src = torch.from_numpy(np.ascontiguousarray(self.t_src[idx])).to(self.device)  # [B, d_t]
        t_tgt = None if self.t_tgt is None else torch.from_numpy(np.ascontiguousarray(self.t_tgt[idx])).to(self.device)
        return t_src, t_tgt

    def train_step(self) -> None:
        import torch

        t0 = self.clock()
        idx = self.next_batch()
        src_features = tokenize(self.student, [self.data.src[i] for i in idx], self.device)
        tgt_features = tokenize(self.student, [self.data.tgt[i] for i in idx], self.device)
        teacher_src, teacher_tgt = self.teacher_batch(idx, src_features)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(self.step)
        loss = self.loss_fn(src_features, tgt_features, teacher_src, teacher_tgt)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        from mlse.distributed import average_gradients

        average_gradients(self.student, self.ctx)  # no-op in a single process
        torch.nn.utils.clip_grad_norm_(self.student.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        if self.ema_teacher is not None:
            from mlse.losses.ema import ema_tau, ema_update

            self.tau = ema_tau(self.step, self.total_steps, self.cfg.tau_base)
            ema_update(self.ema_teacher, self.student, self.tau)
        self.step += 1
        self.pairs_seen += len(idx) * self.ctx.world  # every rank trains on its own batch
        embeds_src = self.cfg.method in ("soft", "hard") or self.cfg.src_term()
        self.sentences += len(idx) * (2 if embeds_src else 1) * self.ctx.world
        self.losses.append(float(loss.detach()))
        self.train_s += self.clock() - t0
        self.total_steps = self.estimate_total_steps()

    # -- evaluation, checkpoint, log ---------------------------------------------------------------------------------
    def evaluate(self) -> dict:
        """Score on dev, save the student when the score improves, log and report one progress record.

        Only rank 0 evaluates and writes; the other ranks wait for it at the next gradient all-reduce.
        """
        if not self.ctx.is_main:
            self.last_eval_step = self.step
            return {}
        t0 = self.clock()
        try:
            self.last_dev = dev_scores(self.student, self.dev, self.cfg.batch_size, self.should_stop)
        except Stopped:  # abandoned half-way: the checkpoint on disk stays the best so far
            self.eval_s += self.clock() - t0
            return {}
        mean = float(np.mean(list(self.last_dev.values())))
        saved = math.isfinite(mean) and mean > self.best
        if saved:
            self.best, self.best_step = mean, self.step
            save_checkpoint(self.student, self.out, self.base_modules)
        self.eval_s += self.clock() - t0
        self.last_eval_step = self.step
        record = {
            "step": self.step,
            "epoch": round(self.pairs_seen / len(self.data.src), 4),
            "loss": _finite(float(np.mean(self.losses))) if self.losses else None,
            "elapsed_s": round(self.elapsed(), 2),
            "wall_s": round(time.perf_counter() - self.wall_started, 2),
            "dev_spearman": _finite(mean),
            "best_dev_spearman": _finite(self.best),
            "dev": {k: _finite(v) for k, v in self.last_dev.items()},
            "lr": self.lr_at(max(self.step - 1, 0)),
            "estimated_total_steps": self.total_steps,
            "sentences_per_s": round(self.sentences / self.train_s, 2) if self.train_s else None,
            "saved": saved,
        }
        if self.ema_teacher is not None:
            record["tau"] = self.tau
        self.losses = []
        with open(self.out / "log.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.progress is not None:
            self.progress(record)
        return record

    def stop_reason(self) -> str | None:
        """Why to stop now (None: go on); with several processes rank 0 decides for all (it owns the clock)."""
        reason = None
        if self.stop is not None and self.stop.is_set():
            reason = "stopped"
        elif self.signal is not None and self.signal.reason():  # the stop button, or the whole job's budget
            reason = self.signal.reason()
        elif self.cfg.max_steps is not None and self.step >= self.cfg.max_steps:
            reason = "max_steps"
        elif self.elapsed() >= self.cfg.budget_minutes * 60:
            reason = "budget"
        if self.ctx.active:
            from mlse.distributed import agree

            reasons = [None, "stopped", "max_steps", "budget"]
            reason = reasons[agree(self.ctx, reasons.index(reason), self.device)]
        return reason

    def loop(self) -> str:
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
        mean = float(np.mean(list(self.last_dev.values()))) if self.last_dev else math.nan
        out = {
            "method": self.cfg.method,
            "stop_reason": reason,
            "final_dev_spearman": _finite(mean),
            "final_dev": {k: _finite(v) for k, v in self.last_dev.items()},
            "final_dev_step": self.last_eval_step,
            "best_dev_spearman": _finite(self.best),
            "best_step": self.best_step,
            "steps": self.step,
            "epochs": round(self.pairs_seen / len(self.data.src), 4),
            "pairs_seen": self.pairs_seen,
            "sentences_per_s": round(self.sentences / self.train_s, 2) if self.train_s else None,
            "pairs_per_s": round(self.pairs_seen / self.train_s, 2) if self.train_s else None,
            "train_s": round(self.train_s, 2),
            "eval_s": round(self.eval_s, 2),
            "elapsed_s": round(self.elapsed(), 2),
            "wall_s": round(time.perf_counter() - self.wall_started, 2),
            "budget_clock": self.cfg.budget_clock,
            "estimated_total_steps": self.total_steps,
            "device": self.device,
            "precision": self.precision,
            "n_pairs": len(self.data.src),
            "data": self.data.info["pairs"],
            "dropped": {p: v["contaminated_dropped"] for p, v in self.data.info["pairs"].items()},
        }
        if self.ema_teacher is not None:
            out["tau_final"] = self.tau
            out["teacher_checksum_end"] = parameter_checksum(self.ema_teacher)
        return out


# -------------------------------------------------------------------------------------------------------- public API
def finetune(
    config: FinetuneConfig,
    *,
    progress: Callable[[dict], None] | None = None,
    stop: threading.Event | None = None,
    signal: StopSignal | None = None,
) -> dict:
    """Train ``config.student`` by ``config.method`` within the budget and write the run to ``config.out``.

    ``progress`` receives one record per evaluation (``step, epoch, loss, elapsed_s, dev_spearman,
    best_dev_spearman``, plus per-pair ``dev``, ``lr``, ``sentences_per_s``, ``saved`` and for EMA ``tau``); setting
    ``stop`` ends the run after the current step. ``signal`` (a stop event plus a budget over the whole call) is asked
    in every phase, from data loading on (see the module docstring). Returns the final metrics (also in
    ``out/metrics.json``).

    Started by ``torchrun`` / ``accelerate launch`` (``WORLD_SIZE > 1``), every process trains on its own batches
    with averaged gradients (:mod:`mlse.distributed`); rank 0 evaluates, saves and writes the run folder.
    """
    from mlse.distributed import barrier, init_from_env, shutdown

    validate(config)
    ctx = init_from_env(config.device or _default_device())
    try:
        metrics = _finetune(config, ctx, progress, stop, signal)
        # Leave together: a rank that tears the process group down while rank 0 still writes the run folder can
        # abort in gloo's teardown ("terminate called without an active exception", seen once in CI).
        barrier(ctx)
        return metrics
    finally:
        shutdown(ctx)


def _default_device() -> str:
    from mlse.encoders.torch import default_device

    return default_device()


def _finetune(config: FinetuneConfig, ctx, progress, stop, signal: StopSignal | None = None) -> dict:
    import torch

    from mlse.distributed import barrier, broadcast_parameters, main_first, rank_device

    prepare_started = time.perf_counter()
    device = rank_device(ctx, config.device or _default_device())
    torch.manual_seed(config.seed)
    out = Path(config.out)
    if signal is None and stop is not None:  # the stop event alone also ends the preparation phases
        signal = StopSignal(stop)
    halt = signal.should_stop if signal is not None else None
    data = prepare_data(config, halt)
    check(halt, "loading the student model")
    initial = out / ".initial-model"  # several processes: rank 0's extended student, loaded by the others
    with main_first(ctx):
        if ctx.is_main:
            student = load_student(config.student, device, config.max_seq_length)
            vocab_info = _extend(config, student, data) if config.extend_vocab else {}
            if config.extend_vocab and ctx.active:
                save_model_atomically(student, initial)
        else:  # the same tokenizer and weights as rank 0 (a re-learned vocabulary could differ)
            student = load_student(str(initial) if config.extend_vocab else config.student, device,
                                   config.max_seq_length)  # fmt: skip
            vocab_info = {}
    broadcast_parameters(student, ctx)
    check(halt, "preparing the student")
    with main_first(ctx):  # rank 0 fills the embedding cache with the teacher's targets; the others then read it
        t_src, t_tgt, teacher_info = teacher_targets(config, data, student_dim(student), device, halt)
    base_modules = len(student)
    if config.bridge != "none":  # every rank fits the same map on the same sentences and weights
        check(halt, "fitting the bridge")
        teacher_info |= fit_bridge(config, student, data, t_src)
    teacher_info |= restrict_training(config, student)
    check(halt, "loading the dev data")
    dev = load_dev(config.dev_pairs, config.data_dir, config.dev_max_pairs, config.seed)
    if ctx.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "log.jsonl").write_text("")  # a new run starts a new log
    barrier(ctx)
    run = _Run(config, student, data, (t_src, t_tgt), dev, device, progress, stop, ctx, signal, base_modules)
    start_checksum = parameter_checksum(run.ema_teacher) if run.ema_teacher is not None else None
    record = {**asdict(config), "include_src_effective": config.src_term(), "device": device,
              "precision_effective": run.precision, "world_size": ctx.world, **teacher_info, **vocab_info}  # fmt: skip
    if ctx.is_main:
        _write_json(out / CONFIG_FILE, record | {"data_files": data.info["data"], "versions": _versions()})
    prepare_s = time.perf_counter() - prepare_started
    try:
        reason = run.loop()
    except KeyboardInterrupt:
        _finish(run, "interrupted", prepare_s, start_checksum, final_eval=False)
        raise
    if run.step == 0 and halt is not None and halt():  # stopped before any training: nothing worth keeping
        if ctx.is_main:
            shutil.rmtree(out, ignore_errors=True)
        raise Stopped("stopped before the first training step")
    # a stop, or the caller's budget, ends the run now: no extra evaluation after it
    return _finish(run, reason, prepare_s, start_checksum, final_eval=halt is None or not halt())


def _extend(config: FinetuneConfig, student, data: TrainingData) -> dict:
    from mlse.vocab import extend_model_vocabulary

    report = extend_model_vocabulary(student, data.tgt, vocab_size=config.extend_vocab, parallel=(data.src, data.tgt),
                                     init=config.vocab_init)  # fmt: skip
    return {"vocab_extension": vars(report)}


def _finish(run: _Run, reason: str, prepare_s: float, start_checksum: str | None, *, final_eval: bool) -> dict:
    """Last evaluation (unless the last step was just evaluated), a model on disk in any case, metrics.json.

    Ranks other than 0 write nothing and return their own metrics (``rank`` set).
    """
    from mlse.distributed import gather

    if not run.ctx.is_main:
        checksum = parameter_checksum(run.student)
        gather(run.ctx, checksum)  # rank 0 records every rank's checksum (collective: every rank takes part)
        return run.metrics(reason) | {"rank": run.ctx.rank, "world_size": run.ctx.world,
                                      "parameter_checksum": checksum}  # fmt: skip
    shutil.rmtree(run.out / ".initial-model", ignore_errors=True)
    if final_eval and run.last_eval_step != run.step:
        run.evaluate()
    if not (run.out / "model").is_dir():  # no finite dev score ever (or interrupted before the first evaluation)
        save_checkpoint(run.student, run.out, run.base_modules)
    metrics = run.metrics(reason) | {"prepare_s": round(prepare_s, 2), "world_size": run.ctx.world}
    if reason in ("stopped", "interrupted"):  # ended by hand before its budget: usable, but say how far it got
        metrics["partial"] = {"reason": reason, "steps": run.step, "best_step": run.best_step}
    if run.ctx.active:  # equal checksums on every rank: the ranks trained one model together
        metrics["parameter_checksum"] = parameter_checksum(run.student)
        metrics["rank_checksums"] = gather(run.ctx, metrics["parameter_checksum"])
    if start_checksum is not None:
        metrics["teacher_checksum_start"] = start_checksum
    _write_json(run.out / "metrics.json", metrics)
    log.info("finetune %s: %s after %d steps, best dev %.2f at step %s", run.cfg.method, reason, run.step,
             run.best, run.best_step)  # fmt: skip
    return metrics


def _versions() -> dict[str, str]:
    import sentence_transformers
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__}  # fmt: skip
