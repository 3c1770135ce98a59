"""One torch intra-op thread in an app whose models run on ONNX: torch then computes only the trained heads.

With one thread per core each small head product wakes a second thread, and on a busy CPU the wait costs far more
than the product (``python -m benchmarks.serving_levers``); on the torch backend the encoders need the threads. Torch
reads the count when a thread first computes, so setting it at start covers every request thread; the import runs in
the background. Training children (:mod:`mlse.train.child_jobs`) keep their own defaults.
"""

from __future__ import annotations

import threading

HEADS_THREADS = 1


def limit_torch_threads(backend: str) -> threading.Thread | None:
    """On an ONNX backend, set torch's intra-op threads to :data:`HEADS_THREADS` in a background thread (returned, so a
    caller may wait for it); on the torch backend do nothing and return None."""
    if backend == "torch":
        return None

    def apply() -> None:
        import torch  # lazy: torch costs seconds to import; an app on ONNX needs it only for the heads

        torch.set_num_threads(HEADS_THREADS)

    thread = threading.Thread(target=apply, name="mlse-torch-threads", daemon=True)
    thread.start()
    return thread
