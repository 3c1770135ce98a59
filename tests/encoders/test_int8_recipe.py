"""The int8 recipe: MatMul roles read from the graph's structure, the fp32 exclusions it honours, its benchmark.

Roles are checked on the tiny models' real exports against the node names torch gives them (the role code itself never
reads names), and on hand-built graphs whose structure is unusual, where the recipe must fall back to quantising.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import mlse.encoders.onnx.export as onnx_export
from mlse.encoders.load import load_encoder
from mlse.encoders.onnx.int8_nodes import MatMulNode, matmul_roles, outlier_nodes, select

# The role each torch module name implies, for checking (the tiny models are BERTs exported by torch).
NAME_ROLES = {
    "query": "qkv",
    "key": "qkv",
    "value": "qkv",
    "attention/output": "attn_out",
    "intermediate": "ffn_in",
    "output/dense": "ffn_out",
}


def _fp32_dir(path: Path) -> Path:
    enc = load_encoder(str(path), backend="onnx", cache=False)
    return enc.export_dir


def _graph(folder: Path):
    import onnx

    return onnx.load(str(folder / onnx_export.MODEL_FILE)).graph


def _role_from_name(name: str) -> str:
    return next(role for key, role in NAME_ROLES.items() if key in name)


def test_roles_and_layers_of_a_bert_graph(tiny_bert):
    nodes = matmul_roles(_graph(_fp32_dir(tiny_bert)))
    assert len(nodes) == 12  # 2 layers x (Q, K, V, attention output, two feed-forward)
    for node in nodes:
        assert node.role == _role_from_name(node.name), node
        assert node.layer == int(node.name.split("layer.")[1].split("/")[0]), node
    ffn_in = next(n for n in nodes if n.role == "ffn_in")
    assert (ffn_in.k, ffn_in.n) == (32, 64)  # hidden 32 -> intermediate 64


def test_a_labse_like_model_has_the_same_roles_and_its_gemm_head_is_not_a_candidate(tiny_labse):
    graph = _graph(_fp32_dir(tiny_labse))
    nodes = matmul_roles(graph)
    assert [n.role for n in nodes] == [_role_from_name(n.name) for n in nodes] and len(nodes) == 12
    assert any(n.op_type == "Gemm" for n in graph.node)  # the Dense head: not a MatMul, never quantised


def _matmul_graph(*chain: tuple[str, tuple[int, int] | None]):
    """A graph x -> op -> op ... -> y; ("MatMul", (k, n)) multiplies by a constant weight, ("Relu", None) etc."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, tensor = [], [], "x"
    for i, (op, shape) in enumerate(chain):
        inputs = [tensor]
        if shape:
            inits.append(numpy_helper.from_array(np.ones(shape, np.float32), f"w{i}"))
            inputs.append(f"w{i}")
        nodes.append(helper.make_node(op, inputs, [f"t{i}"], name=f"{op.lower()}{i}"))
        tensor = f"t{i}"
    return helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None)],
        inits,
    )


def test_a_matmul_after_the_last_feed_forward_block_is_a_head():
    graph = _matmul_graph(("MatMul", (4, 8)), ("Relu", None), ("MatMul", (8, 4)), ("MatMul", (4, 3)))
    assert [(n.name, n.role, n.layer) for n in matmul_roles(graph)] == [
        ("matmul0", "ffn_in", 0),
        ("matmul2", "ffn_out", 0),
        ("matmul3", "other", 1),
    ]
    assert select(matmul_roles(graph), ["other"]) == ["matmul3"]


def test_selectors_pick_roles_and_layers(tiny_bert, caplog):
    nodes = matmul_roles(_graph(_fp32_dir(tiny_bert)))
    names = {n.name: n for n in nodes}
    last_ffn_out = select(nodes, ["ffn_out@-1"])
    assert len(last_ffn_out) == 1 and names[last_ffn_out[0]].layer == 1 and "layer.1/output/dense" in last_ffn_out[0]
    assert {names[n].layer for n in select(nodes, ["*@0"])} == {0} and len(select(nodes, ["*@0"])) == 6
    assert len(select(nodes, ["qkv@0,1"])) == 6 and len(select(nodes, ["attn_out@-2:"])) == 2
    assert select(nodes, ["ffn_out@0", "ffn_out@0"]) == select(nodes, ["ffn_out@0"])  # no duplicates
    with caplog.at_level(logging.WARNING, logger="mlse.encoders.onnx.int8_nodes"):
        assert select(nodes, ["ffn_out@-5", "ffn_out@7"]) == []  # layers a 2-layer model does not have
    assert "no MatMul matches 'ffn_out@-5'" in caplog.text
    with pytest.raises(ValueError, match="unknown MatMul role 'ffn'"):
        select(nodes, ["ffn@0"])
    with pytest.raises(ValueError, match="bad layer list 'x'"):
        select(nodes, ["ffn_out@x"])


def test_an_unrecognised_graph_gets_no_roles_and_no_exclusions(caplog):
    nodes = matmul_roles(_matmul_graph(("MatMul", (4, 3))))
    assert [(n.name, n.role, n.layer) for n in nodes] == [("matmul0", "other", 0)]
    with caplog.at_level(logging.WARNING):
        assert select(nodes, ["ffn_out@-1"]) == []
    assert "0 layers found" in caplog.text


