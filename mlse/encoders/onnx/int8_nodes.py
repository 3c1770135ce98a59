"""Which MatMuls of an exported transformer play which role, and which of them an int8 recipe keeps in fp32.

Roles are read from the graph's structure, never from node names (which differ between exporters): ``qkv``
(constant-weight MatMuls sharing their input), ``attn_out`` (input from a MatMul of two activations), ``ffn_in``
(output reaches an activation function), ``ffn_out`` (input from one), ``other`` (a pooler, a Dense head). A node's
layer is the number of ``ffn_out`` MatMuls before it, from 0; nodes after the last one are ``other`` at ``n_layers``.

Selectors ``role@layers`` name the nodes kept in fp32: ``ffn_out@-1``, ``ffn_out@0,-1``, ``attn_out@-3:``, ``*@0``,
``ffn_out`` (every layer). A selector that matches nothing is logged and ignored: the model is quantised in full
rather than refused.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

log = logging.getLogger(__name__)

ROLES = ("qkv", "attn_out", "ffn_in", "ffn_out", "other")
# Ops that compute an activation function, or the characteristic parts of one written out (erf-GELU, tanh-GELU).
_ACTIVATIONS = {"Erf", "Gelu", "FastGelu", "BiasGelu", "Relu", "Tanh", "Sigmoid", "Softplus", "QuickGelu", "Swish"}
# Ops walked through when looking for what feeds or consumes a MatMul (element-wise and layout ops; a LayerNorm, a
# Softmax or another MatMul ends the walk).
_PASS = {"Reshape", "Transpose", "Mul", "Add", "Div", "Sub", "Cast", "Squeeze", "Unsqueeze", "Identity", "Pow", "Sqrt"}
_DEPTH = 6


@dataclass(frozen=True)
class MatMulNode:
    name: str
    role: str
    layer: int
    k: int  # weight rows (input features)
    n: int  # weight columns (output features)


def matmul_roles(graph) -> list[MatMulNode]:
    """Every MatMul of ``graph`` (an ``onnx.GraphProto``) with a constant 2-D weight, in graph order, with its role."""
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def constant(name: str) -> bool:
        return name in inits or (name in producer and producer[name].op_type == "Constant")

    weighted = [
        n for n in graph.node if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2
    ]
    shared = Counter(node.input[0] for node in weighted)

    def walk(tensor: str, ops_at, onward) -> list:
        """Ops met in ``_DEPTH`` steps from ``tensor``: ``ops_at(t)``, the ops next to a tensor; ``onward(op)``, the
        tensors the walk goes on to from an op."""
        seen, frontier = [], [tensor]
        for _ in range(_DEPTH):
            met = [op for t in frontier for op in ops_at(t)]
            seen += met
            frontier = [t for op in met for t in onward(op)]
        return seen

    def upstream(tensor: str) -> list:
        """Ops met walking back from ``tensor`` through element-wise/layout ops (activation inputs only)."""

        def back(op) -> list[str]:
            return [i for i in op.input if i and not constant(i)] if op.op_type in _PASS | _ACTIVATIONS else []

        return walk(tensor, lambda t: [producer[t]] if t in producer else [], back)

    def downstream(tensor: str) -> list:
        return walk(tensor, lambda t: consumers.get(t, []), lambda op: op.output if op.op_type in _PASS else [])

    def role(node) -> str:
        if shared[node.input[0]] >= 2:
            return "qkv"
        before = upstream(node.input[0])
        if any(n.op_type == "MatMul" and not any(constant(i) for i in n.input) for n in before[:4]):
            return "attn_out"
        if any(n.op_type in _ACTIVATIONS for n in downstream(node.output[0])):
            return "ffn_in"
        if any(n.op_type in _ACTIVATIONS for n in before):
            return "ffn_out"
        return "other"

    out, layer = [], 0
    for node in weighted:
        k, n = (int(d) for d in inits[node.input[1]].dims)
        r = role(node)
        out.append(MatMulNode(node.name, r, layer, k, n))
        if r == "ffn_out":
            layer += 1
    # After the last feed-forward block come only heads (pooler, Dense): whatever they look like, they are "other".
    return [MatMulNode(m.name, "other", m.layer, m.k, m.n) if m.layer == layer else m for m in out]


def _layers(spec: str, n_layers: int) -> set[int]:
    """Layer indices named by ``spec`` ("" = all, "0,-1", "-3:", "2:5") among ``n_layers``; "" also covers the head
    (index ``n_layers``). An index the model does not have (-3 of a 2-layer model) names nothing."""
    if not spec or spec == "all":
        return set(range(n_layers + 1))
    layers = list(range(n_layers))
    try:
        if ":" in spec:
            start, _, stop = spec.partition(":")
            return set(layers[slice(int(start) if start else None, int(stop) if stop else None)])
        picked = (int(i) for i in spec.split(","))
        return {layers[i] for i in picked if -n_layers <= i < n_layers}
    except ValueError:
        raise ValueError(f"bad layer list {spec!r}: use e.g. 0, -1, 0,-1, -3: or 2:5") from None


def select(nodes: list[MatMulNode], selectors: list[str]) -> list[str]:
    """Names of the nodes any selector matches (graph order); each selector that matches nothing is logged."""
    n_layers = sum(1 for n in nodes if n.role == "ffn_out")
    chosen: set[str] = set()
    for selector in selectors:
        role, _, spec = selector.strip().partition("@")  # "ffn_out@-2:" -> "ffn_out", "-2:"
        if role != "*" and role not in ROLES:
            raise ValueError(f"unknown MatMul role {role!r} in {selector!r}; expected one of {', '.join(ROLES)} or *")
        layers = _layers(spec.strip(), n_layers)
        hits = {n.name for n in nodes if (role == "*" or n.role == role) and n.layer in layers}
        if not hits:
            log.warning(
                "int8: no MatMul matches %r in this graph (%d layers found); it is quantised", selector, n_layers
            )
        chosen |= hits
    return [n.name for n in nodes if n.name in chosen]


def outlier_nodes(nodes: list[MatMulNode], ratios: dict[str, float], rule: dict) -> list[str]:
    """The nodes to keep in fp32 because their input has outlier tokens: of the roles in ``rule["roles"]``, those
    whose ``ratios[name]`` (largest / median per-token max |x|) is at least ``rule["min_ratio"]``, largest first, at
    most ``rule["max_share"]`` of the layers (at least one), returned in graph order."""
    n_layers = sum(1 for n in nodes if n.role == "ffn_out")
    roles = set(rule.get("roles", []))
    candidates = [n.name for n in nodes if n.role in roles and ratios.get(n.name, 0.0) >= rule["min_ratio"]]
    cap = max(1, int(n_layers * rule.get("max_share", 1.0)))
    chosen = set(sorted(candidates, key=lambda name: -ratios[name])[:cap])
    return [n.name for n in nodes if n.name in chosen]
