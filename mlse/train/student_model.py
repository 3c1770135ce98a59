"""The student of a fine-tuning run: loading it, tokenising for it, its precision, the recipes that reshape it before
training (vocabulary extension, a linear bridge into the teacher's space, frozen embeddings, LoRA adapters), and its
checkpoints (:func:`save_checkpoint`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_dir
from mlse.encoders.catalogue import materialise, resolve_model
from mlse.encoders.identity import text_prefix
from mlse.encoders.torch import load_sentence_transformer
from mlse.errors import MlseError
from mlse.train.config import FinetuneConfig
from mlse.train.config_validation import refuse_frozen_student
from mlse.train.finetune_data import TrainingData, student_embeddings
from mlse.train.recipes.bridge import dense_layer, fit_linear_map, r2_score
from mlse.train.recipes.lora import apply_lora, has_lora, merged_copy, save_adapter, trainable_parameters
from mlse.train.recipes.vocab import extend_model_vocabulary


def load_student(name: str, device: str, max_seq_length: int):
    """The student as a trainable ``SentenceTransformer`` (a plain model folder; scorers have frozen backbones)."""
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
    return int(student.get_embedding_dimension() or student.encode(["x"], convert_to_numpy=True).shape[1])


def tokenize(student, texts: list[str], device: str) -> dict:
    """Model inputs of ``texts`` on ``device``: ``preprocess`` in sentence-transformers >= 6, else ``tokenize``.

    The student's own prefix (e5's ``"query: "``) goes first, as ``encode`` adds it at evaluation time."""
    prefix = text_prefix(student)  # "" when the model has none
    prepare = getattr(student, "preprocess", None) or student.tokenize
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in prepare([prefix + t for t in texts]).items()}


class AutocastForward:
    """Call a sentence-transformers model with its first module (the transformer) under autocast to ``dtype``
    (bfloat16 or float16).

    Pooling and later modules run in float32, so the losses see float32 sentence embeddings; weights and optimiser
    state stay float32. With ``dtype=None`` it is the plain model call.
    """

    def __init__(self, model, device: str, dtype=None):
        self.model, self.device_type, self.dtype = model, device.split(":")[0], dtype

    def __call__(self, features: dict) -> dict:
        import torch  # lazy: torch takes seconds to import, and the command line imports this module to start a run

        if self.dtype is None:
            return self.model(features)
        with torch.autocast(self.device_type, dtype=self.dtype):
            out = self.model[0](features)
        out = dict(out)
        out["token_embeddings"] = out["token_embeddings"].float()  # [B, L, d]
        for module in list(self.model)[1:]:
            out = module(out)
        return out


def parameter_checksum(module) -> str:
    """sha256 (16 hex digits) over a module's parameter names and bytes: equal iff every weight is bit-identical."""
    digest = hashlib.sha256()
    for name, param in sorted(module.named_parameters(), key=lambda kv: kv[0]):
        digest.update(name.encode() + b"\0")
        digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------------ recipes
def extend_vocabulary(cfg: FinetuneConfig, student, data: TrainingData) -> dict:
    """Learn a WordPiece vocabulary on the non-English side, add its new pieces to the student
    (:mod:`mlse.train.recipes.vocab`)."""
    report = extend_model_vocabulary(
        student, data.tgt, vocab_size=cfg.extend_vocab, parallel=(data.src, data.tgt), init=cfg.vocab_init
    )
    return {"vocab_extension": vars(report)}


def fit_bridge(cfg: FinetuneConfig, student, data: TrainingData, t_src: np.ndarray) -> dict:
    """Append a linear map from the student's outputs to the teacher's, fitted on English training sentences."""
    n = min(cfg.bridge_sentences, len(data.src))
    source = student_embeddings(student, data.src[:n], cfg.batch_size, normalize=False)  # [n, d_s]
    w, b = fit_linear_map(source, t_src[:n])
    dense = dense_layer(w, b).to(next(student.parameters()).device)
    student.append(dense)
    return {
        "bridge": {
            "kind": cfg.bridge,
            "sentences": n,
            "r2": round(r2_score(source, t_src[:n], w, b), 4),
            "dims": [int(w.shape[0]), int(w.shape[1])],
        }
    }


def restrict_training(cfg: FinetuneConfig, student, base_modules: int) -> dict:
    """Freeze the token embeddings and/or wrap the transformer in LoRA adapters, as configured.

    ``base_modules``: how many of the student's modules are the base model's own (the rest, e.g. a bridge, were
    appended by a recipe); under LoRA the base's modules after the transformer are frozen, the appended ones train."""
    if cfg.freeze_embeddings:
        student[0].auto_model.get_input_embeddings().weight.requires_grad_(False)
    if cfg.lora_r:
        apply_lora(student, cfg.lora_r, cfg.lora_alpha, appended_from=base_modules)
    return {
        "trainable_parameters": trainable_parameters(student),
        "parameters": sum(p.numel() for p in student.parameters()),
    }


# -------------------------------------------------------------------------------------------------- checkpoints
def save_model_atomically(student, folder: Path) -> None:
    """Save into a temporary sibling, then rename over ``folder``: a reader never sees a half-written model.

    A LoRA student is saved with its adapter merged: the folder is an ordinary sentence-transformers model."""
    with atomic_dir(folder) as tmp:
        merged_copy(student).save(str(tmp), create_model_card=False)


def save_checkpoint(student, out: Path, base_modules: int) -> None:
    """The best student so far: ``out/model`` (merged) and, for a LoRA student, ``out/adapter`` (adapter + the
    modules appended after the base model's first ``base_modules``, e.g. a bridge)."""
    save_model_atomically(student, out / "model")
    if has_lora(student):
        with atomic_dir(out / "adapter") as tmp:
            save_adapter(student, tmp, extra_from=base_modules)
