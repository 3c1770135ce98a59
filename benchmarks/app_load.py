"""Many users at once: Score-a-pair latency, errors, throughput and memory of the running app for 1, 20 and 60 clients.

    python -m benchmarks.app_load [--backend onnx-int8] [--clients 1 20 60] [--requests 50] [--models NAME ...]
                                  [--path page|direct|json] [--cache DIR] [--runs-dir runs]
                                  [--out results/app/app-load-<backend>[-<path>].json]
    python -m benchmarks.app_load --quick   # minilm-en on torch, 2 clients x 2 requests: proves the script runs

1. Starts ``python app.py`` (the real entry point) with the given backend and an embedding cache without a single
   pair in it (``--cache DIR`` reuses a folder prepared by an earlier run: conversions and ONNX exports kept,
   embeddings emptied; else a fresh one, prepared in a separate process as after the models' first use), waits for
   the page, and scores one pair with every model so all are loaded before timing starts. The app runs with
   ``MLSE_WARM=0``: the start-up warm (mlse.serving.warm) would compete with the first round for the two cores.
2. For each client count C: C threads, each with its own keep-alive HTTP connection, are released together and each
   sends ``--requests`` Score-a-pair requests one after another (the next when the previous answered), every request a
   different STS Multi MT test pair, cross-lingual, and no sentence is sent twice in the whole run (none comes from
   the embedding cache: :func:`~benchmarks.common.distinct_pairs`),
   with the models the page ticks by default for a visitor (``AppState.default_selection``; ``--models`` to choose).
   ``--path``: ``page`` sends the Score button's queued event as the page does (POST, then the event stream, through
   :class:`~benchmarks.common.ApiCaller`); ``direct`` Gradio's unqueued ``score`` endpoint; ``json`` the plain route for
   scripts beside the page (``POST /api/score``, mlse.serving.api_route). A request refused because the app is full
   (HTTP 503, what the page shows as "busy, try again") is counted apart from errors and latencies, and its client
   pauses :data:`~benchmarks.common.BUSY_PAUSE_S` before its next request, as a person would. Reported per round:
   p50 / p95 / p99 / mean / max of the successful requests' wall time, ok / busy / error counts, successful requests
   per second, the app's CPU time per successful request (all its threads, from /proc: what a request costs, less
   sensitive than wall time to other work on a shared machine) and the benchmark clients' own, and the app's resident
   memory after the round (and its peak).
3. The queue round trip of a trivial endpoint (``detect_language``, ~0.1 ms of work) is measured in the same run: 30
   calls with the app idle, and one call every :data:`~benchmarks.common.PROBE_EVERY_S` during each round, so the
   cost of the HTTP + queue path itself is seen beside the scoring latency. The rounds and the probe are
   :func:`~benchmarks.common.run_round` (shared with ``benchmarks.app_soak``).

The targets: 20 clients x 50 requests with the page's default models on ``--backend onnx-int8`` and 2
cores: 0 errors, p95 <= 500 ms through the page, <= 300 ms through the JSON route, the app's RSS <= 1.5 GB. The
benchmark and its client threads run at nice -10 where permitted (``benchmarks.common.renice``), so other work on a
shared machine disturbs them less; times still depend on the machine and what else runs on it: the JSON records the
CPU (model, ISA flags, count) and the load average at start and end.
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

from benchmarks.common import (
    BUSY_PAUSE_S,
    QUICK_HELP,
    ApiCaller,
    app_env,
    default_models,
    distinct_pairs,
    free_port,
    machine,
    output_file,
    prepare_models,
    probe_queue,
    renice,
    run_round,
    start_app,
    stop_app,
    wait_for_page,
)
from mlse.atomic import atomic_write_text
from mlse.serving.procmem import memory_mb

IDLE_PROBES = 30
TARGET_CLIENTS = 20
TARGET_P95_MS = {"page": 500.0, "direct": 500.0, "json": 300.0}
TARGET_RSS_MB = 1536.0
QUICK = {"backend": "torch", "clients": [2], "requests": 2, "models": ["minilm-en"]}


def prepared_env(port: int, args, models: list[str]) -> tuple[dict, float | None]:
    """The app's environment and the seconds spent preparing its models (None when a prepared cache was reused).

    ``args.cache``: a folder kept between runs (made and prepared on first use); its embeddings are emptied, so no
    pair is served from the cache."""
    cache = str(args.cache) if args.cache else tempfile.mkdtemp(prefix="mlse-load-cache-")
    env = app_env(port, args.runs_dir, args.backend, cache=cache) | {"MLSE_WARM": "0", "MLSE_FETCH": "0"}
    marker = Path(cache) / f"app-load-prepared-{args.backend}.json"
    prepared = args.cache and marker.is_file() and set(json.loads(marker.read_text())) >= set(models)
    export_s = None
    if args.backend != "torch" and not prepared:
        export_s = prepare_models(models, env)
        if args.cache:
            atomic_write_text(marker, json.dumps(models))
    shutil.rmtree(Path(cache) / "embeddings", ignore_errors=True)  # no pair may come from the cache
    return env, export_s


def measure(args, models: list[str]) -> dict:
    needed = 1 + sum(args.clients) * args.requests
    pairs = distinct_pairs(needed, args.data_dir)
    if len(pairs) < needed:
        raise SystemExit(
            f"only {len(pairs)} STS test pairs without a repeated sentence for {needed} requests: lower "
            "--requests or --clients"
        )
    port = free_port()
    env, export_s = prepared_env(port, args, models)
    started = time.perf_counter()
    proc = start_app(env)
    try:
        page_s = wait_for_page(f"http://127.0.0.1:{port}/", proc, started)
        table, status = ApiCaller(port)("score_pair", *pairs[0], models, "auto", "auto", None)  # loads every model
        if len(table["data"]) != len(models):
            raise SystemExit(f"the warm-up request scored {len(table['data'])} of {len(models)} models: {status}")
        loaded = memory_mb(proc.pid)
        print(
            f"page after {page_s:.1f} s, {len(models)} models loaded after {time.perf_counter() - started:.1f} s; "
            f"RSS {loaded.get('rss_mb')} MB"
        )
        idle = probe_queue(port, pairs[0][0], threading.Event(), every_s=None, limit=IDLE_PROBES)
        rounds, offset = [], 1
        for clients in args.clients:
            share = pairs[offset : offset + clients * args.requests]
            offset += clients * args.requests
            rounds.append(run_round(port, proc.pid, clients, share, models, args.requests, args.sessions, args.path))
        final = memory_mb(proc.pid)
    finally:
        stop_app(proc)
    return {
        "onnx_export_s": export_s,
        "page_served_s": round(page_s, 2),
        "memory_models_loaded": loaded,
        "memory_at_end": final,
        "detect_language_idle": idle,
        "rounds": rounds,
    }


def target_check(rounds: list[dict], path: str = "page", peak_rss_mb: float | None = None) -> dict | None:
    """Whether the 20-client round met 0 errors (busy refusals included), the path's p95 target and the RSS bound."""
    at = next((r for r in rounds if r["clients"] == TARGET_CLIENTS), None)
    if at is None:
        return None
    p95, target = at["score_pair"]["p95_ms"], TARGET_P95_MS[path]
    rss = peak_rss_mb if peak_rss_mb is not None else at["app_memory_after"].get("peak_rss_mb")
    return {
        "clients": TARGET_CLIENTS,
        "p95_ms": p95,
        "target_p95_ms": target,
        "peak_rss_mb": rss,
        "target_rss_mb": TARGET_RSS_MB,
        "errors_and_refusals": at["errors"] + at["busy_refused"],
        "met": bool(
            at["errors"] == 0
            and at["busy_refused"] == 0
            and p95 is not None
            and p95 <= target
            and rss is not None
            and rss <= TARGET_RSS_MB
        ),
    }


