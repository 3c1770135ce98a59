"""Forward-mode derivatives of :class:`~mlse.explain.transformer.TransformerBackbone`'s tail, written out by hand.

Dual numbers carry a copy of the primal with every direction; here the primal runs once per point ([S, T, H]) and only
the C directions are batched ([C, S, T, H]), roughly halving the arithmetic. The rules:

- linear ``y = x W + b``: ``dy = dx W``;
- LayerNorm ``y = γ n + β``, ``n = (u − μ) / σ``: ``dy = γ (du − mean(du) − n · mean(du n)) / σ``;
- attention ``p = softmax(q kᵀ / √d)``: ``ds = (dq kᵀ + q dkᵀ) / √d``, ``dp = p (ds − Σ p ds)``,
  ``d(p v) = dp v + p dv``;
- an elementwise activation ``a(z)`` (GELU, tanh ...): ``da = a'(z) dz``, with ``a'`` taken by autograd at the primal;
- pooling: mean, sum and position weights are linear, cls / last token pick a row, max picks each column's argmax;
- L2 normalisation ``y = x / |x|``: ``dy = (dx − y (y · dx)) / |x|``.

The forward pass's :func:`pool`, :func:`split_heads` and :func:`merge_heads` live here too.
"""

from __future__ import annotations

import math


def _linear(dx, module, half=None):
    """``dx W`` (no bias: a derivative); with ``half`` (``torch.bfloat16``) the product runs in that type and
    comes back in ``dx``'s."""
    import torch.nn.functional as F  # lazy: only computing needs it

    if half is None:
        return F.linear(dx, module.weight)
    return F.linear(dx.to(half), module.weight.to(half)).to(dx.dtype)


def _layer_norm(u, du, module):
    """(LayerNorm(u), its derivative along du); u [..., H], du [C, ..., H]."""
    mean = u.mean(dim=-1, keepdim=True)
    sigma = (((u - mean) ** 2).mean(dim=-1, keepdim=True) + module.eps).sqrt()
    n = (u - mean) / sigma
    dn = (du - du.mean(dim=-1, keepdim=True) - n * (du * n).mean(dim=-1, keepdim=True)) / sigma
    return module(u), dn * module.weight


def _elementwise(fn, z, dz):
    """(fn(z), fn'(z) dz) for an elementwise ``fn``."""
    import torch  # lazy: only computing needs it

    with torch.enable_grad():
        leaf = z.detach().requires_grad_(True)
        value = fn(leaf)
        (slope,) = torch.autograd.grad(value.sum(), leaf)
    return value.detach(), slope * dz