def test_kept_matmuls_stay_fp32_in_the_int8_graph(tiny_bert, tmp_path):
    import onnx

    fp32 = _fp32_dir(tiny_bert)
    plain = {k: v for k, v in onnx_export.INT8_RECIPE.items() if k != "keep_outliers"}  # only the named nodes
    recipe = plain | {"keep_fp32": ["ffn_out@-1", "qkv@0"]}
    onnx_export.quantize_int8(fp32, tmp_path, recipe)
    kept = select(matmul_roles(_graph(fp32)), recipe["keep_fp32"])
    assert len(kept) == 4
    model = onnx.load(str(tmp_path / onnx_export.MODEL_FILE))
    inits = {t.name: t for t in model.graph.initializer}
    by_name = {n.name: n for n in model.graph.node}
    for name in kept:  # still a float MatMul with a float weight
        node = by_name[name]
        assert node.op_type == "MatMul" and inits[node.input[1]].data_type == onnx.TensorProto.FLOAT
    quantised = [n for n in model.graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")]
    assert len(quantised) == 12 - len(kept)
    meta = json.loads((tmp_path / onnx_export.META_FILE).read_text())
    assert meta["kept_fp32"] == kept and meta["quantized_matmuls"] == 8 and meta["quantization"] == recipe
    assert meta["smoothed_groups"] == 3  # Q/K/V of layer 0 are kept, so their group is not rescaled


def test_outlier_rule_keeps_the_worst_ffn_out_up_to_its_share():
    nodes = [MatMulNode(f"{role}{layer}", role, layer, 4, 4) for layer in range(4) for role in ("ffn_in", "ffn_out")]
    ratios = {"ffn_out0": 11.0, "ffn_out1": 5.0, "ffn_out2": 30.0, "ffn_out3": 14.0, "ffn_in2": 50.0}
    rule = {"roles": ["ffn_out"], "min_ratio": 9.0, "max_share": 0.25}
    assert outlier_nodes(nodes, ratios, rule) == ["ffn_out2"]  # a quarter of 4 layers: the worst one
    assert outlier_nodes(nodes, ratios, rule | {"max_share": 0.5}) == ["ffn_out2", "ffn_out3"]  # graph order
    assert outlier_nodes(nodes, ratios, rule | {"max_share": 1.0}) == ["ffn_out0", "ffn_out2", "ffn_out3"]
    assert outlier_nodes(nodes, ratios, rule | {"min_ratio": 60.0}) == []
    assert outlier_nodes(nodes, ratios, rule | {"roles": ["ffn_in"], "max_share": 1.0}) == ["ffn_in2"]


def test_outlier_rule_is_measured_and_honoured_in_the_graph(tiny_bert, tmp_path):
    import onnx

    fp32 = _fp32_dir(tiny_bert)
    recipe = onnx_export.INT8_RECIPE | {"keep_outliers": {"roles": ["ffn_out"], "min_ratio": 0.0, "max_share": 0.5}}
    onnx_export.quantize_int8(fp32, tmp_path, recipe)
    meta = json.loads((tmp_path / onnx_export.META_FILE).read_text())
    ratios = meta["outlier_ratios"]  # measured on the calibration text, one per second feed-forward MatMul
    assert len(ratios) == 2 and all(r >= 1.0 for r in ratios.values())
    assert meta["kept_fp32"] == [max(ratios, key=ratios.get)]  # half of 2 layers: the one with more outliers
    kept = next(n for n in onnx.load(str(tmp_path / onnx_export.MODEL_FILE)).graph.node if n.name in meta["kept_fp32"])
    assert kept.op_type == "MatMul" and meta["quantized_matmuls"] == 11


def test_the_default_recipe_quantises_every_model_it_meets(tiny_bert, tiny_labse):
    """Node selection by role works on each architecture: the int8 graph is built, keeps what the recipe names
    (when the model has it) and stays close to fp32."""
    for path in (tiny_bert, tiny_labse):
        int8 = load_encoder(str(path), backend="onnx-int8", cache=False)
        fp32 = load_encoder(str(path), backend="onnx", cache=False)
        texts = ["a short sentence", "ein etwas längerer Satz mit mehr Wörtern", "短句"]
        cos = (int8.encode(texts) * fp32.encode(texts)).sum(1)
        assert cos.min() > 0.99, cos
        meta = json.loads((int8.export_dir / onnx_export.META_FILE).read_text())
        assert meta["quantization"] == onnx_export.INT8_RECIPE and meta["int8_version"] == onnx_export.INT8_VERSION
        assert len(meta["outlier_ratios"]) == 2 and meta["quantized_matmuls"] == 12 - len(meta["kept_fp32"])


def test_quick_benchmark_runs(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["python -m benchmarks.int8_options"])
    from benchmarks import int8_options

    int8_options.main(
        ["--quick", "--model", str(tiny_bert), "--out", str(tmp_path), "--work", str(tmp_path / "w"), "--threads", "1"]
    )
    result = json.loads((tmp_path / "int8-options-tiny-bert.json").read_text())
    assert list(result["accuracy"]) == [
        "fp32 ONNX",
        "previous recipe",
        "default (INT8_RECIPE)",
        int8_options.SKIP_LN_OFF,
    ]
    assert len(result["sensitivity"]) == 3  # 2 groups + the whole recipe
    assert all(np.isfinite(a["cross"]) for a in result["accuracy"].values())
    assert set(result["speed"]) == {"torch", *result["accuracy"]} and result["speed"]["torch"]["vs_torch"] == 1.0
    assert isinstance(result["isa"], list) and result["cpu"] and "--quick" in result["command"]
    assert result["avx2_saturation"]["fp32 ONNX"] is None  # no int8 MatMul to emulate
    assert result["avx2_saturation"]["previous recipe"]["nodes"] == 12
    table = (tmp_path / "int8-options-tiny-bert.md").read_text()
    assert "| previous recipe |" in table and "1 - mean cos" in table