def report(result: dict) -> str:
    lines = [
        f"backend {result['backend']}, path {result.get('path', 'page')}, models {', '.join(result['models'])}, "
        f"{result['cpus']} CPUs ({result.get('cpu', '?')}), load average {result['load_average_at_start']:.1f} "
        "at start",
        "| clients x requests | ok | busy (503) | errors | p50 / p95 / p99 ms | ok req/s | app CPU ms/request | "
        "RSS after (peak) MB | detect_language p50 during round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["app"]["rounds"]:
        lat, probe, mem = r["score_pair"], r["detect_language_during_round"], r["app_memory_after"]
        lines.append(
            f"| {r['clients']} x {r['requests_per_client']} | {r['ok']} | {r['busy_refused']} | "
            f"{r['errors']} | {lat['p50_ms']} / {lat['p95_ms']} / {lat['p99_ms']} | "
            f"{r['ok_requests_per_s']} | {r['app_cpu_ms_per_ok_request']} | "
            f"{mem.get('rss_mb')} ({mem.get('peak_rss_mb')}) | "
            f"{probe['p50_ms']} ms |"
        )
    lines.append(
        f"detect_language round trip with the app idle: p50 {result['app']['detect_language_idle']['p50_ms']} ms"
    )
    if result["target"] is not None:
        t = result["target"]
        lines.append(
            f"target ({t['clients']} clients: 0 errors, p95 <= {t['target_p95_ms']:.0f} ms, peak RSS <= "
            f"{t['target_rss_mb']:.0f} MB): {'met' if t['met'] else 'NOT met'} (p95 {t['p95_ms']} ms, "
            f"{t['errors_and_refusals']} errors, peak RSS {t['peak_rss_mb']} MB)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.app_load", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default=os.environ.get("MLSE_BACKEND", "onnx-int8"))
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 60])
    parser.add_argument("--requests", type=int, default=50, help="requests per client (each a distinct pair)")
    parser.add_argument(
        "--models",
        nargs="+",
        default=None,
        help="default: what the page ticks for a visitor (AppState.default_selection)",
    )
    parser.add_argument(
        "--path",
        choices=["page", "direct", "json"],
        default="page",
        help="page: the Score button's queued event, as the page sends it (default); direct: Gradio's "
        "unqueued endpoint 'score' (POST /gradio_api/run/score); json: the plain route for "
        "scripts beside the page (POST /api/score)",
    )
    parser.add_argument(
        "--sessions",
        choices=["client", "request"],
        default="client",
        help="client: one Gradio session per simulated user, as a page keeps (default); request: "
        "a new session with every request, as bare HTTP calls without a session hash "
        "open",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="an embedding-cache folder kept between runs: the models are prepared in it once "
        "(conversions, ONNX exports) and its embeddings emptied before each run",
    )
    parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get("MLSE_RUNS", "runs")))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: results/app/app-load-<backend>[-direct|-json].json (--quick: a temporary folder)",
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP + "; minilm-en on torch, 2 clients x 2")
    args = parser.parse_args(argv)
    if args.quick:
        args.backend, args.clients, args.requests = QUICK["backend"], QUICK["clients"], QUICK["requests"]
        args.models = args.models or QUICK["models"]
    args.runs_dir = args.runs_dir.resolve()
    if min(args.clients) < 1 or args.requests < 1:
        raise SystemExit("--clients and --requests must be at least 1")
    reniced = renice()  # before the app starts: it inherits the priority
    models = args.models or default_models(args.runs_dir)
    if not models:
        raise SystemExit("no default model loads here: install them or pass --models")
    suffix = "" if args.path == "page" else f"-{args.path}"
    out = output_file(args.out, args.quick, f"results/app/app-load-{args.backend}{suffix}.json")
    from mlse.data.portable import portable_path  # a folder named by absolute path is recorded portably

    given = argv if argv is not None else sys.argv[1:]
    command = "python -m benchmarks.app_load " + " ".join(portable_path(a) if os.path.isabs(a) else a for a in given)
    result = {
        "command": command.strip(),
        "backend": args.backend,
        "models": models,
        "path": args.path,
        "sessions": args.sessions,
        "quick": args.quick,
        **machine(),
        "reniced": reniced,
        "load_average_at_start": os.getloadavg()[0],
        "busy_pause_s": BUSY_PAUSE_S,
        "app": measure(args, models),
    }
    peak = result["app"]["memory_at_end"].get("peak_rss_mb")
    result["target"] = target_check(result["app"]["rounds"], args.path, peak)
    result["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(out, json.dumps(result, indent=1))
    print(report(result))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
