"""Latency and memory of the running app, as a user meets them, plus a warm full evaluation.

    python -m benchmarks.app_latency [--runs-dir runs] [--requests 60] [--backend torch] [--models NAME ...]
                                     [--out results/app/app-latency.json]
    python -m benchmarks.app_latency --quick [--eval-model PATH]   # the app once with minilm-en, 2 requests

1. Starts ``python app.py`` (the real entry point) on a free loopback port, with a fresh embedding cache so no
   pair is ever served from disk. What a model's first use leaves in the cache for good is made beforehand in a
   separate process, as on any machine where the app has run once: me5-small's conversion, the compact tokenizer,
   muse's memory-mapped table and, for an onnx backend, the exports (their time is reported). Records the time until
   the page is served, until a ``gradio_client`` has read its API, and until the first pair is scored with every
   offline model (all models loaded then), and the app's resident memory at each of those points.
2. Scores ``--requests`` different STS Multi MT test pairs (en-de, en-fr, en-es, de-en in turn, language
   auto-detected) with every offline model through the app's HTTP API, one request at a time: p50 / p95 / mean of
   the client-side wall time. Requests go through Gradio's queue exactly as the page's do (POST, then the event
   stream read as it arrives on one keep-alive connection); ``gradio_client`` is not used for timing because it
   polls its message queue every 50 ms, which adds up to 100 ms per call that a browser never sees. The round trip
   of ``detect_language`` (about 0.1 ms of work) is measured the same way: the HTTP + queue overhead of any request.
3. Reads the app process's peak resident memory (``VmHWM``) once every model is loaded and the requests are done.
4. Stops the app and times each model's encoding of the same pairs in this process on the same backend (no cache,
   no app): the model compute inside a warm request, next to ``p50 - round trip`` (what the app adds to a request).
5. Times a full evaluation in this process through the library the app uses: every STS pair of
   the seed (``SEED_STS_PAIRS``, test split, bootstrap CIs) plus Tatoeba on Ham & Kim's 14 languages, with
   ``minilm-en`` (the first pass fills the embedding cache if needed; the second pass is the warm one reported).

"Every offline model" is what the app lists here: the three offline defaults plus every run under ``--runs-dir``
whose backbone loads offline. Times depend on the machine and on what else runs: the JSON records the CPU (model, ISA
flags, count) and the load average.

``--quick`` goes through every step above with ``minilm-en`` alone, 2 warm requests, and a full evaluation cut to the
first STS pair and Tatoeba language (``--eval-model`` may name a tiny local model), the app started without its warm
start (``MLSE_WARM=0``: it would prepare every model and tab); it writes to a temporary folder unless ``--out`` is
given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    QUICK_HELP,
    ApiCaller,
    app_env,
    cpu_name,
    free_port,
    isa_flags,
    output_file,
    prepare_models,
    start_app,
    stop_app,
    test_pairs,
    wait_for_page,
)
from mlse.atomic import atomic_write_text
from mlse.data.portable import portable_record
from mlse.serving.procmem import memory_mb


def offline_models(runs_dir: Path) -> list[str]:
    """The models the app offers here without the hub (what a user ticks when comparing everything)."""
    os.environ["MLSE_RUNS"] = str(runs_dir)
    from mlse.data.hub_probe import remember
    from mlse.serving.app_state import AppState

    remember(False)  # hub models download on first use: never part of "every offline model"
    return [m.name for m in AppState().models() if not m.needs_download]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = 1000 * np.asarray(seconds)
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "mean_ms": round(float(ms.mean()), 1),
        "n": len(ms),
    }


def measure_app(models: list[str], pairs: list[tuple[str, str]], args) -> dict:
    from gradio_client import Client

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = app_env(port, args.runs_dir, args.backend)
    export_s = prepare_models(models, env)
    started = time.perf_counter()
    proc = start_app(env)
    try:
        page_s = wait_for_page(url, proc, started)
        client = Client(url, verbose=False)
        api_s = time.perf_counter() - started
        time.sleep(2)  # the page is up: what the app holds before any model is loaded (the detector warms up)
        memory_started = memory_mb(proc.pid)
        print(f"page served after {page_s:.1f} s, API read after {api_s:.1f} s; loading {len(models)} models ...")
        t = time.perf_counter()
        table, status = client.predict(*pairs[0], models, "auto", "auto", None, api_name="/score_pair")
        first_score_s = time.perf_counter() - t
        scored = len(table["data"]) if isinstance(table, dict) else None
        if scored != len(models):
            raise SystemExit(f"the first request scored {scored} models, expected {len(models)}: {status}")
        print(f"first pair scored with all models {time.perf_counter() - started:.1f} s after start")
        memory_loaded = memory_mb(proc.pid)

        call = ApiCaller(port)
        score_s = []
        for i, (s1, s2) in enumerate(pairs[1:], 1):
            t = time.perf_counter()
            table, _ = call("score_pair", s1, s2, models, "auto", "auto", None)
            score_s.append(time.perf_counter() - t)
            if len(table["data"]) != len(models):
                raise SystemExit(f"request {i} scored {len(table['data'])} models, expected {len(models)}")
            if i % 20 == 0:
                print(f"  {i} requests, p50 so far {1000 * np.median(score_s):.0f} ms")
        overhead_s = []
        for s1, _ in pairs[: min(len(pairs), 30)]:
            t = time.perf_counter()
            call("detect_language", s1)
            overhead_s.append(time.perf_counter() - t)
        memory = memory_mb(proc.pid)
    finally:
        stop_app(proc)
    warm, trip = summary_ms(score_s), summary_ms(overhead_s)
    return {
        "prepare_s": export_s,
        "page_served_s": round(page_s, 2),
        "api_ready_s": round(api_s, 2),
        "first_score_with_all_models_s": round(first_score_s, 2),
        "start_to_first_score_s": round(api_s + first_score_s, 2),
        "score_pair_warm": warm,
        "http_round_trip_detect_language": trip,
        "p50_above_round_trip_ms": round(warm["p50_ms"] - trip["p50_ms"], 1),
        "app_memory": memory,
        "rss_page_served_mb": memory_started["rss_mb"],
        "rss_all_models_loaded_mb": memory_loaded["rss_mb"],
        "cache": env["MLSE_CACHE"],
    }


def measure_compute(models: list[str], pairs: list[tuple[str, str]], backend: str) -> dict:
    """Each model's encoding of the warm requests' pairs in this process (no cache, no app): ms per pair, p50."""
    from mlse.models import load_model

    out = {}
    for name in models:
        encoder = load_model(name, backend=backend, cache=False)
        encoder.encode(list(pairs[0]))  # load outside the timing
        seconds = []
        for s1, s2 in pairs[1:]:
            t = time.perf_counter()
            encoder.encode([s1, s2])
            seconds.append(time.perf_counter() - t)
        out[name] = summary_ms(seconds)
        del encoder
    out["sum_of_p50_ms"] = round(sum(v["p50_ms"] for v in out.values()), 1)
    return out


def measure_full_eval(args) -> dict:
    """Seed STS pairs + Tatoeba-14 with minilm-en through the library, twice; the second pass is warm."""
    from mlse.data.pairs import HAM_KIM_14, SEED_STS_PAIRS
    from mlse.evaluation.runners import run_sts, run_tatoeba
    from mlse.models import load_model

    sts_pairs, langs = (SEED_STS_PAIRS[:1], list(HAM_KIM_14)[:1]) if args.quick else (SEED_STS_PAIRS, list(HAM_KIM_14))
    passes = []
    for _ in range(2):
        t = time.perf_counter()
        encoder = load_model(args.eval_model, backend=args.backend)
        sts = run_sts(encoder, pairs=sts_pairs, data_dir=args.data_dir)
        tatoeba = run_tatoeba(encoder, langs=langs, data_dir=args.data_dir)
        passes.append({"seconds": round(time.perf_counter() - t, 2), "stats": dict(getattr(encoder, "stats", {}))})
    warm = passes[-1]
    return {
        "model": args.eval_model,
        "sts_pairs": len(sts_pairs),
        "tatoeba_languages": len(langs),
        "first_pass_s": passes[0]["seconds"],
        "warm_s": warm["seconds"],
        "warm_encoder_stats": warm["stats"],
        "sts_avg_spearman": sts.averages["all"]["spearman"],
        "tatoeba_avg_accuracy": tatoeba.averages["all"]["acc_mean"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.app_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get("MLSE_RUNS", "runs")))
    parser.add_argument("--requests", type=int, default=60, help="warm scoring requests (distinct pairs)")
    parser.add_argument("--backend", default=os.environ.get("MLSE_BACKEND", "torch"))
    parser.add_argument("--eval-model", default="minilm-en")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--skip-eval", action="store_true", help="only the app measurements")
    parser.add_argument("--skip-compute", action="store_true", help="do not time the models alone in this process")
    parser.add_argument("--models", nargs="+", default=None, help="default: every offline model (--quick: minilm-en)")
    parser.add_argument(
        "--out", type=Path, default=None, help="default results/app/app-latency.json (--quick: a temporary folder)"
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    args.runs_dir = args.runs_dir.resolve()
    args.out = output_file(args.out, args.quick, "results/app/app-latency.json")
    if args.quick:
        args.models, args.requests = args.models or ["minilm-en"], min(args.requests, 2)
        os.environ["MLSE_WARM"] = "0"  # the app's warm start would prepare every model and tab: minutes, not seconds

    models = args.models or offline_models(args.runs_dir)
    pairs = test_pairs(args.requests + 1, args.data_dir)
    result = {
        "backend": args.backend,
        "quick": args.quick,
        "runs_dir": str(args.runs_dir),
        "models": models,
        "n_models": len(models),
        "cpus": os.cpu_count(),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "load_average_at_start": os.getloadavg()[0],
        "app": measure_app(models, pairs, args),
    }
    os.environ["MLSE_BACKEND"] = args.backend
    os.environ["MLSE_CACHE"] = result["app"]["cache"]  # the prepared models (converted, exported) the app used
    if not args.skip_compute:
        result["model_compute_per_pair"] = measure_compute(models, pairs, args.backend)
    if not args.skip_eval:
        result["full_eval"] = measure_full_eval(args)
    result["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(args.out, json.dumps(portable_record(result), indent=1))  # no absolute path in the file
    print(report(result))
    print(f"\nwritten: {args.out}")
    if args.quick:
        shutil.rmtree(result["app"]["cache"], ignore_errors=True)  # the quick run's fresh cache: of no further use


def report(result: dict) -> str:
    app = result["app"]
    warm, rt = app["score_pair_warm"], app["http_round_trip_detect_language"]
    lines = [
        f"{result['n_models']} offline models, backend {result['backend']}, {result['cpus']} CPUs "
        f"({result.get('cpu', '?')}; {', '.join(result.get('isa', []))})",
        "| measure | value |",
        "|---|---:|",
        f"| `python app.py` -> page served | {app['page_served_s']:.1f} s |",
        f"| `python app.py` -> first pair scored by all {result['n_models']} models | "
        f"{app['start_to_first_score_s']:.1f} s |",
        f"| warm pair scoring, all models: p50 / p95 | {warm['p50_ms']:.0f} / {warm['p95_ms']:.0f} ms |",
        f"| HTTP + queue round trip (detect_language): p50 | {rt['p50_ms']:.0f} ms |",
        f"| warm p50 minus round trip | {app['p50_above_round_trip_ms']:.0f} ms |",
        f"| app memory: page served / all models loaded / peak (VmHWM) | {app['rss_page_served_mb']:.0f} / "
        f"{app['rss_all_models_loaded_mb']:.0f} / {app['app_memory']['peak_rss_mb']:.0f} MiB |",
    ]
    compute = result.get("model_compute_per_pair")
    if compute:
        per_model = ", ".join(f"{k} {v['p50_ms']:.1f}" for k, v in compute.items() if k != "sum_of_p50_ms")
        lines.append(f"| model compute per pair, p50 ({per_model}) | {compute['sum_of_p50_ms']:.1f} ms |")
    if "full_eval" in result:
        ev = result["full_eval"]
        lines.append(
            f"| warm full evaluation ({ev['sts_pairs']} STS pairs + Tatoeba-{ev['tatoeba_languages']}, "
            f"{ev['model']}) | {ev['warm_s']:.1f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
