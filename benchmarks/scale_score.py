"""``score`` on the local engine and on Ray (a local Ray started on demand, 1 and 2 model-holding actors): wall time
of the whole command (start-up included), rows/s, a fit t(N) = a + b * N per engine, and the extrapolation to 1M.

    python -m benchmarks.scale_score [--model minilm-en] [--sizes 1000,4000] [--out results/scale/scale-score.json]
    python -m benchmarks.scale_score --quick --model TINY     # seconds of work, ~1 min with Ray's start-up

Pairs: STS Multi MT train, English sentence1 against German sentence2, repeated to N rows (the embedding cache is
off by a fresh MLSE_CACHE per run, so every run encodes everything). Each run is ``python -m mlse score`` in a fresh
process, so Ray's start (the cluster, then one model load per actor) is counted as a user sees it. The scored files
of every engine are compared byte for byte (``identical`` in the result). The 1M-pair figure is an extrapolation of
the fit, labelled so; it was not measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text
from mlse.data.paths import resolve_data_dir

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [("local", None), ("ray", 1), ("ray", 2)]


def pairs_file(n: int, folder: Path, data_dir: Path) -> Path:
    def rows(lang: str) -> list[list[str]]:
        with open(data_dir / "stsb_multi_mt" / f"stsb-{lang}-train.csv", encoding="utf-8", newline="") as fh:
            return list(csv.reader(fh))

    en, de = rows("en"), rows("de")
    path = folder / f"pairs-{n}.tsv"
    lines = ["sentence1\tsentence2"]
    for i in range(n):
        a, b = en[i % len(en)][0], de[i % len(de)][1]
        lines.append(f"{a.replace(chr(9), ' ')}\t{b.replace(chr(9), ' ')}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(model: str, pairs: Path, engine: str, workers: int | None, folder: Path) -> tuple[float, Path]:
    out = folder / f"{pairs.stem}-{engine}-{workers}.csv"
    argv = [sys.executable, "-m", "mlse", "-q", "score", str(pairs), "--models", model, "--out", str(out)]
    argv += ["--engine", engine] + (["--workers", str(workers)] if workers else [])
    env = dict(os.environ, MLSE_CACHE=tempfile.mkdtemp(dir=folder, prefix="cache-"), HF_HUB_OFFLINE="1")
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return seconds, out


def fit(points: list[tuple[int, float]]) -> dict:
    """Least squares t = a + b * N over the measured sizes (two sizes: the line through them)."""
    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    b, a = np.polyfit(n, t, 1) if len(set(n)) > 1 else (t[0] / n[0], 0.0)
    return {"a_s": float(a), "b_s_per_row": float(b), "rows_per_s_marginal": float(1 / b) if b > 0 else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-en")
    parser.add_argument("--sizes", default="1000,4000", help="pair counts, comma-separated")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="JSON to write (default results/scale/scale-score.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    sizes = [32, 64] if args.quick else [int(s) for s in args.sizes.split(",")]
    configs = [("local", None), ("ray", 1)] if args.quick else CONFIGS
    out = output_file(args.out, args.quick, "results/scale/scale-score.json")
    data_dir = resolve_data_dir(args.data_dir)
    runs, identical = [], True
    with tempfile.TemporaryDirectory(prefix="mlse-scale-score-") as tmp:
        folder = Path(tmp)
        for n in sizes:
            pairs = pairs_file(n, folder, data_dir)
            reference = None
            for engine, workers in configs:
                seconds, scored = run(args.model, pairs, engine, workers, folder)
                data = scored.read_bytes()
                reference = data if reference is None else reference
                identical &= data == reference
                runs.append(
                    {
                        "engine": engine,
                        "workers": workers,
                        "n": n,
                        "wall_s": round(seconds, 2),
                        "rows_per_s": round(n / seconds, 1),
                    }
                )
                print(f"{engine:5} workers {workers or '-'}  N {n:>7,}  {seconds:7.1f} s  {n / seconds:8,.0f} rows/s")
    fits = {}
    for engine, workers in configs:
        key = f"{engine}-{workers or 1}"
        fits[key] = fit([(r["n"], r["wall_s"]) for r in runs if (r["engine"], r["workers"]) == (engine, workers)])
        fits[key]["extrapolated_1M_pairs_s"] = fits[key]["a_s"] + fits[key]["b_s_per_row"] * 1_000_000
    result = {
        "benchmark": "scale_score",
        "quick": args.quick,
        "model": args.model,
        "sizes": sizes,
        "runs": runs,
        "fit": fits,
        "identical": identical,
        "machine": machine(),
        "note": "extrapolated_1M_pairs_s is the fit's extrapolation, not a measurement",
    }
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(json.dumps(fits, indent=1))
    print(f"identical scored files across engines: {identical}; wrote {out}")
    if not identical:
        raise SystemExit("the engines' scored files differ")


if __name__ == "__main__":
    main()
