"""What each serving lever buys, without HTTP: the Score tab's work for many users at once, in this process.

    python -m benchmarks.serving_levers [--backend onnx-int8] [--clients 20] [--requests 10] [--repeats 2]
                                        [--models NAME ...] [--cache DIR] [--out results/app/serving-levers.json]
    python -m benchmarks.serving_levers --quick   # minilm-en on torch, 2 clients x 2 requests, one repeat

The app's load benchmark (benchmarks/app_load.py) measures the whole path a visitor's request takes; this one isolates
the part the serving code controls: ``score_models`` (what the page, Gradio's ``score`` endpoint and ``POST
/api/score`` all call) from ``--clients`` threads released together, ``--requests`` pairs each, every sentence new
(:func:`app_load.distinct_pairs`). Each configuration runs ``--repeats`` times, interleaved with the others, so a load
change on a shared machine touches all of them alike:

- ``batched``: as the app runs (the state's micro-batcher, mlse/serving/batching.py: concurrent requests share one
encoder
  call per model);
- ``unbatched``: every request calls its encoders alone (``state.batcher = None``);
- ``batched-torch1`` / ``unbatched-torch1``: the same with torch on one intra-op thread (on the onnx backends torch
  only runs the trained heads: two or three 384 x 384 products a call, where waking a second thread costs more
  than the product on a busy CPU).

It also measures, one request at a time, the CPU and wall time of each model's share of a request (``per_model_ms``,
with torch on 2 threads, then on 1): a scorer ticked with its backbone costs only its heads, since its backbone's
rows come from the embedding cache that the backbone's own call filled a moment before (the forward is shared).
Reported for each configuration: p50 / p95 of the requests' wall time, requests per second, the process's CPU time
per request (all its threads: less sensitive than wall time to other work on a shared machine, though spinning
threads count), the micro-batcher's calls and largest batch; and the process's RSS, the CPU and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.common import QUICK_HELP, distinct_pairs, latency_summary, machine, output_file, renice
from mlse.atomic import atomic_write_text
from mlse.serving.procmem import memory_mb

CONFIGS = ("batched", "unbatched", "batched-torch1", "unbatched-torch1")
QUICK = {"backend": "torch", "clients": 2, "requests": 2, "repeats": 1, "models": ["minilm-en"]}


def run_config(state, config: str, names: list[str], pairs: list[tuple[str, str]], clients: int) -> dict:
    """``clients`` threads released together, each scoring its share of ``pairs`` with every model in ``names``."""
    import torch

    from mlse.serving.batching import MicroBatcher
    from mlse.serving.pair_scoring import score_models

    torch.set_num_threads(1 if config.endswith("torch1") else 2)  # threads made below start with this count
    state.batcher = None if config.startswith("unbatched") else MicroBatcher()
    share = len(pairs) // clients
    times, failures, start = [], [], threading.Barrier(clients + 1)
    lock = threading.Lock()

    def client(mine):
        start.wait()
        for s1, s2 in mine:
            t = time.perf_counter()
            scores, failed = score_models(state, names, s1, s2)
            with lock:
                times.append(time.perf_counter() - t)
                failures.extend(failed)

    threads = [threading.Thread(target=client, args=(pairs[i * share : (i + 1) * share],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.join()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    stats = state.batcher.stats if state.batcher is not None else None
    return {
        "config": config,
        **latency_summary(times),
        "requests_per_s": round(len(times) / wall, 2),
        "cpu_ms_per_request": round(1000 * cpu / max(1, len(times)), 1),
        "failures": [f"{n}: {why}"[:200] for n, why in failures[:5]],
        "batcher_calls": stats.calls if stats else None,
        "largest_batch": stats.largest_batch if stats else None,
    }


def per_model_ms(state, names: list[str], pairs: list[tuple[str, str]], torch_threads: int) -> dict:
    """Each model's CPU ms (every thread of this process) and wall ms per request, one request at a time, models in
    the page's order, torch on ``torch_threads`` intra-op threads (p50 over ``pairs``)."""
    import torch

    from mlse.serving.pair_scoring import score_models

    torch.set_num_threads(torch_threads)
    cpu, wall = {name: [] for name in names}, {name: [] for name in names}
    for s1, s2 in pairs:
        for name in names:
            t, c = time.perf_counter(), time.process_time()
            score_models(state, [name], s1, s2)
            wall[name].append(1000 * (time.perf_counter() - t))
            cpu[name].append(1000 * (time.process_time() - c))
    return {
        name: {"cpu_ms": round(float(np.median(cpu[name])), 2), "wall_ms": round(float(np.median(wall[name])), 2)}
        for name in names
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving_levers", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="onnx-int8")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=10, help="requests per client and configuration")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every configuration, interleaved")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--models", nargs="+", default=None, help="default: what the page ticks for a visitor")
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="a cache folder with the models prepared (conversions, exports); its embeddings are "
        "emptied first (default: a new temporary folder)",
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=None, help="default: results/app/serving-levers-<backend>.json")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, getattr(args, key) if key == "models" and args.models else value)
    out = output_file(args.out, args.quick, f"results/app/serving-levers-{args.backend}.json")
    cache = args.cache or Path(tempfile.mkdtemp(prefix="mlse-levers-cache-"))
    shutil.rmtree(cache / "embeddings", ignore_errors=True)  # every pair is new to the cache
    os.environ.update({"MLSE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "MLSE_RUNS": tempfile.mkdtemp()})
    reniced = renice()
    from mlse.data.hub_probe import remember
    from mlse.serving.app_state import AppState
    from mlse.serving.pair_scoring import score_models

    remember(False)
    state = AppState(backend=args.backend)
    names = args.models or state.default_selection()[0]
    per_round = args.clients * args.requests
    sequential = 4 if args.quick else 40  # pairs scored one at a time: half with torch on 2 threads, half on 1
    pairs = distinct_pairs(1 + sequential + per_round * len(args.configs) * args.repeats, args.data_dir)
    scores, failed = score_models(state, names, *pairs[0])  # loads every model
    if failed:
        raise SystemExit(f"models that do not score here: {failed}")
    loaded = memory_mb()
    result = {
        "command": "python -m benchmarks.serving_levers " + " ".join(sys.argv[1:] if argv is None else argv),
        "backend": args.backend,
        "threads_env": os.environ.get("MLSE_THREADS"),
        "models": names,
        "clients": args.clients,
        "requests": args.requests,
        "quick": args.quick,
        **machine(),
        "reniced": reniced,
        "memory_models_loaded": loaded,
        "rounds": [],
    }
    import torch

    threads_before = torch.get_num_threads()  # each measurement sets its own; restored after
    half, result["per_model_ms"] = sequential // 2, {}
    for i, threads in enumerate((2, 1)):
        share = pairs[1 + i * half : 1 + (i + 1) * half]
        result["per_model_ms"][f"torch_threads_{threads}"] = per_model_ms(state, names, share, threads)
    print(f"{len(names)} models; per model, one request at a time: {result['per_model_ms']}")
    offset = 1 + sequential
    for repeat in range(args.repeats):
        for config in args.configs:
            r = run_config(state, config, names, pairs[offset : offset + per_round], args.clients)
            offset += per_round
            result["rounds"].append({"repeat": repeat, **r})
            print(
                f"{config:>17}: p50 {r['p50_ms']} / p95 {r['p95_ms']} ms, {r['requests_per_s']} req/s, "
                f"CPU {r['cpu_ms_per_request']} ms/request, "
                f"encoder calls {r['batcher_calls']}, largest batch {r['largest_batch']}"
            )
    torch.set_num_threads(threads_before)
    result["memory_at_end"] = memory_mb()
    result["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(out, json.dumps(result, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
