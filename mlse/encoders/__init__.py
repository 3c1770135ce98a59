"""Sentence encoders: one protocol, a registry of names, runtimes, the embedding cache, and the packaged backbones.

A thin face: the public names of the modules below, re-exported. Inside mlse, modules import from the module that
defines a name, never through this face.

- :mod:`.protocol`: the ``Encoder`` protocol every model satisfies.
- :mod:`.identity`: weight fingerprints (the cache key), the text prefix, backend tags.
- :mod:`.registry`: the named models (:class:`ModelSpec`).
- :mod:`.catalogue`: every model offered (the defaults, shipped artifacts, runs), any name -> its spec, its local
  folder (:func:`materialise`), whether it loads here, what kind it is.
- :mod:`.hub`: hub models (the local HF cache, downloads); :mod:`.lora_merge`: shipped LoRA students rebuilt.
- :mod:`.torch`, :mod:`.onnx` (``export``, ``quantize``, ``runtime``): the runtimes; :mod:`.text_cut`: every text
  cut to what its model reads before tokenising; :mod:`.progress`: progress bars, on a terminal only.
- :mod:`.use`, :mod:`.use_torch` (``muse``) and :mod:`.e5`, :mod:`.e5_format` (``me5-small``): backbones shipped in
  pip packages in a format of their own.
- :mod:`.cache`: the SQLite embedding cache.
- :mod:`.load`: ``load_encoder``, the backbone factory. A scorer (backbone + trained heads) is loaded by
  :func:`mlse.models.load_model`.
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
