"""``score`` on the local engine and on Ray (a local Ray started on demand, 1 and 2 model-holding actors): throughput
of the whole command at the largest size (start-up included), peak memory per worker at every size, and the scored
files compared byte for byte.

    nice -n 10 python -m benchmarks.scale_score [--model minilm-en --backend onnx-int8] [--sizes 5000,20000]
    python -m benchmarks.scale_score --quick --model TINY     # seconds of work, ~1 min with Ray's start-up

Pairs: Tatoeba-Challenge X-English translation pairs (every language pair with English, in folder order), each pair kept
only when both its texts are new, so the 2N texts are distinct (encoding dominates, no cache hits; the count is in the
result), up to what the local data holds. Each run is ``python -m mlse score`` in a fresh process with an empty
embedding cache (the model's ONNX export and tokenizer are shared: no run re-exports a model), so Ray's start (the
cluster, then one model load per actor) is counted as a user sees it. At the largest size every engine runs
(``--configs``); at the smaller sizes only ``--memory-config``, for the peak memory per worker (each Ray worker reports
its own ``ru_maxrss``; the local engine's worker is the process, measured by ``wait4``). CPU time is recorded beside the
wall clock (the driver's from ``wait4``, each Ray worker's as it reports it; Ray's own daemons are not counted), because
on a shared machine the wall clock measures the other jobs too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text
from mlse.data import load_parallel, parallel_pairs
from mlse.dirs import cache_root

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("local", "ray-1", "ray-2")
WORKER_LINE = re.compile(r"worker (\S+): (\d+) chunk\(s\), peak memory ([\d,.]+) MiB, ([\d,.]+) CPU-s")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def distinct_pairs(n: int, data_dir=None) -> list[tuple[str, str]]:
    """Up to ``n`` Tatoeba-Challenge X-English pairs whose two texts appear nowhere else among the pairs taken."""
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for folder in parallel_pairs(data_dir):
        if "eng" not in folder.split("-"):
            continue
        lang = next(c for c in folder.split("-") if c != "eng")
        corpus = load_parallel(f"{lang}-eng", data_dir)
        for a, b in zip(corpus.src, corpus.tgt):
            a, b = " ".join(a.split()), " ".join(b.split())
            if a and b and a != b and a not in seen and b not in seen:
                seen.update((a, b))
                pairs.append((a, b))
                if len(pairs) == n:
                    return pairs
    return pairs


def pairs_file(pairs: list[tuple[str, str]], folder: Path) -> Path:
    path = folder / f"pairs-{len(pairs)}.tsv"
    path.write_text("sentence1\tsentence2\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return path


def fresh_cache(folder: Path) -> Path:
    """A cache root with an empty embedding cache, whose other folders (model exports, tokenizers, converted weights)
    link to this user's: every run encodes every text, and none re-exports a model."""
    root = Path(tempfile.mkdtemp(dir=folder, prefix="cache-"))
    for entry in cache_root().iterdir() if cache_root().is_dir() else ():
        if entry.name != "embeddings" and entry.is_dir():
            (root / entry.name).symlink_to(entry, target_is_directory=True)
    return root


