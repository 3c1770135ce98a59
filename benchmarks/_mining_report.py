"""The output of ``benchmarks.mining_scale``: its table rows, the printed report (pools, table, growth,
extrapolations) and the result JSON (EvalResult schema plus "pools", "encode", "workers", "growth",
"extrapolation", "machine"), written atomically.

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks._mining_growth import setting_key
from mlse.atomic import atomic_write_text
from mlse.data.json_safe import nan_to_none
from mlse.evaluation.mining_pool import SRC_SHARE
from mlse.runs.results import EvalResult, format_table


def _n_text(n: float | None) -> str:
    if n is None:
        return "n/a (flat fit: fixed costs dominate the measured sizes)"
    return f"{n:,.0f}" if n < 1e9 else f"{n:.1e}"


def table_rows(n: int, rows: list[dict], worker: dict) -> list[dict]:
    out = []
    for r in rows:
        out.append(
            {
                "N": n,
                "index": setting_key(r),
                "build_s": r["build_s"],
                "search_s": r["search_s"],
                "total_s": r["total_s"],
                "knn_recall": r["knn_recall"],
                "F1_best": r["f1_best"],
                "F1_heldout": r["f1_heldout"],
                "peak_rss_mb": worker["rss_peak_mb"],
                "rss_loaded_mb": worker["rss_loaded_mb"],
            }
        )
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
        print(
            f"\nN={int(n):,} per side: gold {comp['gold_pairs']:,} ({100 * comp['gold_fraction']:.0f} %), "
            f"distractors {comp['n_per_side'] - comp['gold_pairs']:,} per side; "
            f"encode {enc['encode_s']:.1f} s ({cache})"
        )
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
        print(
            f"  exact CPU search runs at {ext['exact_cpu_effective_gflops']:.0f} GFLOP/s effective; mining passes "
            f"1 h at N ~ {_n_text(ext['exact_cpu_n_at_1h_fit'])} (fit) / "
            f"{_n_text(ext['exact_cpu_n_at_1h_quadratic'])} (N^2 law from the largest N)"
        )
        print(
            f"  one GPU at an assumed {ext['gpu_assumed_tflops']:g} TFLOP/s: that N in "
            f"{ext['gpu_exact_s_at_cpu_1h_n']:.0f} s; 1 h at N ~ {_n_text(ext['gpu_exact_n_at_1h'])}; float32 "
            f"vectors fit one 80 GB GPU up to N ~ {_n_text(ext['single_gpu_max_n_float32_80gb'])} "
            "per side"
        )
        for key, value in ext.items():
            if key.endswith("n_at_1h_fit") and not key.startswith("exact"):
                fit = "" if value is None else " (fit)"
                print(f"  {key.removesuffix(' n_at_1h_fit')}: mining passes 1 h at N ~ {_n_text(value)}{fit}")


def write_result(path: Path, model: str, identity: str, args, results: dict, data: dict) -> None:
    scores = {
        f"N={n} {row['index']}": {k: v for k, v in row.items() if k not in ("N", "index")}
        for n, rows in results["table"].items()
        for row in rows
    }
    averages = {
        f"growth:{key}": {"b_total": fit["total"]["b"], "b_search": (fit["search"] or {}).get("b")}
        for key, fit in results["growth"].items()
    }
    config = {k: v for k, v in vars(args).items() if k not in ("worker", "workdir", "out")}
    config.update({"margin": "ratio", "retrieval": "max-score 1:1 (LASER)", "src_share": SRC_SHARE})
    result = EvalResult(
        model=model,
        task="mining-scale",
        split="pool",
        scores=scores,
        config=config,
        data=data,
        averages=averages,
        model_identity=identity,
    )
    obj = result.to_dict() | {
        k: results[k] for k in ("pools", "encode", "workers", "growth", "extrapolation", "machine")
    }
    atomic_write_text(path, json.dumps(nan_to_none(obj), indent=1, ensure_ascii=False) + "\n")
