"""A fine-tuned student shipped as a LoRA adapter, merged into its base model: an ordinary sentence-transformers folder.

The adapter format is what :func:`mlse.train.recipes.lora.save_adapter` writes (``extra_modules/`` holds modules
appended after pooling). Shipped students are rebuilt here once, into the user cache.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mlse.atomic import atomic_dir
from mlse.encoders.identity import folder_fingerprint
from mlse.encoders.st_compat import set_hf_model, st_modules
from mlse.errors import ModelNotFoundError
from mlse.runs.shipped import ShippedArtifact, student_dir

EXTRA_DIR = "extra_modules"
EXTRA_FILE = "modules.json"

log = logging.getLogger(__name__)


def build_merged(base_folder: Path, adapter_folder: Path, out: Path) -> None:
    """Rebuild a fine-tuned student from its base model folder and a saved adapter; save it to ``out``.
    The adapter is merged in float32; extra modules are appended after the base model's own."""
    import torch
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    models = st_modules()
    model = SentenceTransformer(str(base_folder), device="cpu", local_files_only=True, trust_remote_code=False)
    transformer = model[0]
    # Built from the local files alone (no PeftModel.from_pretrained: it can reach for the hub)
    saved = json.loads((adapter_folder / "adapter_config.json").read_text())
    config = LoraConfig(**{k: v for k, v in saved.items() if k in LoraConfig.__dataclass_fields__})
    peft_model = get_peft_model(transformer.auto_model, config)
    weights = load_file(str(adapter_folder / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(peft_model, {k: v.to(torch.float32) for k, v in weights.items()})
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"{adapter_folder}: adapter weights that fit no module: {result.unexpected_keys[:3]}")
    set_hf_model(transformer, peft_model.merge_and_unload())
    extra = adapter_folder / EXTRA_DIR
    entries = json.loads((extra / EXTRA_FILE).read_text()) if (extra / EXTRA_FILE).is_file() else []
    modules = list(model)
    for entry in entries:
        cls = getattr(models, entry["type"].rsplit(".", 1)[1])
        modules.append(cls.load(str(extra / entry["path"])).to(torch.float32))
    rebuilt = SentenceTransformer(modules=modules, device="cpu", trust_remote_code=False)
    # prompts (e5's "query: ") and the default prompt travel with the base model's settings
    rebuilt.prompts = dict(getattr(model, "prompts", {}) or {})
    rebuilt.default_prompt_name = getattr(model, "default_prompt_name", None)
    rebuilt.max_seq_length = model.max_seq_length
    rebuilt.save(str(out), create_model_card=False)


def build_shipped_student(item: ShippedArtifact, base: Path) -> Path:
    """Merge a shipped LoRA adapter into its backbone's folder ``base``, once, into the user cache (atomically).
    Refused when ``base`` holds other weights than the adapter was trained on."""
    recorded = str(item.manifest["backbone_identity"]).rsplit(":", 1)[-1]
    actual = folder_fingerprint(base)[: len(recorded)]
    if actual != recorded:
        raise ModelNotFoundError(
            f"{item.name} was trained on {item.manifest['backbone']} weights {recorded}, but the "
            f"{item.manifest['backbone']} here has weights {actual}: rebuild it (python -m mlse reproduce assets)"
        )
    out = student_dir(item)
    log.warning("building %s from its LoRA adapter (once) -> %s", item.name, out)
    with atomic_dir(out) as tmp:
        build_merged(base, item.folder, tmp)
    return out
