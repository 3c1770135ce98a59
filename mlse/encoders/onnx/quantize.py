"""Dynamic int8 quantisation of an exported encoder, with SmoothQuant-style rescaling of LayerNorm-fed MatMuls.

Dynamic quantisation gives every activation tensor one uint8 scale per batch, but LayerNorm outputs have a few
channels 20-30x larger than the rest (the same ones for every input), which leaves the others a handful of levels.
For each group of MatMuls fed by a LayerNorm (Q/K/V; the first feed-forward MatMul) this module inserts ``x * (1 / s)``
before them and multiplies the weight rows by ``s`` (Xiao et al. 2023, SmoothQuant): the fp32 function is unchanged,
but part of the outlier range moves into the per-output-channel weight scales. ``s_k = amax(x_k)^alpha /
amax(W_k)^(1-alpha)``, with channel maxima from a calibration run of the fp32 graph. Smoothing the other MatMuls made
things worse. Outlier *tokens* (10-30x the others in some feed-forward layers) no per-channel rescaling fixes:
:func:`activation_stats` measures them, and a recipe's ``keep_outliers`` rule keeps the worst MatMuls in fp32
(``benchmarks/int8_options.py``). ``method: static`` fixes activation scales from the calibration text instead (QDQ).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from mlse.encoders.compact_tokenizer import RustTokenizer, padded
from mlse.encoders.onnx.int8_nodes import matmul_roles, outlier_nodes, select

SMOOTH_ROLES = ("qkv", "ffn_in")  # the LayerNorm-fed MatMuls (mlse.encoders.onnx.int8_nodes)
ALPHA = 0.5  # migration strength
# Calibration text: LayerNorm channel maxima are a property of the model, not the text, so a few dozen sentences do.
CALIBRATION_TEXTS = [
    "The weather was cold, so we stayed inside and read.",
    "A man is playing a guitar on the street corner.",
    "Two children are running across a green field.",
    "The committee postponed its decision until next month.",
    "She bought three apples, a loaf of bread and some cheese.",
    "How long does it take to get to the airport by train?",
    "Prices rose sharply after the announcement on Tuesday.",
    "The cat sleeps on the windowsill every afternoon.",
    "Researchers measured the temperature of the lake at dawn and at dusk for several weeks.",
    "I have never seen such a beautiful sunset.",
    "Please close the door when you leave the room.",
    "A woman is slicing onions in a small kitchen.",
    "The new bridge connects the old town with the harbour district.",
    "Der Zug nach Berlin hat zwanzig Minuten Verspätung.",
    "Ein Hund spielt mit einem Ball im Park.",
    "Le musée est fermé le lundi et ouvert tard le jeudi.",
    "Une femme lit un livre dans le jardin.",
    "El mercado abre temprano los sábados por la mañana.",
    "Un niño está comiendo una manzana.",
    "Il treno per Roma parte alle otto.",
    "Поезд прибывает в Москву рано утром.",
    "Мужчина играет на пианино.",
    "我们明天早上去公园散步。",
    "一个女人正在厨房里做饭。",
    "Yes.",
    "OK, thanks!",
    "Numbers like 3.14, 2024 and 1,000,000 appear in text too.",
    "What is the capital of Australia, and why is it not Sydney?",
]


def smooth_matmuls(model, calibrate, alpha: float = ALPHA, roles=SMOOTH_ROLES, skip=()) -> int:
    """Rescale the constant-weight MatMuls of ``model`` (an ``onnx.ModelProto``, in place) whose role
    is in ``roles``, grouped by the activation they multiply, except those in ``skip`` (kept fp32).
    ``calibrate(tensor_names) -> {name: channel absmax [K]}`` runs the unmodified graph on calibration text. Returns
    the number of groups rescaled."""
    from onnx import helper, numpy_helper  # lazy: optional runtime, only for the onnx backends

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    wanted = {m.name for m in matmul_roles(graph) if m.role in roles and m.name not in set(skip)}
    groups: dict[str, list] = {}  # activation tensor -> MatMul nodes that multiply it by a constant weight [K, N]
    for node in graph.node:
        if node.op_type == "MatMul" and node.name in wanted:
            groups.setdefault(node.input[0], []).append(node)
    if not groups:
        return 0
    amax = calibrate(list(groups))
    for i, (tensor, nodes) in enumerate(groups.items()):
        weights = [numpy_helper.to_array(inits[n.input[1]]) for n in nodes]  # each [K, N]
        w_max = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)  # [K]
        x_max = np.asarray(amax[tensor], dtype=np.float64)  # [K]
        scale = (np.maximum(x_max, 1e-5) ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha)).clip(1e-5, 1e5)  # [K]
        for node, w in zip(nodes, weights):
            scaled = (w * scale[:, None]).astype(np.float32)  # [K, N]: row k carries the factor taken from x_k
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(scaled, node.input[1]))
        inv = numpy_helper.from_array((1.0 / scale).astype(np.float32), f"mlse_smooth_inv_{i}")  # [K]
        graph.initializer.append(inv)
        smoothed = f"{tensor}_mlse_smoothed"
        mul = helper.make_node("Mul", [tensor, inv.name], [smoothed], name=f"mlse_smooth_{i}")
        position = list(graph.node).index(nodes[0])
        graph.node.insert(position, mul)  # before its first consumer: keeps the node list topologically sorted
        for node in nodes:
            node.input[0] = smoothed
    return len(groups)


def calibration_feeds(
    tokenizer_path: Path,
    inputs: list[str],
    pad_id: int,
    texts: list[str],
    table: np.ndarray | None = None,
    batch_size: int = 32,
    same_width: bool = False,
):
    """Input dicts for the fp32 graph, ``batch_size`` texts each (length-sorted, so little padding): int64 ids and
    mask [b, T], and for a graph that takes ``inputs_embeds`` the word-embedding rows [b, T, H] from ``table``.
    ``same_width``: every batch padded to the longest text (onnxruntime's histogram calibrators need one shape)."""
    encodings = sorted(RustTokenizer(tokenizer_path, None).encode_ids(texts), key=len)
    for start in range(0, len(encodings), batch_size):
        rows = encodings[start : start + batch_size]
        ids, mask = padded(rows, pad_id, len(encodings[-1]) if same_width else None)  # [b, T] each
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        if table is not None:
            feed["inputs_embeds"] = np.asarray(table[ids], dtype=np.float32)  # [b, T, H]
        yield {k: v for k, v in feed.items() if k in inputs}


def activation_stats(
    model_path: Path,
    tokenizer_path: Path,
    inputs: list[str],
    pad_id: int,
    tensors: list[str],
    texts: list[str] = CALIBRATION_TEXTS,
    table: np.ndarray | None = None,
) -> dict[str, dict]:
    """For each tensor in ``tensors`` of the fp32 graph run on ``texts``: ``absmax``, the per-channel max |x| [K],
    and ``outlier_ratio``, the largest per-token max |x| over the median one (real tokens only, not padding): with one
    scale per tensor set by the largest token, a typical token keeps about 255 / ratio levels."""
    import onnx  # lazy: optional runtime, only for the onnx backends
    import onnxruntime as ort

    model = onnx.load(str(model_path))
    for name in tensors:  # expose the intermediate tensors as extra outputs
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    amax: dict[str, np.ndarray] = {}
    token_max: dict[str, list[np.ndarray]] = {name: [] for name in tensors}
    for feed in calibration_feeds(tokenizer_path, inputs, pad_id, texts, table):
        mask = feed["attention_mask"].astype(bool)  # [b, T]
        for name, out in zip(tensors, session.run(tensors, feed)):
            rows = np.abs(out).reshape(-1, out.shape[-1])  # [b*T, K] (or whatever leads the channel axis)
            peak = rows.max(axis=0)  # [K]
            amax[name] = peak if name not in amax else np.maximum(amax[name], peak)
            real = rows[mask.reshape(-1)] if out.shape[:2] == mask.shape else rows
            token_max[name].append(real.max(axis=1))  # [tokens]
    ratios = {name: np.concatenate(t) for name, t in token_max.items()}
    return {
        name: {"absmax": amax[name], "outlier_ratio": float(r.max() / max(float(np.median(r)), 1e-12))}
        for name, r in ratios.items()
    }


def quantize_graph(fp32_dir: Path, target: Path, meta: dict, recipe: dict, texts: list[str]) -> dict:
    """Write the int8 graph of the fp32 export at ``fp32_dir`` to ``target`` following ``recipe`` (see
    ``mlse.encoders.onnx.export.INT8_RECIPE``), calibrating on ``texts``; returns what was done, for export.json."""
    import onnx  # lazy: optional runtime, only for the onnx backends
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static

    model = onnx.load(str(fp32_dir / "model.onnx"))
    for i, node in enumerate(model.graph.node):  # the quantiser selects nodes by name
        node.name = node.name or f"mlse_node_{i}"
    nodes = matmul_roles(model.graph)
    keep = select(nodes, list(recipe.get("keep_fp32", [])))
    table = np.load(fp32_dir / meta["embedding_table"], mmap_mode="r") if meta.get("embedding_table") else None
    tokenizer = fp32_dir / "tokenizer.json"
    done: dict = {}
    rule = recipe.get("keep_outliers")

    def stats_of(tensors: list[str]) -> dict[str, dict]:
        return activation_stats(
            fp32_dir / "model.onnx", tokenizer, meta["inputs"], meta["pad_token_id"], tensors, texts, table
        )

    if rule:  # measure which MatMuls meet outlier tokens, keep the worst in fp32
        inputs = {n.name: n.input[0] for n in model.graph.node if n.name in {m.name for m in nodes}}
        stats = stats_of(sorted(set(inputs.values())))
        ratios = {name: stats[tensor]["outlier_ratio"] for name, tensor in inputs.items()}
        outliers = outlier_nodes(nodes, ratios, rule)
        keep = [m.name for m in nodes if m.name in set(keep) | set(outliers)]
        done["outlier_ratios"] = {m.name: round(ratios[m.name], 2) for m in nodes if m.role in rule.get("roles", [])}
    groups = 0
    if recipe.get("smooth_alpha"):
        groups = smooth_matmuls(
            model,
            lambda names: {name: s["absmax"] for name, s in stats_of(names).items()},
            alpha=recipe["smooth_alpha"],
            roles=recipe.get("smooth_roles", SMOOTH_ROLES),
            skip=keep,
        )
    big = model.ByteSize() > 1_500_000_000  # protobuf's 2 GB limit: weights go beside the graph
    smoothed = target.parent / "smoothed-fp32.onnx"  # intermediate, removed below
    onnx.save(model, str(smoothed), save_as_external_data=big)
    del model
    chosen = [n.name for n in nodes if n.name not in keep]
    done |= {"smoothed_groups": groups, "kept_fp32": keep, "quantized_matmuls": len(chosen)}
    if nodes and not chosen:  # everything kept in fp32: nothing to quantise
        smoothed.rename(target)
        return done
    common = dict(
        op_types_to_quantize=list(recipe.get("op_types_to_quantize", ["MatMul"])),
        per_channel=bool(recipe.get("per_channel", True)),
        reduce_range=bool(recipe.get("reduce_range")),
        weight_type=getattr(QuantType, recipe.get("weight_type", "QInt8")),
        nodes_to_quantize=chosen or None,
        use_external_data_format=big,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    # The quantiser logs a generic "consider pre-processing" warning through the root logger; it does not apply here.
    with warnings.catch_warnings(), _root_logging_quiet():
        warnings.simplefilter("ignore")
        if recipe.get("method", "dynamic") == "dynamic":
            quantize_dynamic(smoothed, target, **common)
        else:  # static: activation scales fixed from the calibration text (QDQ nodes that onnxruntime fuses)
            feeds = list(
                calibration_feeds(tokenizer, meta["inputs"], meta["pad_token_id"], texts, table, same_width=True)
            )
            feeds = [f for f in feeds if len(f["attention_mask"]) == len(feeds[0]["attention_mask"])]  # one shape
            quantize_static(
                smoothed,
                target,
                SimpleNamespace(get_next=partial(next, iter(feeds), None)),  # onnxruntime's calibration data reader
                quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8,
                calibrate_method=getattr(CalibrationMethod, recipe.get("calibrate_method", "MinMax")),
                **common,
            )
    for leftover in target.parent.glob("smoothed-fp32.onnx*"):
        leftover.unlink()
    return done


@contextlib.contextmanager
def _root_logging_quiet():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
