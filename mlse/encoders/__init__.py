"""Sentence encoders: one protocol, a registry of names, runtimes, the embedding cache, and the packaged backbones.

A thin face re-exporting public names; inside mlse, modules import from the module that defines a name. The modules:
:mod:`.protocol` (the ``Encoder`` protocol), :mod:`.identity` (weight fingerprints, text prefix, backend tags),
:mod:`.registry` and :mod:`.catalogue` (named models, any name -> its spec and local folder), :mod:`.hub`,
:mod:`.lora_merge`, the runtimes :mod:`.torch` and :mod:`.onnx`, :mod:`.text_cut`, :mod:`.progress`, the packaged
backbones :mod:`.use` / :mod:`.use_torch` (``muse``) and :mod:`.e5` / :mod:`.e5_format` (``me5-small``),
:mod:`.cache` (the SQLite embedding cache) and :mod:`.load` (``load_encoder``; scorers: :func:`mlse.models.load_model`).
"""

from mlse.encoders.cache import CachedEncoder
from mlse.encoders.catalogue import (
    DEFAULT_MODEL,
    DEFAULT_MODELS,
    ModelStatus,
    available_models,
    list_runs,
    materialise,
    resolve_model,
    spec_status,
)
from mlse.encoders.identity import (
    BACKENDS,
    DEFAULT_BACKEND,
    backend_of,
    check_backend,
    folder_fingerprint,
    text_prefix,
    weights_identity,
    with_backend,
)
from mlse.encoders.load import load_encoder
from mlse.encoders.protocol import Encoder
from mlse.encoders.registry import ModelSpec, registry
from mlse.encoders.torch import SentenceTransformerEncoder, default_device, load_sentence_transformer

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEFAULT_MODEL",
    "DEFAULT_MODELS",
    "CachedEncoder",
    "Encoder",
    "ModelSpec",
    "ModelStatus",
    "SentenceTransformerEncoder",
    "available_models",
    "backend_of",
    "check_backend",
    "default_device",
    "folder_fingerprint",
    "list_runs",
    "load_encoder",
    "load_sentence_transformer",
    "materialise",
    "registry",
    "resolve_model",
    "spec_status",
    "text_prefix",
    "weights_identity",
    "with_backend",
]