def run(args, pairs: Path, config: str, folder: Path) -> dict:
    engine, _, workers = config.partition("-")
    out = folder / f"{pairs.stem}-{config}.csv"
    argv = [sys.executable, "-m", "mlse", "score", str(pairs), "--models", args.model, "--backend", args.backend]
    argv += ["--out", str(out), "--engine", engine, "--chunk", str(args.chunk)]
    argv += ["--workers", workers] if workers else []
    env = dict(os.environ, MLSE_CACHE=str(fresh_cache(folder)), HF_HUB_OFFLINE="1")
    started = time.perf_counter()
    with open(folder / "err.txt", "w+", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        err.seek(0)
        stderr = err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{stderr[-3000:]}")
    workers_seen = [
        {"worker": m[1], "chunks": int(m[2]), "peak_rss_mib": _number(m[3]), "cpu_s": _number(m[4])}
        for m in WORKER_LINE.finditer(stderr)
    ]
    if not workers_seen:  # the local engine: the process is the worker
        workers_seen = [{"worker": "driver", "chunks": None, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}]
        workers_seen[0]["cpu_s"] = 0.0  # counted as the driver's
    n = int(pairs.stem.split("-")[1])
    cpu = usage.ru_utime + usage.ru_stime
    workers_cpu = sum(w["cpu_s"] for w in workers_seen)
    return {
        "config": config,
        "n": n,
        "wall_s": round(seconds, 1),
        "rows_per_s": round(n / seconds, 1),
        "driver_cpu_s": round(cpu, 1),
        "workers_cpu_s": round(workers_cpu, 1),
        "rows_per_cpu_s": round(n / (cpu + workers_cpu), 1),
        "driver_peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "workers": workers_seen,
        "worker_peak_rss_mib": max((w["peak_rss_mib"] for w in workers_seen), default=None),
        "scored": out,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-en")
    parser.add_argument("--backend", default="onnx-int8")
    parser.add_argument("--sizes", default="5000,20000", help="pair counts, comma-separated")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="engines at the largest size")
    parser.add_argument("--memory-config", default="ray-2", help="the engine run at the smaller sizes too")
    parser.add_argument("--chunk", type=int, default=512, help="pairs a chunk (score's --chunk)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="JSON to write (default results/scale/scale-score.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    sizes = [40, 80] if args.quick else sorted({int(s) for s in args.sizes.split(",")})
    configs = ["local", "ray-1"] if args.quick else args.configs.split(",")
    if args.quick:
        args.backend, args.chunk, args.memory_config = "torch", 16, "ray-1"
    out = output_file(args.out, args.quick, "results/scale/scale-score.json")
    pairs = distinct_pairs(sizes[-1], args.data_dir)
    if len(pairs) < sizes[-1]:
        print(f"the local data gives {len(pairs):,} pairs of distinct texts; the largest size is cut to it")
        sizes = sorted({min(n, len(pairs)) for n in sizes})
    plan = [(n, args.memory_config) for n in sizes[:-1]] + [(sizes[-1], c) for c in configs]
    runs, identical = [], True
    with tempfile.TemporaryDirectory(prefix="mlse-scale-score-") as tmp:
        folder = Path(tmp)
        reference: dict[int, bytes] = {}
        for n, config in plan:
            result = run(args, pairs_file(pairs[:n], folder), config, folder)
            data = Path(result.pop("scored")).read_bytes()
            identical &= reference.setdefault(n, data) == data
            runs.append(result)
            print(json.dumps(result), flush=True)
    at = {r["config"]: r["rows_per_s"] for r in runs if r["n"] == sizes[-1]}

    def ratio(a: str, b: str) -> float | None:
        return round(at[a] / at[b], 3) if a in at and b in at else None

    speed = {"n": sizes[-1], "ray2_over_ray1": ratio("ray-2", "ray-1"), "ray2_over_local": ratio("ray-2", "local")}
    memory = {r["n"]: r["worker_peak_rss_mib"] for r in runs if r["config"] == args.memory_config}
    result = {
        "benchmark": "scale_score",
        "quick": args.quick,
        "model": args.model,
        "backend": args.backend,
        "chunk": args.chunk,
        "sizes": sizes,
        "distinct_texts": 2 * sizes[-1],
        "pairs_source": "Tatoeba-Challenge X-English pairs, both texts new (parallel/tatoeba_challenge_v2021-08-07)",
        "runs": runs,
        "speed": speed,
        "worker_peak_rss_mib_by_n": memory,
        "identical": identical,
        "machine": machine(),
        "note": "wall clock on a shared machine; CPU: the driver's and each Ray worker's (Ray's daemons not counted)",
    }
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(json.dumps({"speed": speed, "memory": memory}, indent=1))
    print(f"identical scored files across engines: {identical}; wrote {out}")
    if not identical:
        raise SystemExit("the engines' scored files differ")


if __name__ == "__main__":
    main()
