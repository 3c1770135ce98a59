"""``muse`` on onnxruntime: its network (:mod:`mlse.encoders.use_torch`) exported once to ONNX, run without torch.

The graph starts after the embedding lookup (:mod:`mlse.encoders.rows`): inputs are the dequantised rows ``emb``
[T, 512] of a flat batch, the n-gram window index ``window`` [T, W], a ``sentence`` matrix [B, T] that sums each
sentence's tokens (ONNX has no cheap scatter-add) and ``lengths`` [B, 1]; the output is unit embeddings [B, 512].
Traced from the torch port into ``<cache>/muse/<weights hash>-v<N>/onnx-<variant>/model.onnx`` (hidden folder, renamed
into place under a file lock). fp32 only: the onnx-int8 backend runs this graph too (see :mod:`mlse.encoders.use`).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np

from mlse.atomic import build_once
from mlse.encoders.onnx.export import META_FILE, MODEL_FILE, OPSET, require, trace_to_onnx
from mlse.encoders.rows import RowFile
from mlse.encoders.threads import cpu_session
from mlse.encoders.use_torch import (
    dequantized_rows,
    network,
    network_weights,
    read_dense,
    sentence_matrix,
    window_index,
)

GRAPH_VERSION = 1  # bump when the exported graph changes: its folder and the encoder identity change with it


def graph_dir(prepared: Path) -> Path:
    return prepared / f"onnx-fp32-v{GRAPH_VERSION}"


def ensure_graph(weights_file: Path, prepared: Path) -> Path:
    """The folder with the graph of the network in ``weights_file``, exporting it first if missing."""
    return build_once(
        graph_dir(prepared), lambda folder: (folder / META_FILE).is_file(), partial(export_fp32, weights_file)
    )


def export_fp32(weights_file: Path, out: Path) -> None:
    torch = require("torch", "exporting muse to ONNX needs torch (pip install torch), once")
    weights = network_weights(read_dense(weights_file), torch)

    class Core(torch.nn.Module):
        """The network with its weights as buffers, so that the graph holds them as initializers (which
        onnxruntime pre-packs and the quantiser can find), not as constants."""

        def __init__(self):
            super().__init__()
            _unflat(weights, self.register_buffer)

        def forward(self, emb, window, sentence, lengths):  # [T, 512], [T, W], [B, T], [B, 1]
            w = _unflat(weights, lambda name, _: getattr(self, name))
            return network(w, emb, window, lambda feats: sentence @ feats, lengths)

    lengths = np.array([3, 5])
    sample = (
        torch.zeros(8, 512),
        torch.from_numpy(window_index(lengths)),
        torch.from_numpy(sentence_matrix(lengths)),
        torch.tensor([[3.0], [5.0]]),
    )
    names = ["emb", "window", "sentence", "lengths"]
    dynamic = {
        "emb": {0: "tokens"},
        "window": {0: "tokens"},
        "sentence": {0: "batch", 1: "tokens"},
        "lengths": {0: "batch"},
        "embedding": {0: "batch"},
    }
    trace_to_onnx(Core().eval(), sample, out / MODEL_FILE, names, "embedding", dynamic)
    (out / META_FILE).write_text(
        json.dumps({"variant": "fp32", "graph_version": GRAPH_VERSION, "opset": OPSET, "torch": torch.__version__})
    )


def _unflat(weights: dict, get) -> dict:
    """``weights`` with every tensor replaced by ``get(its buffer name, the tensor)`` (values may be tensors, tuples or
    lists of tensors; floats are kept as they are)."""
    out = {}
    for key, value in weights.items():
        if isinstance(value, (tuple, list)):
            out[key] = type(value)(_unflat({f"{key}_{i}": v for i, v in enumerate(value)}, get).values())
        else:
            out[key] = value if isinstance(value, float) else get(key, value)
    return out


class UseOnnxModel:
    """The network on onnxruntime: ``forward(token_ids, lengths)`` -> float32 [B, 512], like
    :meth:`mlse.encoders.use_torch.UseTorchModel.forward`. One single-threaded session; callers run batches
    concurrently on it, one core each."""

    def __init__(self, weights_file: Path, table: Path, graph: Path):
        with np.load(weights_file, allow_pickle=False) as z:
            self.scale, self.lo = z["scale"].astype(np.float32), z["lo"].astype(np.float32)  # [17]
        self.table = RowFile.from_npy(table)  # uint8 [V, 512], rows read as tokens need them
        self.session = cpu_session(graph / MODEL_FILE, 1)

    def forward(self, token_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        ids = np.ascontiguousarray(token_ids, dtype=np.int64)  # [T]
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)  # [B]
        feed = {
            "emb": dequantized_rows(self.table, ids, self.scale, self.lo),
            "window": window_index(lengths),
            "sentence": sentence_matrix(lengths),
            "lengths": lengths.astype(np.float32)[:, None],
        }
        return self.session.run(None, feed)[0]  # [B, 512]
