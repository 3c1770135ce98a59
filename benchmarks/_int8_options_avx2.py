"""The AVX2 saturation check of ``benchmarks.int8_options``: how often an AVX2 u8 x s8 kernel's int16 pair sums would
saturate on an int8 graph's MatMuls, emulated in numpy (this machine's VNNI kernels never saturate).

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlse.encoders.onnx import export as onnx_export


def avx2_saturation(folder: Path, texts: list[str], rows: int = 128) -> dict | None:
    """Emulate the int16 saturation of an AVX2 (or AVX-512 without VNNI) u8 x s8 kernel on this graph's int8 MatMuls.

    Such kernels (vpmaddubsw) add the products of two neighbouring k into an int16, which saturates when
    ``|a[2i] w[2i] + a[2i+1] w[2i+1]| > 32767``; VNNI (vpdpbusd) accumulates in int32 and never does, so this machine
    cannot show the effect. For each MatMulInteger, on ``rows`` real tokens of ``texts``: the share of outputs that
    meet at least one saturated pair, and the RMS error that causes relative to the outputs' RMS. None for a graph
    without MatMulInteger (static QDQ)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    from mlse.encoders.onnx.quantize import calibration_feeds

    meta = json.loads((folder / onnx_export.META_FILE).read_text())
    model = onnx.load(str(folder / onnx_export.MODEL_FILE))
    inits = {t.name: t for t in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "MatMulInteger"]
    if not nodes:
        return None
    wanted = sorted({n.input[0] for n in nodes} | {n.input[2] for n in nodes})
    for name in wanted:  # the uint8 activations and their zero points
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.UINT8, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    table = np.load(folder / meta["embedding_table"], mmap_mode="r") if meta.get("embedding_table") else None
    texts = [meta.get("text_prefix", "") + t for t in texts]
    feed = next(
        calibration_feeds(
            folder / onnx_export.TOKENIZER_FILE,
            meta["inputs"],
            meta["pad_token_id"],
            texts,
            table,
            batch_size=len(texts),
        )
    )
    values = dict(zip(wanted, session.run(wanted, feed)))
    real = feed["attention_mask"].reshape(-1).astype(bool)  # [b*T]
    pick = np.random.default_rng(0).permutation(int(real.sum()))[:rows]
    hit, err = [], []
    for node in nodes:
        act = values[node.input[0]]
        a = act.reshape(-1, act.shape[-1])[real][pick].astype(np.int32)  # [rows, K]
        w = numpy_helper.to_array(inits[node.input[1]]).astype(np.int32)  # [K, N]
        k = a.shape[1] - a.shape[1] % 2
        pairs = a[:, 0:k:2, None] * w[None, 0:k:2] + a[:, 1:k:2, None] * w[None, 1:k:2]  # [rows, K/2, N]
        lost = (pairs - np.clip(pairs, -32768, 32767)).sum(axis=1)  # [rows, N]
        exact = (a - int(values[node.input[2]])) @ w  # [rows, N]: the output before scaling
        hit.append(float((np.abs(pairs) > 32767).any(axis=1).mean()))
        err.append(
            float(np.sqrt((lost.astype(np.float64) ** 2).mean() / max((exact.astype(np.float64) ** 2).mean(), 1e-12)))
        )
    return {
        "outputs_hit_pct": round(100 * float(np.mean(hit)), 3),
        "worst_node_hit_pct": round(100 * max(hit), 3),
        "rel_rms_error": round(float(np.mean(err)), 5),
        "nodes": len(nodes),
    }
