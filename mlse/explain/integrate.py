"""Integrated Jacobians (Moeller, Nikolaev & Padó, EMNLP 2023): each token's share of a sentence embedding.

For an encoder tail ``f`` (the rest of the network from the representation being attributed to the unit sentence
vector), an input ``x`` [T, H] and a reference ``r`` [T, H], the fundamental theorem of calculus along the straight
path ``r + α (x − r)`` gives

    f(x) − f(r) = Σ_i P[i],    P[i, k] = Σ_D (x − r)[i, D] · ∫₀¹ ∂f_k/∂x[i, D] (r + α (x − r)) dα

so ``P`` [T, d] splits the change of the embedding between the tokens. For two sentences the dot product then splits
into token pairs: ``(f(a) − f(r_a))·(f(b) − f(r_b)) = Σ_ij P_a[i]·Q_b[j]``, the matrix ``A = P_a Q_bᵀ``.

The integral is a ``midpoint`` or ``gauss`` (Gauss-Legendre) quadrature over ``steps`` points; ``P[i]`` is one
forward-mode derivative per token and point (along the token's own change). Tokens equal to the reference contribute
zero and are skipped; batches stay within :data:`CHUNK_BYTES`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mlse.errors import MlseError

RULES = ("gauss", "midpoint")
CHUNK_BYTES = 96 * 2**20  # activations of one batch of directional derivatives (float32, widest layer)


def quadrature(steps: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in (0, 1) and weights (summing to 1) of ``rule`` with ``steps`` points."""
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise MlseError(f"steps must be a positive integer, got {steps!r}")
    if rule == "midpoint":
        return (np.arange(steps) + 0.5) / steps, np.full(steps, 1.0 / steps)
    if rule == "gauss":
        nodes, weights = np.polynomial.legendre.leggauss(int(steps))
        return (nodes + 1.0) / 2.0, weights / 2.0
    raise MlseError(f"unknown integration rule {rule!r}; expected one of {', '.join(RULES)}")


def token_contributions(tail: Callable, x, r, *, steps: int, rule: str, width: int = 0, jvp: Callable | None = None):
    """``P`` [T, d] (float64 numpy): token ``i``'s integrated contribution to ``f(x) − f(r)``.

    ``tail``: a differentiable torch function [B, T, H] -> [B, d]; ``x``, ``r``: [T, H] float32 tensors; ``width``: the
    widest activation per token inside the tail, to size the batches; ``jvp(points [S, T, H], directions [C, S, T, H])
    -> [C, S, d]``: used instead of dual numbers when given.
    """
    import torch  # lazy: only computing needs it
    import torch.autograd.forward_ad as fwad

    nodes, weights = quadrature(steps, rule)
    x, r = x.detach(), r.detach()
    delta = x - r  # [T, H]
    n_tokens, hidden = delta.shape
    n_steps = len(nodes)
    moving = [i for i in range(n_tokens) if bool(delta[i].abs().max() > 0)]
    alphas = torch.tensor(nodes, dtype=x.dtype)
    path = r.unsqueeze(0) + alphas[:, None, None] * delta.unsqueeze(0)  # [S, T, H]
    w = torch.tensor(weights, dtype=torch.float64)
    out: np.ndarray | None = None
    # One batch row per (token, path point); repeating the primal per token runs faster on a CPU than vmap.
    per_token = 8 * n_steps * n_tokens * max(width, hidden, n_tokens) * 4  # bytes of one token's activations
    chunk = max(1, CHUNK_BYTES // max(per_token, 1))
    with torch.no_grad(), fwad.dual_level():
        for start in range(0, len(moving), chunk):
            rows = moving[start : start + chunk]
            c = len(rows)
            tangent = torch.zeros((c, n_steps, n_tokens, hidden), dtype=x.dtype)  # [c, S, T, H]
            tangent[torch.arange(c), :, torch.tensor(rows)] = delta[rows].unsqueeze(1)
            if jvp is not None:
                derivative = jvp(path, tangent)  # [c, S, d]
            else:
                primal = path.repeat(c, 1, 1)  # [c*S, T, H], point-major within each token
                result = tail(fwad.make_dual(primal, tangent.reshape(c * n_steps, n_tokens, hidden)))
                derivative = fwad.unpack_dual(result).tangent.reshape(c, n_steps, -1)  # [c, S, d]
            if out is None:
                out = np.zeros((n_tokens, derivative.shape[-1]), dtype=np.float64)
            out[rows] = torch.einsum("s,csd->cd", w, derivative.double()).numpy()
    if out is None:  # nothing moves: every contribution is zero
        with torch.no_grad():
            dim = tail(x.unsqueeze(0)).shape[-1]
        out = np.zeros((n_tokens, dim), dtype=np.float64)
    return out


def endpoints(tail: Callable, x, r) -> tuple[np.ndarray, np.ndarray]:
    """(f(x), f(r)) as float64 vectors: the exact embeddings of the input and of the reference."""
    import torch  # lazy: only computing needs it

    with torch.no_grad():
        both = tail(torch.stack([x, r])).double().numpy()  # [2, d]
    return both[0], both[1]
