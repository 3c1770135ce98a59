"""LoRA adapters on a sentence-transformers student (``peft``): wrap, merge, save and rebuild.

A student fine-tuned with ``lora_r > 0`` trains only low-rank updates ``W + (alpha / r) B A`` of the transformer's
attention and feed-forward matrices (Hu et al. 2021), plus any small module the recipe appended after the base model
(the linear bridge of :mod:`mlse.train.recipes.bridge`); the base model's own modules (LaBSE's Dense after pooling)
stay frozen. Two things are saved from it:

* an ordinary sentence-transformers folder with the update merged into the weights (what every other part of mlse
  loads: cache, ONNX backends, heads, the app), and
* the adapter alone (``adapter_config.json`` + ``adapter_model.safetensors``, and ``extra_modules/`` for the appended
  modules): a few MB, small enough to ship in ``assets/models/`` and rebuilt onto the base by
  :func:`mlse.encoders.lora_merge.build_merged`.

``peft`` and torch are imported inside the functions: ``import mlse`` stays light.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from mlse.encoders.lora_merge import EXTRA_DIR, EXTRA_FILE
from mlse.encoders.st_compat import set_hf_model

# Every linear map inside the encoder blocks of BERT / XLM-R models (attention q, k, v, output; FFN in and out), matched
# against peft's full module names; the pooler (unused by mean pooling) is not among them.
TARGET_MODULES = (
    r"(.*\.)?encoder\.layer\.\d+\."
    r"(attention\.(self\.(query|key|value)|output\.dense)|intermediate\.dense|output\.dense)"
)


def apply_lora(student, r: int, alpha: float | None = None, *, appended_from: int | None = None):
    """Wrap the student's transformer in a LoRA adapter (rank ``r``) in place; every base weight is frozen.

    The base model's own modules after the transformer (LaBSE's Dense after pooling) are frozen too: the adapter
    carries only the low-rank updates and the modules the recipe appended (index ``appended_from`` on, e.g. a bridge,
    saved by :func:`save_adapter`), so a module of the base that trained would be lost when the student is rebuilt
    from its adapter. Appended modules keep their ``requires_grad``; ``appended_from=None`` means none were
    appended. ``alpha`` defaults to ``2 r`` (scale 2). Returns the student.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=r,
        lora_alpha=alpha if alpha is not None else 2 * r,
        lora_dropout=0.0,
        target_modules=TARGET_MODULES,
        bias="none",
    )
    for module in list(student)[1:appended_from]:  # None: to the end
        module.requires_grad_(False)
    set_hf_model(student[0], get_peft_model(student[0].auto_model, config))
    return student


def has_lora(student) -> bool:
    return hasattr(student[0].auto_model, "merge_and_unload")


def merged_copy(student):
    """A plain sentence-transformers model equal to the LoRA student (adapter merged); the student is untouched."""
    if not has_lora(student):
        return student
    plain = copy.deepcopy(student)
    set_hf_model(plain[0], plain[0].auto_model.merge_and_unload())
    return plain


def save_adapter(student, folder: Path, *, extra_from: int) -> None:
    """Write the adapter weights and the modules from index ``extra_from`` on (e.g. a bridge) into ``folder``.

    The weights are float32; what ships in ``assets/models/`` is a float16 copy (:mod:`mlse.runs.shipped`). The folder
    must exist (the caller writes it atomically).
    """
    peft_model = student[0].auto_model
    peft_model.save_pretrained(str(folder))
    # the base path inside adapter_config.json is machine-specific; the manifest names the backbone instead
    cfg_path = folder / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = None
    cfg_path.write_text(json.dumps(cfg, indent=1))
    entries = []
    for i, module in enumerate(list(student)[extra_from:]):
        sub = folder / EXTRA_DIR / f"{i}_{type(module).__name__}"
        sub.mkdir(parents=True, exist_ok=True)
        module.save(str(sub))
        entries.append({"path": sub.name, "type": f"sentence_transformers.models.{type(module).__name__}"})
    if entries:
        (folder / EXTRA_DIR / EXTRA_FILE).write_text(json.dumps(entries, indent=1))


def trainable_parameters(module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
