"""The backbone factory: a model name -> an :class:`~mlse.encoders.protocol.Encoder` on the asked runtime, cached.

Plain encoders only: a scorer (backbone + trained heads) is loaded by :func:`mlse.models.load_model`, which calls this
for its backbone. Encoders never depend on heads.
"""

from __future__ import annotations

from mlse.encoders.cache import CachedEncoder
from mlse.encoders.catalogue import DEFAULT_MODEL, materialise, resolve_model
from mlse.encoders.identity import DEFAULT_BACKEND, check_backend
from mlse.encoders.onnx.runtime import OnnxEncoder
from mlse.encoders.protocol import Encoder
from mlse.encoders.registry import ModelSpec
from mlse.encoders.torch import SentenceTransformerEncoder
from mlse.encoders.use import UseEncoder
from mlse.errors import MlseError


def load_encoder(
    name: str = DEFAULT_MODEL,
    *,
    backend: str = DEFAULT_BACKEND,
    device: str | None = None,
    cache: bool = True,
    **kwargs,
) -> Encoder:
    """Resolve ``name`` and return its encoder, wrapped in the on-disk embedding cache unless ``cache=False``.
    ``backend``: ``torch``, ``onnx`` or ``onnx-int8`` (extra keyword arguments such as ``threads`` go to the runtime).
    ``muse`` runs mlse's own port (:mod:`mlse.encoders.use`) on the CPU whatever the backend and device. Errors
    (unknown model or backend, onnxruntime missing, a scorer name) surface here, not at first encode."""
    check_backend(backend)
    return encoder_from_spec(resolve_model(name), backend=backend, device=device, cache=cache, **kwargs)


def encoder_from_spec(
    spec: ModelSpec, *, backend: str = DEFAULT_BACKEND, device: str | None = None, cache: bool = True, **kwargs
) -> Encoder:
    """:func:`load_encoder` for a spec already resolved."""
    if spec.source == "scorer":
        raise MlseError(
            f"{spec.name!r} is a scorer (a backbone plus trained heads): load it with mlse.models.load_model"
        )
    if spec.source == "native":
        encoder = UseEncoder(materialise(spec), name=spec.name, backend=backend, **kwargs)
    elif backend == "torch":
        encoder = SentenceTransformerEncoder(spec, device=device, **kwargs)
    else:
        encoder = OnnxEncoder(spec, quantized=backend == "onnx-int8", device=device, **kwargs)
    _ = encoder.path  # materialise now: missing models fail early with a clear message
    return CachedEncoder(encoder) if cache else encoder
