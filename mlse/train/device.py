"""Where a fine-tune computes and in which precision: the device's capabilities -> the autocast dtype and whether the
loss is scaled.

:func:`choose_precision` is a pure function of the request and the device's capabilities. ``"auto"``: ``bf16``
on a CUDA GPU or CPU with native bfloat16 (float32's range: no loss scaling); ``fp16`` with a ``GradScaler`` on an older
CUDA GPU (float16 would flush small gradients to zero); else ``fp32``. Weights and optimiser state stay float32; only
the transformer's forward runs in the half type. ``fp16`` off a CUDA GPU is refused.
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
