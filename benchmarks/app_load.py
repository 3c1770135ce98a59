"""Many users at once: Score-a-pair latency, errors and throughput of the running app for 1, 20 and 60 clients.

    python benchmarks/app_load.py [--backend onnx-int8] [--clients 1 20 60] [--requests 50] [--models NAME ...]
                                  [--runs-dir runs] [--out results/app/app-load-<backend>.json]

1. Starts ``python app.py`` (the real entry point) with a fresh embedding cache and the given backend (an onnx
   backend's models are exported first, in a separate process, as after their first use), waits for the page, and
   scores one pair with every model so all are loaded before timing starts.
2. For each client count C: C threads, each with its own keep-alive HTTP connection, are released together and each
   sends ``--requests`` Score-a-pair requests one after another (the next when the previous answered), every request a
   different STS Multi MT test pair (no pair is sent twice in the whole run, so none comes from the embedding cache),
   with the default models ticked. A request refused because the queue is full (HTTP 503, what the page shows as
   "busy, try again") is counted apart from errors and latencies, and its client pauses :data:`BUSY_PAUSE_S` before
   its next request, as a person would. Reported per round: p50 / p95 / p99 / mean / max of the successful requests'
   wall time, ok / busy / error counts, successful requests per second, and the app's memory after the round.
3. The queue round trip of a trivial endpoint (``detect_language``, ~0.1 ms of work) is measured in the same run: 30
   calls with the app idle, and one call every :data:`PROBE_EVERY_S` during each round, so the cost of the HTTP +
   queue path itself is seen beside the scoring latency.

The target (issue 16): 20 clients x 50 requests with 0 errors and p95 <= 500 ms on 2 cores with the default models on
``--backend onnx-int8``. Requests travel as the page's do (POST, then the event stream on the same connection), through
:class:`app_latency.ApiCaller`. Times depend on the machine and what else runs on it: the JSON records the CPU count
and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from app_latency import (  # noqa: E402
    ApiCaller,
    ApiError,
    app_env,
    direct_call,
    free_port,
    prepare_models,
    start_app,
    stop_app,
    test_pairs,
    wait_for_page,
)

from mlse.atomic import atomic_write_text  # noqa: E402
from mlse.procmem import memory_mb  # noqa: E402

BUSY_PAUSE_S = 0.5
PROBE_EVERY_S = 0.25
IDLE_PROBES = 30
TARGET_CLIENTS, TARGET_P95_MS = 20, 500.0
MAX_ERROR_EXAMPLES = 5


def default_models(runs_dir: Path) -> list[str]:
    """The offline defaults that load here, in order: what the page ticks for a new user."""
    os.environ["MLSE_RUNS"] = str(runs_dir)
    from mlse.hub_probe import remember
    from mlse.ui.state import AppState

    remember(False)  # never wait on the hub to list models
    return AppState().loaded_defaults()


def latency_summary(seconds: list[float]) -> dict:
    """p50 / p95 / p99 / mean / max in ms of the successful requests (None when there were none)."""
    if not seconds:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "mean_ms": None, "max_ms": None}
    ms = 1000 * np.asarray(seconds)
    p50, p95, p99 = (round(float(v), 1) for v in np.percentile(ms, [50, 95, 99]))
    return {"n": len(ms), "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "mean_ms": round(float(ms.mean()), 1),
            "max_ms": round(float(ms.max()), 1)}  # fmt: skip


class RoundLog:
    """Outcomes of one round, appended to from every client thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ok: list[float] = []
        self.busy = 0
        self.errors: list[str] = []

    def record(self, seconds: float | None, *, busy: bool = False, error: str | None = None) -> None:
        with self.lock:
            if busy:
                self.busy += 1
            elif error is not None:
                self.errors.append(error)
            else:
                self.ok.append(seconds)


