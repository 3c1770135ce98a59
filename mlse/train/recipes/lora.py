"""LoRA adapters on a sentence-transformers student (``peft``): wrap, merge, save and rebuild.

With ``lora_r > 0`` a student trains only low-rank updates ``W + (alpha / r) B A`` of the transformer's attention and
feed-forward matrices (Hu et al. 2021), plus modules a recipe appended (e.g. a bridge); the base model's own modules
stay frozen. Saved: a plain sentence-transformers folder with the update merged, and the adapter alone (plus
``extra_modules/``), small enough to ship and rebuilt by :func:`mlse.encoders.lora_merge.build_merged`.
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

    The base's own modules after the transformer are frozen too: the adapter carries only the updates and the appended
    modules (index ``appended_from`` on; None: none), so a trained base module would be lost on rebuild. Appended
    modules keep their ``requires_grad``. ``alpha`` defaults to ``2 r``. Returns the student.
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

    The weights are float32 (what ships is a float16 copy). The folder must exist (the caller writes it atomically)."""
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
