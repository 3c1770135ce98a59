"""What a device computes natively, as torch reports it: read by fine-tuning (:mod:`mlse.train.device`, the autocast
precision) and by attribution (:mod:`mlse.explain`, the precision of the directional derivatives)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    device_type: str  # "cuda", "cpu", "mps", ...
    native_bf16: bool  # bfloat16 arithmetic in hardware (not emulated)
    name: str = ""  # the GPU's name, "" for a CPU


def device_capabilities(device: str) -> Capabilities:
    """The capabilities of ``device`` (``"cuda"``, ``"cuda:1"``, ``"cpu"``, ...) as torch reports them."""
    import torch  # lazy: torch takes seconds to import, and the command line imports this module to start a run

    kind = device.split(":")[0]
    if kind == "cuda" and torch.cuda.is_available():
        index = torch.device(device).index or 0
        major, _minor = torch.cuda.get_device_capability(index)
        return Capabilities("cuda", major >= 8, torch.cuda.get_device_name(index))
    if kind == "cpu":
        try:
            return Capabilities("cpu", bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))
        except (AttributeError, RuntimeError):
            return Capabilities("cpu", False)
    return Capabilities(kind, False)
