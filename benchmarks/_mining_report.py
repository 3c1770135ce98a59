"""The growth fits, extrapolations and output of ``benchmarks/mining_scale.py``: time = c * N^b per index setting,
where exact search passes an hour (CPU, and an assumed GPU), the printed report and the result JSON.

A helper module of that benchmark (no ``main``), split from it to keep each file short.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from benchmarks._mining_pool import SRC_SHARE
from mlse.atomic import atomic_write_text
from mlse.runs.results import EvalResult, format_table

HOUR_S = 3600.0


# -- growth fits and extrapolation ------------------------------------------------------------------------------------


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


def _n_text(n: float | None) -> str:
    if n is None:
        return "n/a (flat fit: fixed costs dominate the measured sizes)"
    return f"{n:,.0f}" if n < 1e9 else f"{n:.1e}"


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
        ),  # fmt: skip
        "gpu_exact_s_at_cpu_1h_n": 4 * n_1h_quadratic**2 * dim / gpu_flops,
        "gpu_exact_n_at_1h": math.sqrt(HOUR_S * gpu_flops / (4 * dim)),
        # float32 vectors of both sides must fit in GPU memory (80 GB) next to the search buffers: keep half of it.
        "single_gpu_max_n_float32_80gb": 40e9 / (2 * dim * 4),
    }
    for key, fit in fits.items():
        if key != "exact":
            out[f"{key} n_at_1h_fit"] = n_at(fit["total"], HOUR_S)
    return out


# -- output ----------------------------------------------------------------------------------------------------------


def table_rows(n: int, rows: list[dict], worker: dict) -> list[dict]:
    out = []
    for r in rows:
        out.append({"N": n, "index": setting_key(r), "build_s": r["build_s"], "search_s": r["search_s"],
                    "total_s": r["total_s"], "knn_recall": r["knn_recall"], "F1_best": r["f1_best"],
                    "F1_heldout": r["f1_heldout"], "peak_rss_mb": worker["rss_peak_mb"],
                    "rss_loaded_mb": worker["rss_loaded_mb"]})  # fmt: skip
    return out


def print_report(results: dict) -> None:
    for n, enc in results["encode"].items():
        comp = results["pools"][n]
        if enc.get("synthetic"):
            cache = "synthetic vectors, no encoder"
        elif enc.get("from_cache"):
            cache = "all from the embedding cache"
        else:
            cache = f"encoded {enc['encoded']:,}, served {enc['served_from_cache']:,} from the embedding cache"
        print(f"\nN={int(n):,} per side: gold {comp['gold_pairs']:,} ({100 * comp['gold_fraction']:.0f} %), "
              f"distractors {comp['n_per_side'] - comp['gold_pairs']:,} per side; "
              f"encode {enc['encode_s']:.1f} s ({cache})")  # fmt: skip
        for side in ("src", "tgt"):
            counts = [("gold", comp["gold_pairs"]), *comp[f"{side}_distractors"].items()]
            parts = ", ".join(f"{k} {100 * v / comp['n_per_side']:.1f} %" for k, v in counts)
            print(f"  {side} pool: {parts}")
    rows = [r for n in sorted(results["table"], key=int) for r in results["table"][n]]
    print("\n" + format_table(rows, list(rows[0]), digits=2))
    print("\nGrowth, time = c * N^b (log-log fit over the measured sizes):")
    for key, fit in results["growth"].items():
        search = f", search b = {fit['search']['b']:.2f}" if fit.get("search") else ""
        print(f"  {key:<24} total b = {fit['total']['b']:.2f}{search}")
    ext = results["extrapolation"]
    if ext:
        print(f"\n{ext['basis']}:")
        print(f"  exact CPU search runs at {ext['exact_cpu_effective_gflops']:.0f} GFLOP/s effective; mining passes "
              f"1 h at N ~ {_n_text(ext['exact_cpu_n_at_1h_fit'])} (fit) / "
              f"{_n_text(ext['exact_cpu_n_at_1h_quadratic'])} (N^2 law from the largest N)")  # fmt: skip
        print(f"  one GPU at an assumed {ext['gpu_assumed_tflops']:g} TFLOP/s: that N in "
              f"{ext['gpu_exact_s_at_cpu_1h_n']:.0f} s; 1 h at N ~ {_n_text(ext['gpu_exact_n_at_1h'])}; float32 "
              f"vectors fit one 80 GB GPU up to N ~ {_n_text(ext['single_gpu_max_n_float32_80gb'])} "
              "per side")  # fmt: skip
        for key, value in ext.items():
            if key.endswith("n_at_1h_fit") and not key.startswith("exact"):
                fit = "" if value is None else " (fit)"
                print(f"  {key.removesuffix(' n_at_1h_fit')}: mining passes 1 h at N ~ {_n_text(value)}{fit}")


def _finite(obj):
    """NaN / inf -> None, so the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_result(path: Path, model: str, identity: str, args, results: dict, data: dict) -> None:
    scores = {f"N={n} {row['index']}": {k: v for k, v in row.items() if k not in ("N", "index")}
              for n, rows in results["table"].items() for row in rows}  # fmt: skip
    averages = {f"growth:{key}": {"b_total": fit["total"]["b"], "b_search": (fit["search"] or {}).get("b")}
                for key, fit in results["growth"].items()}  # fmt: skip
    config = {k: v for k, v in vars(args).items() if k not in ("worker", "workdir", "out")}
    config.update({"margin": "ratio", "retrieval": "max-score 1:1 (LASER)", "src_share": SRC_SHARE})
    result = EvalResult(model=model, task="mining-scale", split="pool", scores=scores, config=config, data=data,
                        averages=averages, model_identity=identity)  # fmt: skip
    obj = result.to_dict() | {k: results[k] for k in ("pools", "encode", "workers", "growth", "extrapolation",
                                                       "machine")}  # fmt: skip
    atomic_write_text(path, json.dumps(_finite(obj), indent=1, ensure_ascii=False) + "\n")
