"""Encoders as the speed benchmarks time them: a model loaded on a backend with a thread count
(:func:`make_encoder`), an encoder without progress bars (:class:`Quiet`), and the ONNX libraries' versions.
"""

from __future__ import annotations


def make_encoder(model: str, backend: str, threads: int, cache: bool = False, **kwargs):
    """``model`` on ``backend`` with ``threads`` threads; torch is warmed up so that no timing includes its load."""
    from mlse.models import load_model

    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        enc = load_model(model, cache=cache)
        enc.encode(["warm-up"])  # load outside any timing
        return enc
    return load_model(model, backend=backend, cache=cache, threads=threads, **kwargs)


class Quiet:
    """An encoder without progress bars (the evaluation tasks would print one per backend and task)."""

    def __init__(self, inner):
        self.inner, self.name, self.identity = inner, inner.name, inner.identity

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None):
        return self.inner.encode(texts, normalize=normalize, batch_size=batch_size, show_progress=False)


def onnx_versions() -> dict[str, str]:
    from importlib import metadata

    return {name: metadata.version(name) for name in ("onnx", "onnxruntime")}
