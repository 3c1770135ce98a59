"""``score`` on the local engine and on Ray (a local Ray started on demand, 1 and 2 model-holding actors): throughput
of the whole command at the largest size (start-up included), peak memory of the driver and of each worker at every
size (flat in N: the input is streamed), and the scored files compared byte for byte.

    nice -n 10 python -m benchmarks.scale_score [--model minilm-en --backend onnx-int8] [--sizes 5000,20000]
    nice -n 10 python -m benchmarks.scale_score --memory-only --memory-config local,ray-2 --sizes 20000,100000
    nice -n 10 python -m benchmarks.scale_score --memory-only --memory-config local,ray-2 --sizes 2000,20000 \
        --distinct 2000      # cheap: repeats served by the cache, the driver's memory by N without the encoding
    nice -n 10 python -m benchmarks.scale_score --sizes 100000,1000000 --tag-repeats --worker-threads 1
    python -m benchmarks.scale_score --quick --model TINY     # seconds of work, ~1 min with Ray's start-up

Pairs: Tatoeba-Challenge X-English translation pairs (every language pair with English, in folder order), each pair kept
only when both its texts are new, so the 2N texts are distinct (encoding dominates, no cache hits; the count is in the
result), up to what the local data holds; with ``--tag-repeats``, past it, the same pairs again with both texts tagged
with the pass number (`` #1``, ...), so every text is still new to the cache (the result counts the real texts apart).
Each run is ``python -m mlse score`` in a fresh process with an empty
embedding cache (the model's ONNX export and tokenizer are shared: no run re-exports a model), so Ray's start (the
cluster, then one model load per actor) is counted as a user sees it. At the largest size every engine runs
(``--configs``); at every size the ``--memory-config`` engines run, for the peak memory of the driver and of each
worker by N (each Ray worker reports its own ``ru_maxrss``; the driver, the whole process on the local engine, is
measured by ``wait4``); ``--memory-only`` runs just those (the flatness check: ``memory_flat`` gives each one's spread
over the sizes against the 20 % and 1.5 GB targets). CPU time is recorded beside the wall clock (the driver's from
``wait4``, each Ray worker's as it reports it; Ray's own daemons are not counted), because on a shared machine the wall
clock measures the other jobs too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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
PROGRESS_LINE = re.compile(r"scoring: ([\d,]+) / [\d,]+ rows")
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


def tagged(pairs: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """``n`` pairs: ``pairs`` as they are, then again with both texts tagged with the pass (`` #1``, `` #2``, ...): past
    the local data, every text is still new to the embedding cache (encoding dominates), at about the same length."""
    return [
        (a, b) if k == 0 else (f"{a} #{k}", f"{b} #{k}")
        for i in range(n)
        for k, (a, b) in [(i // len(pairs), pairs[i % len(pairs)])]
    ]


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
    if engine == "ray" and args.worker_threads:  # each actor's threads (else: the cores shared among the actors)
        env["MLSE_THREADS"] = str(args.worker_threads)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = [(time.perf_counter(), line) for line in proc.stderr]  # each line with when it came
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    shutil.rmtree(env["MLSE_CACHE"], ignore_errors=True)  # ~1.5 kB a text: gigabytes at a million pairs
    stderr = "".join(line for _, line in lines)
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
    first = next(((t, _number(m[1])) for t, line in lines if (m := PROGRESS_LINE.search(line))), None)
    end = next((t for t, line in reversed(lines) if line.startswith("wrote ")), None)
    workers_cpu = sum(w["cpu_s"] for w in workers_seen)
    return {
        "config": config,
        "n": n,
        "wall_s": round(seconds, 1),
        "rows_per_s": round(n / seconds, 1),
        # after start-up: from the first progress line (the first chunks back) to the scored file written
        "steady_rows_per_s": round((n - first[1]) / (end - first[0]), 1) if first and end and end > first[0] else None,
        "first_rows_s": round(first[0] - started, 1) if first else None,
        "driver_cpu_s": round(cpu, 1),
        "workers_cpu_s": round(workers_cpu, 1),
        "rows_per_cpu_s": round(n / (cpu + workers_cpu), 1),
        "driver_peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "workers": workers_seen,
        "worker_peak_rss_mib": max((w["peak_rss_mib"] for w in workers_seen), default=None),
        "scored": out,
    }


def memory_by_n(runs: list[dict], configs: list[str]) -> dict[str, dict[int, dict]]:
    """{config: {n: peak memory (MiB) of the driver and of its largest worker}} of the memory runs."""
    return {
        config: {
            r["n"]: {"driver_peak_rss_mib": r["driver_peak_rss_mib"], "worker_peak_rss_mib": r["worker_peak_rss_mib"]}
            for r in runs
            if r["config"] == config
        }
        for config in configs
    }


FLAT_SPREAD = 0.20  # the target: peak memory at the largest N within 20 % of the smallest
MAX_WORKER_MIB = 1.5 * 1024  # and at most 1.5 GB a worker


def flatness(by_n: dict[int, dict]) -> dict:
    """How much the peaks grow from the smallest N to the largest (largest / smallest - 1; over all sizes, max / min
    - 1), and the targets: within :data:`FLAT_SPREAD` (the workers', and the driver's too), each worker at most
    :data:`MAX_WORKER_MIB`. On Ray the driver's peak is ``wait4``'s: the largest of it and the processes it started
    and waited for (Ray's daemons and actors), so it measures Ray's processes, not only mlse's."""
    sizes = sorted(by_n)
    out: dict = {"sizes": sizes}
    for who in ("driver", "worker"):
        peaks = [by_n[n][f"{who}_peak_rss_mib"] for n in sizes]
        out[f"{who}_growth"] = round(peaks[-1] / peaks[0] - 1, 3)
        out[f"{who}_spread"] = round(max(peaks) / min(peaks) - 1, 3)
    out["worker_flat_within_20pct"] = len(sizes) > 1 and out["worker_spread"] <= FLAT_SPREAD  # the target
    out["flat_within_20pct"] = out["worker_flat_within_20pct"] and out["driver_spread"] <= FLAT_SPREAD
    out["worker_under_1_5_gb"] = max(by_n[n]["worker_peak_rss_mib"] for n in sizes) <= MAX_WORKER_MIB
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-en")
    parser.add_argument("--backend", default="onnx-int8")
    parser.add_argument("--sizes", default="5000,20000", help="pair counts, comma-separated")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="engines at the largest size")
    parser.add_argument(
        "--memory-config", default="ray-2", help="engines run at every size, for the peak memory by N (comma-separated)"
    )
    parser.add_argument(
        "--memory-only", action="store_true", help="only the --memory-config runs (no throughput comparison)"
    )
    parser.add_argument(
        "--distinct",
        type=int,
        default=None,
        help="cycle the pairs over this many distinct ones (a cheap memory check: the embedding cache serves the "
        "repeats, so the driver's reading, planning and writing are measured, not the encoding); default: all distinct",
    )
    parser.add_argument(
        "--tag-repeats",
        action="store_true",
        help="past the local data's distinct pairs, repeat them with both texts tagged with the pass number (' #1', "
        "...): every text stays new to the cache (encoding dominates) where the data runs out; default: the largest "
        "size is cut to the distinct pairs",
    )
    parser.add_argument("--chunk", type=int, default=512, help="pairs a chunk (score's --chunk)")
    parser.add_argument(
        "--worker-threads",
        type=int,
        default=None,
        help="threads of each Ray actor (MLSE_THREADS); 1 measures worker scaling core by core: without it one actor "
        "takes every core, so two actors on the same cores cannot be faster than it by more than the threads' overhead",
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="JSON to write (default results/scale/scale-score.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    sizes = [40, 80] if args.quick else sorted({int(s) for s in args.sizes.split(",")})
    configs = ["local", "ray-1"] if args.quick else args.configs.split(",")
    if args.quick:  # the tiny model on torch, Ray with one actor for the memory unless other engines are named
        args.backend, args.chunk = "torch", 16
        if args.memory_config == parser.get_default("memory_config"):
            args.memory_config = "ray-1"
    memory_configs = [c for c in args.memory_config.split(",") if c]
    unknown = [c for c in [*configs, *memory_configs] if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown engine config {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    out = output_file(args.out, args.quick, "results/scale/scale-score.json")
    pairs = distinct_pairs(min(sizes[-1], args.distinct or sizes[-1]), args.data_dir)
    distinct = len(pairs)
    if args.distinct:  # the same pairs over and over: the embedding cache serves the repeats
        pairs = [pairs[i % distinct] for i in range(sizes[-1])]
    elif args.tag_repeats and distinct < sizes[-1]:
        pairs = tagged(pairs, sizes[-1])
    elif distinct < sizes[-1]:
        print(f"the local data gives {distinct:,} pairs of distinct texts; the largest size is cut to it")
        sizes = sorted({min(n, distinct) for n in sizes})
    last = memory_configs if args.memory_only else list(dict.fromkeys([*configs, *memory_configs]))
    plan = [(n, c) for n in sizes[:-1] for c in memory_configs] + [(sizes[-1], c) for c in last]
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

    def ratio(a: str, b: str, key: str = "rows_per_s") -> float | None:
        at = {r["config"]: r[key] for r in runs if r["n"] == sizes[-1]}
        return round(at[a] / at[b], 3) if at.get(a) and at.get(b) else None

    speed = {"n": sizes[-1], "ray2_over_ray1": ratio("ray-2", "ray-1"), "ray2_over_local": ratio("ray-2", "local")}
    speed["steady_ray2_over_ray1"] = ratio("ray-2", "ray-1", "steady_rows_per_s")
    speed["steady_ray2_over_local"] = ratio("ray-2", "local", "steady_rows_per_s")
    by_n = memory_by_n(runs, memory_configs)
    result = {
        "benchmark": "scale_score",
        "quick": args.quick,
        "model": args.model,
        "backend": args.backend,
        "chunk": args.chunk,
        "worker_threads": args.worker_threads,
        "sizes": sizes,
        "distinct_texts": 2 * len(set(pairs)) if not args.distinct else 2 * distinct,
        "real_distinct_texts": 2 * distinct,
        "repeated": bool(args.distinct),
        "tagged_repeats": bool(args.tag_repeats) and len(pairs) > distinct,
        "pairs_source": "Tatoeba-Challenge X-English pairs, both texts new (parallel/tatoeba_challenge_v2021-08-07)",
        "runs": runs,
        "speed": speed,
        "worker_peak_rss_mib_by_n": {n: m["worker_peak_rss_mib"] for n, m in by_n[memory_configs[0]].items()},
        "memory_by_n": by_n,
        "memory_flat": {config: flatness(by_n[config]) for config in memory_configs},
        "identical": identical,
        "machine": machine(),
        "note": "wall clock on a shared machine; CPU: the driver's and each Ray worker's (Ray's daemons not counted)",
    }
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(json.dumps({"speed": speed, "memory_by_n": by_n, "memory_flat": result["memory_flat"]}, indent=1))
    print(f"identical scored files across engines: {identical}; wrote {out}")
    if not identical:
        raise SystemExit("the engines' scored files differ")


if __name__ == "__main__":
    main()
