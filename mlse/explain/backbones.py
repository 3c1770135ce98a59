"""Which models can be explained, and their attributable backbone.

:func:`attributable` looks through a model's wrappers (calibration, embedding cache) to the computing encoder: a
sentence-transformers model or ``muse`` on torch gives its backbone; ONNX (no gradients), a scorer (not a dot product
of two sentence vectors) and others are refused with the reason. An object with the backbone methods is used as is.
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
