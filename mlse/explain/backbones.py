"""Which models can be explained, and their attributable backbone.

A model as the app and :func:`mlse.load_model` hand it over is a stack of wrappers (calibration, embedding
cache) around an encoder; :func:`attributable` looks through them to the encoder that computes and returns its
backbone:

- a sentence-transformers model on torch (``me5-small``, ``minilm-en``, a shipped or trained student, a folder):
  :class:`mlse.explain.transformer.TransformerBackbone`;
- ``muse`` on torch: :class:`mlse.explain.muse.UseBackbone` (token embeddings only);
- anything else is refused with the reason: an ONNX backend (no gradients: load the model with the torch backend), a
  scorer (Stage-1/2 heads turn the backbone's vector into a refined one or a 0-5 score; the Siamese form the method
  needs, a dot product of two sentence vectors, holds for its backbone: explain that), any other encoder.

An object that already has the backbone methods (``tokenize``, ``states``, ``tail``, ``contextual``) is used as it is
(tests build hand-made ones whose attributions are known in closed form).
"""

from __future__ import annotations

import threading
import weakref

from mlse.errors import MlseError

_BACKBONE_METHODS = ("tokenize", "states", "tail", "contextual")
_made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # encoder -> its backbone (modules shared, no copy)
_lock = threading.Lock()


def is_backbone(obj) -> bool:
    return all(callable(getattr(obj, m, None)) for m in _BACKBONE_METHODS)


def computing_encoder(model):
    """The innermost encoder of ``model``'s wrappers (``inner``: calibration, embedding cache)."""
    seen = 0
    while getattr(model, "inner", None) is not None and seen < 16:
        model = model.inner
        seen += 1
    return model


def attributable(model):
    """The backbone that :func:`mlse.explain.explain_pair` differentiates, or an MlseError saying why there is none."""
    if is_backbone(model):
        return model
    name = getattr(model, "name", type(model).__name__)
    if getattr(model, "backbone", None) is not None and (
        getattr(model, "stage1", None) is not None or getattr(model, "stage2", None) is not None
    ):
        backbone = getattr(model.backbone, "name", "its backbone")
        raise MlseError(
            f"{name} is a scorer (a backbone plus trained heads): its score is not a dot product of two "
            f"sentence vectors that the method can split; explain its backbone instead "
            f"(--model {backbone})"
        )
    encoder = computing_encoder(model)
    with _lock:
        try:
            made = _made.get(encoder)
        except TypeError:  # not weak-referenceable: built for this call only
            return _build(encoder, name)
        if made is None:
            made = _made[encoder] = _build(encoder, name)
    return made


def _build(encoder, name: str):
    from mlse.encoders.torch import SentenceTransformerEncoder
    from mlse.encoders.use import UseEncoder

    kind = type(encoder).__name__
    if "onnx" in kind.lower() or getattr(encoder, "backend", "") in ("onnx", "onnx-int8"):  # muse on ONNX too
        raise MlseError(
            f"{name} runs on the ONNX backend, which cannot be differentiated: load it with "
            "backend='torch' (--backend torch) to explain a score"
        )
    if isinstance(encoder, SentenceTransformerEncoder):
        from mlse.explain.transformer import TransformerBackbone

        return TransformerBackbone.from_encoder(encoder)
    if isinstance(encoder, UseEncoder):
        from mlse.explain.muse import UseBackbone

        return UseBackbone(encoder)
    raise MlseError(
        f"{name} cannot be explained: token attributions need a torch model (a sentence-transformers "
        f"model or muse); this is a {kind}"
    )