def one_client(port: int, pairs: list[tuple[str, str]], models: list[str], start: threading.Barrier,
               log: RoundLog, session: str | None = None, path: str = "page") -> None:  # fmt: skip
    """Score ``pairs`` one after another, as one user clicking Score again as soon as the table appears.

    ``session``: the Gradio session hash of this user's page (None: every request opens its own session).
    ``path``: "page" calls the Score button's queued event, as the page does; "direct" the unqueued JSON endpoint
    ``score`` (one POST, one answer) that scripts use."""
    call = ApiCaller(port, session)
    start.wait()
    for s1, s2 in pairs:
        t = time.perf_counter()
        try:
            if path == "direct":
                answer = direct_call(call.conn, "score", s1, s2, models, "auto", "auto", session_hash=session)[0]
                table, status = {"data": answer["scores"]}, answer["not_scored"]
            else:
                table, status = call("score_pair", s1, s2, models, "auto", "auto", None)
        except ApiError as exc:
            log.record(None, busy=exc.busy, error=None if exc.busy else str(exc)[:300])
            if exc.busy:
                time.sleep(BUSY_PAUSE_S)
                call = ApiCaller(port, session)  # the refused POST may leave the connection half read
            continue
        except OSError as exc:  # connection reset, timeout: an error the user sees
            log.record(None, error=f"{type(exc).__name__}: {exc}"[:300])
            call = ApiCaller(port, session)
            continue
        rows = len(table.get("data", [])) if isinstance(table, dict) else 0
        if rows != len(models):
            log.record(None, error=f"scored {rows} of {len(models)} models: {str(status)[:200]}")
        else:
            log.record(time.perf_counter() - t)


def probe_queue(port: int, text: str, stop: threading.Event, every_s: float | None, limit: int | None = None) -> dict:
    """Round trips of ``detect_language`` (trivial work: what remains is HTTP + queue), until ``stop`` or ``limit``."""
    call, times, refused, failed = ApiCaller(port), [], 0, 0
    while not stop.is_set() and (limit is None or len(times) + refused + failed < limit):
        t = time.perf_counter()
        try:
            call("detect_language", text)
            times.append(time.perf_counter() - t)
        except ApiError as exc:
            refused, failed = refused + exc.busy, failed + (not exc.busy)
            call = ApiCaller(port)
        if every_s:
            stop.wait(every_s)
    return {**latency_summary(times), "busy": refused, "errors": failed}


def run_round(port: int, pid: int, clients: int, pairs: list[tuple[str, str]], models: list[str],
              requests: int, sessions: str = "client", path: str = "page") -> dict:  # fmt: skip
    """``clients`` users x ``requests`` each, released together, with the queue probe running alongside.

    ``sessions``: "client" gives each user one Gradio session for all their requests, as their page would; "request"
    opens a new session with every request, as bare HTTP calls without a session hash do."""
    log, start = RoundLog(), threading.Barrier(clients + 1)
    hashes = [uuid.uuid4().hex if sessions == "client" else None for _ in range(clients)]
    threads = [threading.Thread(target=one_client, args=(port, pairs[i * requests : (i + 1) * requests], models, start,
                                                         log, hashes[i], path), daemon=True)
               for i in range(clients)]  # fmt: skip
    for thread in threads:
        thread.start()
    probe_stop, probe = threading.Event(), {}
    prober = threading.Thread(target=lambda: probe.update(probe_queue(port, pairs[0][0], probe_stop, PROBE_EVERY_S)),
                              daemon=True)  # fmt: skip
    start.wait()
    began = time.perf_counter()
    prober.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    probe_stop.set()
    prober.join()
    result = {"clients": clients, "requests_per_client": requests, "sent": clients * requests, "ok": len(log.ok),
              "busy_refused": log.busy, "errors": len(log.errors), "error_examples": log.errors[:MAX_ERROR_EXAMPLES],
              "wall_s": round(wall, 2), "ok_requests_per_s": round(len(log.ok) / wall, 2),
              "score_pair": latency_summary(log.ok), "detect_language_during_round": probe,
              "app_memory_after": memory_mb(pid)}  # fmt: skip
    lat = result["score_pair"]
    print(f"{clients:>3} clients: ok {result['ok']}, busy {log.busy}, errors {len(log.errors)}; "
          f"p50 {lat['p50_ms']} / p95 {lat['p95_ms']} / p99 {lat['p99_ms']} ms; {result['ok_requests_per_s']} req/s")
    return result


def measure(args, models: list[str]) -> dict:
    needed = 1 + sum(args.clients) * args.requests
    pairs = test_pairs(needed, args.data_dir)
    if len(pairs) < needed:
        raise SystemExit(f"only {len(pairs)} distinct STS test pairs for {needed} requests: lower --requests or "
                         "--clients")  # fmt: skip
    port = free_port()
    env = app_env(port, args.runs_dir, args.backend, cache=tempfile.mkdtemp(prefix="mlse-load-cache-"))
    export_s = prepare_models(models, env) if args.backend != "torch" else None
    started = time.perf_counter()
    proc = start_app(env)
    try:
        page_s = wait_for_page(f"http://127.0.0.1:{port}/", proc, started)
        table, status = ApiCaller(port)("score_pair", *pairs[0], models, "auto", "auto", None)  # loads every model
        if len(table["data"]) != len(models):
            raise SystemExit(f"the warm-up request scored {len(table['data'])} of {len(models)} models: {status}")
        print(f"page after {page_s:.1f} s, {len(models)} models loaded after {time.perf_counter() - started:.1f} s")
        idle = probe_queue(port, pairs[0][0], threading.Event(), every_s=None, limit=IDLE_PROBES)
        rounds, offset = [], 1
        for clients in args.clients:
            share = pairs[offset : offset + clients * args.requests]
            offset += clients * args.requests
            rounds.append(run_round(port, proc.pid, clients, share, models, args.requests, args.sessions,
                                    args.path))
    finally:
        stop_app(proc)
    return {"onnx_export_s": export_s, "page_served_s": round(page_s, 2), "detect_language_idle": idle,
            "rounds": rounds}  # fmt: skip


