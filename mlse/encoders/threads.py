"""How many CPU threads an encoder on the CPU uses: ``MLSE_THREADS`` or 2 (the ONNX backends and ``muse``), and the
onnxruntime session every ONNX encoder runs (its options)."""

from __future__ import annotations

from pathlib import Path

from mlse.dirs import positive_env

DEFAULT_THREADS = 2
THREADS_ENV = "MLSE_THREADS"


def default_threads() -> int:
    """``MLSE_THREADS`` if set (a positive integer), else 2."""
    return positive_env(THREADS_ENV, DEFAULT_THREADS)


def session_options(threads: int):
    import onnxruntime as ort  # lazy: optional runtime, only for the onnx backends

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1  # one graph branch at a time: a BERT layer has no parallel branches worth a thread
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # warnings about unused initialisers etc. are noise to a user
    return so


def cpu_session(model_file: Path, threads: int):
    """An onnxruntime session of the graph ``model_file`` on the CPU, with :func:`session_options`."""
    import onnxruntime as ort  # lazy: optional runtime, only for the onnx backends

    return ort.InferenceSession(str(model_file), session_options(threads), providers=["CPUExecutionProvider"])
