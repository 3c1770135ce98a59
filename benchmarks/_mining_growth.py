"""The growth fits and extrapolations of ``benchmarks.mining_scale``: time = c * N^b per index setting (log-log least
squares over the measured sizes), and where exact search passes an hour on this CPU and on an assumed GPU. Every
extrapolation is labelled as such.

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

import math

import numpy as np

HOUR_S = 3600.0


def fit_power(ns: list[int], ts: list[float]) -> dict | None:
    """Least-squares fit of log t = log c + b log N; None with fewer than two usable points."""
    pts = [(n, t) for n, t in zip(ns, ts) if t > 0]
    if len(pts) < 2 or len({n for n, _ in pts}) < 2:
        return None
    b, log_c = np.polyfit(np.log([n for n, _ in pts]), np.log([t for _, t in pts]), 1)
    return {"b": float(b), "c": float(math.exp(log_c)), "sizes": [n for n, _ in pts], "seconds": [t for _, t in pts]}


def n_at(fit: dict, seconds: float) -> float | None:
    """The N at which c * N^b reaches `seconds` (extrapolation of the fit); None when b < 0.5, i.e. the measured
    times are dominated by fixed costs and say nothing about growth."""
    return (seconds / fit["c"]) ** (1 / fit["b"]) if fit["b"] >= 0.5 else None


def setting_key(row: dict) -> str:
    params = ",".join(f"{k}={v}" for k, v in row["params"].items() if k in ("nprobe", "ef_search"))
    return f"{row['method']} {params}".strip()


def growth(rows_by_n: dict[int, list[dict]]) -> dict:
    """One fit per (method, setting) for total and search time (settings whose nlist scales with N included)."""
    series: dict[str, dict[str, list]] = {}
    for n, rows in sorted(rows_by_n.items()):
        for row in rows:
            s = series.setdefault(setting_key(row), {"n": [], "total": [], "search": []})
            s["n"].append(n)
            s["total"].append(row["total_s"])
            s["search"].append(row["search_s"])
    out = {}
    for key, s in series.items():
        total, search = fit_power(s["n"], s["total"]), fit_power(s["n"], s["search"])
        if total is not None:
            out[key] = {"total": total, "search": search}
    return out


def extrapolate(fits: dict, rows_by_n: dict[int, list[dict]], dim: int, gpu_tflops: float) -> dict:
    """Where exact CPU search passes an hour, and what one GPU would need for the same exact search.

    All numbers are extrapolations: from the measured fit, from the O(N^2 d) law anchored at the largest measured N,
    and (GPU) from an assumed throughput, not a measurement.
    """
    if "exact" not in fits:
        return {}
    n_max = max(rows_by_n)
    exact = next(r for r in rows_by_n[n_max] if r["method"] == "exact")
    # Exact search does N*N*d multiply-adds per direction: 4 N^2 d flops for the two directions.
    cpu_gflops = 4 * n_max**2 * dim / exact["search_s"] / 1e9
    n_1h_quadratic = n_max * math.sqrt(HOUR_S / exact["total_s"])
    gpu_flops = gpu_tflops * 1e12
    out = {
        "basis": "EXTRAPOLATION from the measured sizes, not a measurement",
        "exact_cpu_effective_gflops": cpu_gflops,
        "exact_cpu_n_at_1h_fit": n_at(fits["exact"]["total"], HOUR_S),
        "exact_cpu_n_at_1h_quadratic": n_1h_quadratic,
        "gpu_assumed_tflops": gpu_tflops,
        "gpu_assumption": (
            "faiss GpuIndexFlatIP, float32, one A100/H100-class GPU at the assumed effective "
            "throughput; no GPU was available to measure it"
        ),
        "gpu_exact_s_at_cpu_1h_n": 4 * n_1h_quadratic**2 * dim / gpu_flops,
        "gpu_exact_n_at_1h": math.sqrt(HOUR_S * gpu_flops / (4 * dim)),
        # float32 vectors of both sides must fit in GPU memory (80 GB) next to the search buffers: keep half of it.
        "single_gpu_max_n_float32_80gb": 40e9 / (2 * dim * 4),
    }
    for key, fit in fits.items():
        if key != "exact":
            out[f"{key} n_at_1h_fit"] = n_at(fit["total"], HOUR_S)
    return out
