"""A linear bridge from a student's embedding space into a teacher's, fitted by least squares.

A student that already is a sentence encoder lives in a space unrelated to the teacher's; rotating it there by
gradient steps would spend the MSE-distillation budget on a change of basis. The bridge does that in closed form::

    W, b = argmin_{W, b} sum_i || s(x_i) W + b - t(x_i) ||^2 + lam ||W||^2         (ridge least squares)

on the English side of the training pairs, and appends ``x -> x W + b`` to the student as a trainable ``Dense``
layer (identity activation).
"""

from __future__ import annotations

import numpy as np

from mlse.encoders.st_compat import st_modules


def fit_linear_map(source: np.ndarray, target: np.ndarray, ridge: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """Ridge least squares ``target ≈ source @ W + b``: returns ``W [d_s, d_t]`` and ``b [d_t]`` (float32).

    ``ridge`` is relative to the centred source's mean squared singular value (scale-free); the bias is unpenalised.
    """
    source = np.asarray(source, dtype=np.float64)  # [n, d_s]
    target = np.asarray(target, dtype=np.float64)  # [n, d_t]
    if source.ndim != 2 or target.ndim != 2 or len(source) != len(target):
        raise ValueError(f"need [n, d_s] and [n, d_t] arrays with the same n, got {source.shape} and {target.shape}")
    if len(source) < 2:
        raise ValueError("need at least 2 rows to fit a linear map")
    mu_s, mu_t = source.mean(axis=0), target.mean(axis=0)
    xs, xt = source - mu_s, target - mu_t
    gram = xs.T @ xs  # [d_s, d_s]
    lam = ridge * np.trace(gram) / gram.shape[0]
    w = np.linalg.solve(gram + lam * np.eye(gram.shape[0]), xs.T @ xt)  # [d_s, d_t]
    b = mu_t - mu_s @ w  # [d_t]
    return w.astype(np.float32), b.astype(np.float32)


def dense_layer(w: np.ndarray, b: np.ndarray):
    """The fitted map as a trainable sentence-transformers ``Dense`` module (no activation)."""
    import torch

    models = st_modules()
    weight = torch.from_numpy(np.ascontiguousarray(w.T))  # Dense stores [d_out, d_in]
    return models.Dense(
        w.shape[0],
        w.shape[1],
        bias=True,
        activation_function=torch.nn.Identity(),
        init_weight=weight,
        init_bias=torch.from_numpy(b.copy()),
    )


def r2_score(source: np.ndarray, target: np.ndarray, w: np.ndarray, b: np.ndarray) -> float:
    """Share of the target's variance the map explains (1 = perfect)."""
    residual = target - (source @ w + b)
    return float(1.0 - (residual**2).sum() / ((target - target.mean(axis=0)) ** 2).sum())