def split_heads(t, heads: int):
    """[..., T, H] -> [..., heads, T, H / heads]: the attention heads' slices of the hidden states."""
    return t.reshape(*t.shape[:-1], heads, t.shape[-1] // heads).transpose(-3, -2)


def merge_heads(t):
    """[..., heads, T, size] -> [..., T, heads * size]: the inverse of :func:`split_heads`."""
    t = t.transpose(-3, -2)
    return t.reshape(*t.shape[:-2], t.shape[-2] * t.shape[-1])


def _block(backbone, block, h, dh, half=None):
    import torch  # lazy: only computing needs it

    attention = block.attention.self
    projections = (attention.query, attention.key, attention.value)
    q, k, v = (split_heads(m(h), backbone.heads) for m in projections)
    dq, dk, dv = (split_heads(_linear(dh, m, half), backbone.heads) for m in projections)
    scale = 1.0 / math.sqrt(h.shape[-1] // backbone.heads)
    p = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)  # [S, heads, T, T]
    ds = (dq @ k.transpose(-1, -2) + q @ dk.transpose(-1, -2)) * scale  # [C, S, heads, T, T]
    dp = p * (ds - (p * ds).sum(dim=-1, keepdim=True))
    context, dcontext = merge_heads(p @ v), merge_heads(dp @ v + p @ dv)
    out = block.attention.output
    a, da = _layer_norm(out.dense(context) + h, _linear(dcontext, out.dense, half) + dh, out.LayerNorm)
    inner, dinner = _elementwise(
        block.intermediate.intermediate_act_fn, block.intermediate.dense(a), _linear(da, block.intermediate.dense, half)
    )
    return _layer_norm(
        block.output.dense(inner) + a, _linear(dinner, block.output.dense, half) + da, block.output.LayerNorm
    )


def pooling_modes(module) -> tuple[str, ...]:
    """The modes of a sentence-transformers Pooling module (one name, or several whose vectors are concatenated)."""
    mode = module.pooling_mode
    return (mode,) if isinstance(mode, str) else tuple(mode)


def pool(tokens, mode: str):
    """Token states [..., T, H] -> the sentence vector [..., H] by a sentence-transformers pooling ``mode``."""
    import torch  # lazy: only computing needs it

    n = tokens.shape[-2]
    if mode == "cls":
        return tokens[..., 0, :]
    if mode == "lasttoken":
        return tokens[..., -1, :]
    if mode == "max":
        return tokens.max(dim=-2).values
    if mode == "mean":
        return tokens.mean(dim=-2)
    if mode == "mean_sqrt_len_tokens":
        return tokens.sum(dim=-2) / math.sqrt(n)
    weights = torch.arange(1, n + 1, dtype=tokens.dtype)  # weightedmean
    return (tokens * weights[:, None]).sum(dim=-2) / weights.sum()


def _pool(tokens, dtokens, mode: str):
    if mode == "max":
        best = tokens.max(dim=-2)
        index = best.indices.unsqueeze(-2).expand(*dtokens.shape[:-2], 1, dtokens.shape[-1])
        return best.values, dtokens.gather(-2, index).squeeze(-2)
    return pool(tokens, mode), pool(dtokens, mode)  # every other mode is linear: the same operation on both


def _normalize(x, dx):
    norm = x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    y = x / norm
    return y, (dx - y * (dx * y).sum(dim=-1, keepdim=True)) / norm


def _head(backbone, tokens, dtokens):
    import torch  # lazy: only computing needs it

    out, dout = tokens, dtokens
    for module in list(backbone.st)[1:]:
        kind = type(module).__name__
        if kind == "Pooling":
            pooled = [_pool(tokens, dtokens, m) for m in pooling_modes(module)]
            out, dout = torch.cat([p[0] for p in pooled], dim=-1), torch.cat([p[1] for p in pooled], dim=-1)
        elif kind == "Dense":
            value, dvalue = _elementwise(module.activation_function, module.linear(out), _linear(dout, module.linear))
            if getattr(module, "use_residual", False):
                same = module.in_features == module.out_features
                value = value + (out if same else module.residual(out))
                dvalue = dvalue + (dout if same else _linear(dout, module.residual))
            out, dout = value, dvalue
        elif kind == "Normalize":
            out, dout = _normalize(out, dout)
    return _normalize(out, dout)[1]


def tail_jvp(backbone, z, dz, layer: int, precision: str = "float32"):
    """Derivatives [C, S, d] of ``backbone.tail(z, layer)`` (z [S, T, H]) along the directions ``dz`` [C, S, T, H].

    ``precision="bfloat16"``: the blocks' matrix products of the directions (the bulk of the arithmetic) run in
    bfloat16 with float32 results; the primal, normalisations, softmax and pooling stay float32."""
    import torch  # lazy: only computing needs it

    half = {"float32": None, "bfloat16": torch.bfloat16}[precision]
    with torch.no_grad():
        if layer == 0:
            h, dh = _layer_norm(backbone.embed(z, layer_norm=False), dz, backbone.hf.embeddings.LayerNorm)
        else:
            h, dh = z, dz
        for block in backbone.layers[layer:]:
            h, dh = _block(backbone, block, h, dh, half)
        return _head(backbone, h, dh)
