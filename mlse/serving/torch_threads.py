"""One torch intra-op thread in an app whose models run on ONNX: torch then computes only the trained heads.

On the ``onnx`` / ``onnx-int8`` backends every encoder runs in onnxruntime, and torch is left with the heads of the
Stage-1/2 scorers: two to four products of a few rows by a 384 x 384 matrix per call. With torch's default of one
thread per core, each product wakes a second thread, and on a CPU that other requests keep busy, waiting for it costs
far more than the product: shipped/me5-small+s1+s2 scored alone after its backbone took 44 ms of wall time and 30 ms
of CPU with two threads, 1.2 ms with one (``python -m benchmarks.serving_levers``, 2 busy cores,
results/app/load-levers/serving-levers-onnx-int8.json). The torch backend is left as it is: there torch computes the
encoders too, where a second thread pays.

Torch reads the count when a thread first computes, so setting it at start applies to every request thread; the
import (~2 s) runs in the background so the page is not kept waiting. Training runs in spawned child processes
(:mod:`mlse.train.child_jobs`) with their own defaults.
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
