"""The one model factory, ``mlse.load_model``: a name -> the model as the app scores with it.

A plain model comes with its calibration (:mod:`mlse.calibration.backbone`), a scorer as
:class:`mlse.heads.scorer.Scorer` around its backbone; each has ``similarity(a, b)`` and ``calibrate(cos)``
(:class:`mlse.encoders.protocol.Encoder`).
"""

from __future__ import annotations

from mlse.calibration.backbone import with_calibration
from mlse.encoders.catalogue import DEFAULT_MODEL, resolve_model
from mlse.encoders.identity import DEFAULT_BACKEND, check_backend
from mlse.encoders.load import encoder_from_spec
from mlse.heads.scorer import Scorer, backbone_name


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    backend: str = DEFAULT_BACKEND,
    calibrated: bool = True,
    device: str | None = None,
    cache: bool = True,
    backbone=None,
    **kwargs,
):
    """The model called ``name`` (a backbone, a shipped or trained scorer, a student, a folder) on ``backend``, in the
    embedding cache unless ``cache=False``.

    With ``calibrated`` (the default) a plain model comes with its cosine -> 0-5 map when one was fitted on its exact
    weights, so ``model.similarity(a, b)`` gives the calibrated score the app shows; a scorer has its own (its Stage-2
    head). For a scorer, ``backend``, ``device``, ``cache`` and ``kwargs`` apply to its backbone, loaded by the name
    its manifest records, unless ``backbone`` (an already loaded encoder of the same weights) is given; the app passes
    the backbone it holds, so a backbone shared by several scorers is loaded once. Errors (unknown model or backend,
    a backbone that does not match the heads) surface here.
    """
    check_backend(backend)
    spec = resolve_model(name)
    if spec.source != "scorer":
        model = encoder_from_spec(spec, backend=backend, device=device, cache=cache, **kwargs)
        return with_calibration(model)[0] if calibrated else model
    if backbone is None:
        recorded = resolve_model(backbone_name(spec.location))
        backbone = encoder_from_spec(recorded, backend=backend, device=device, cache=cache, **kwargs)
    return Scorer.load(spec.location, backbone=backbone, name=spec.name.removeprefix("runs/"))