def target_check(rounds: list[dict]) -> dict | None:
    """Whether the 20-client round met 0 errors (busy refusals included) and p95 <= 500 ms."""
    at = next((r for r in rounds if r["clients"] == TARGET_CLIENTS), None)
    if at is None:
        return None
    p95 = at["score_pair"]["p95_ms"]
    return {"clients": TARGET_CLIENTS, "p95_ms": p95, "target_p95_ms": TARGET_P95_MS,
            "errors_and_refusals": at["errors"] + at["busy_refused"],
            "met": bool(at["errors"] == 0 and at["busy_refused"] == 0 and p95 is not None and p95 <= TARGET_P95_MS)}


def report(result: dict) -> str:
    lines = [f"backend {result['backend']}, path {result.get('path', 'page')}, models {', '.join(result['models'])}, "
             f"{result['cpus']} CPUs, load "
             f"average {result['load_average_at_start']:.1f} at start",
             "| clients x requests | ok | busy (503) | errors | p50 / p95 / p99 ms | ok req/s | detect_language "
             "p50 during round |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["app"]["rounds"]:
        lat, probe = r["score_pair"], r["detect_language_during_round"]
        lines.append(f"| {r['clients']} x {r['requests_per_client']} | {r['ok']} | {r['busy_refused']} | "
                     f"{r['errors']} | {lat['p50_ms']} / {lat['p95_ms']} / {lat['p99_ms']} | "
                     f"{r['ok_requests_per_s']} | {probe['p50_ms']} ms |")  # fmt: skip
    lines.append(f"detect_language round trip with the app idle: p50 {result['app']['detect_language_idle']['p50_ms']}"
                 " ms")
    if result["target"] is not None:
        t = result["target"]
        lines.append(f"target ({t['clients']} clients: 0 errors, p95 <= {t['target_p95_ms']:.0f} ms): "
                     f"{'met' if t['met'] else 'NOT met'} (p95 {t['p95_ms']} ms, {t['errors_and_refusals']} errors)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default=os.environ.get("MLSE_BACKEND", "onnx-int8"))
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 60])
    parser.add_argument("--requests", type=int, default=50, help="requests per client (each a distinct pair)")
    parser.add_argument("--models", nargs="+", default=None, help="default: the offline defaults that load here")
    parser.add_argument("--path", choices=["page", "direct"], default="page",
                        help="page: the Score button's queued event, as the page sends it (default); direct: the "
                             "unqueued JSON endpoint 'score' for scripts (POST /gradio_api/run/score)")
    parser.add_argument("--sessions", choices=["client", "request"], default="client",
                        help="client: one Gradio session per simulated user, as a page keeps (default); request: a "
                             "new session with every request, as bare HTTP calls without a session hash open")
    parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get("MLSE_RUNS", "runs")))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=None, help="default: results/app/app-load-<backend>.json")
    args = parser.parse_args()
    args.runs_dir = args.runs_dir.resolve()
    if min(args.clients) < 1 or args.requests < 1:
        raise SystemExit("--clients and --requests must be at least 1")
    models = args.models or default_models(args.runs_dir)
    if not models:
        raise SystemExit("no default model loads here: install them or pass --models")
    out = args.out or Path(f"results/app/app-load-{args.backend}{'-direct' if args.path == 'direct' else ''}.json")
    result = {"backend": args.backend, "models": models, "path": args.path, "sessions": args.sessions,
              "cpus": os.cpu_count(),
              "load_average_at_start": os.getloadavg()[0], "busy_pause_s": BUSY_PAUSE_S,
              "app": measure(args, models)}  # fmt: skip
    result["target"] = target_check(result["app"]["rounds"])
    result["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(out, json.dumps(result, indent=1))
    print(report(result))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
