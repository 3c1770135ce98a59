"""The one model factory: a name -> something that encodes (a backbone, a fine-tuned student, or a scorer).

``load_model`` resolves the name (:func:`mlse.encoders.resolve.resolve_model`); a plain model comes back from
:func:`mlse.encoders.load.load_encoder` (its runtime, in the embedding cache); a scorer run (backbone + trained heads)
gets its backbone loaded the same way, then its heads wrapped around it (:class:`mlse.heads.scorer.Scorer`). Every
place that may be handed a scorer's name (the CLI, the app, the experiments, a fine-tuning teacher) calls this.
"""

from __future__ import annotations

from mlse.encoders.identity import DEFAULT_BACKEND, check_backend
from mlse.encoders.load import encoder_from_spec
from mlse.encoders.registry import DEFAULT_MODEL
from mlse.encoders.resolve import resolve_model
from mlse.heads.scorer import Scorer, backbone_name


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    backend: str = DEFAULT_BACKEND,
    device: str | None = None,
    cache: bool = True,
    backbone=None,
    **kwargs,
):
    """The model called ``name`` on ``backend``, in the embedding cache unless ``cache=False``.

    For a scorer, ``backend``, ``device``, ``cache`` and ``kwargs`` apply to its backbone, loaded by the name its
    manifest records, unless ``backbone`` (an already loaded encoder of the same weights) is given; the app passes
    the backbone it holds, so a backbone shared by several scorers is loaded once. Errors (unknown model or backend,
    a backbone that does not match the heads) surface here.
    """
    check_backend(backend)
    spec = resolve_model(name)
    if spec.source != "scorer":
        return encoder_from_spec(spec, backend=backend, device=device, cache=cache, **kwargs)
    if backbone is None:
        recorded = resolve_model(backbone_name(spec.location))
        backbone = encoder_from_spec(recorded, backend=backend, device=device, cache=cache, **kwargs)
    return Scorer.load(spec.location, backbone=backbone, name=spec.name.removeprefix("runs/"))
