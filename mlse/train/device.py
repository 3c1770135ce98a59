"""Where a fine-tune computes and in which precision: the device's capabilities -> the autocast dtype and whether the
loss is scaled.

:func:`choose_precision` is the decision, a pure function of what was asked and what the device can do (tested on
any machine); :func:`device_capabilities` reads those from torch. ``"auto"`` means mixed precision wherever the
device has fast half-precision arithmetic:

* a CUDA GPU that computes bfloat16 natively (compute capability 8.0 or newer: A100, L4, A10G, H100, H200) ->
  ``bf16`` autocast; bfloat16 has float32's range, so no loss scaling;
* an older CUDA GPU (T4, V100: float16 tensor cores, bfloat16 only emulated) -> ``fp16`` autocast with a
  ``torch.amp.GradScaler``: float16's narrow range would flush small gradients to zero without it;
* a CPU with native bfloat16 (AVX-512-BF16 / AMX) -> ``bf16``; any other CPU -> ``fp32``.

In every case the weights and the optimiser state stay float32; only the transformer's forward runs in the half
type (:class:`mlse.train.student_model.AutocastForward`). ``fp16`` asked for on a device other than a CUDA GPU is
refused. The run records the choice (``precision_effective``, ``grad_scaler``, ``gpu`` in ``finetune_config.json`` and
``metrics.json``).
"""

from __future__ import annotations

from mlse.encoders.hardware import Capabilities, device_capabilities
from mlse.errors import MlseError


def choose_precision(requested: str, caps: Capabilities) -> str:
    """``"fp32"``, ``"bf16"`` or ``"fp16"`` for a request of ``"auto"``, ``"fp32"``, ``"bf16"`` or ``"fp16"``."""
    if requested == "fp16" and caps.device_type != "cuda":
        raise MlseError(
            f"precision fp16 needs a CUDA GPU (float16 with loss scaling); this run is on "
            f"{caps.device_type}: choose auto, bf16 or fp32"
        )
    if requested != "auto":
        return requested
    if caps.native_bf16 and caps.device_type in ("cuda", "cpu"):
        return "bf16"
    return "fp16" if caps.device_type == "cuda" else "fp32"


def needs_grad_scaler(precision: str) -> bool:
    """Loss scaling: float16 only (bfloat16 has float32's exponent range)."""
    return precision == "fp16"


def resolve_precision(precision: str, device: str) -> str:
    """The precision a run on ``device`` uses for the requested ``precision`` (:func:`choose_precision`)."""
    return choose_precision(precision, device_capabilities(device))


def autocast_dtype(precision: str):
    """The autocast dtype of a resolved precision: ``torch.bfloat16`` / ``torch.float16``, or None (float32)."""
    import torch  # lazy: as in device_capabilities

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def precision_record(device: str, precision: str) -> dict:
    """What a run records about its device and precision."""
    caps = device_capabilities(device)
    return {
        "device": device,
        "precision_effective": precision,
        "grad_scaler": needs_grad_scaler(precision),
        "gpu": caps.name or None,
        "native_bf16": caps.native_bf16,
    }
