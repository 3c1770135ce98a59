"""Many users at once against the running app: one round of concurrent clients, each sending Score-a-pair requests
one after another, with a probe of the queue's round trip alongside, and the latency summary of a round.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from benchmarks.common.api import ApiCaller, ApiError, direct_call, json_call
from mlse.serving.procmem import memory_mb

BUSY_PAUSE_S = 0.5
PROBE_EVERY_S = 0.25
MAX_ERROR_EXAMPLES = 5


def latency_summary(seconds: list[float]) -> dict:
    """p50 / p95 / p99 / mean / max in ms of the successful requests (None when there were none)."""
    if not seconds:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "mean_ms": None, "max_ms": None}
    ms = 1000 * np.asarray(seconds)
    p50, p95, p99 = (round(float(v), 1) for v in np.percentile(ms, [50, 95, 99]))
    return {
        "n": len(ms),
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "mean_ms": round(float(ms.mean()), 1),
        "max_ms": round(float(ms.max()), 1),
    }


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


def _score(call: ApiCaller, path: str, s1: str, s2: str, models: list[str], session: str | None):
    """(rows scored, status text) of one Score-a-pair request through ``path``."""
    if path == "json":
        answer = json_call(call.conn, s1, s2, models)
        return len(answer["scores"]), answer["not_scored"]
    if path == "direct":
        answer = direct_call(call.conn, "score", s1, s2, models, "auto", "auto", session_hash=session)[0]
        return len(answer["scores"]), answer["not_scored"]
    table, status = call("score_pair", s1, s2, models, "auto", "auto", None)
    return (len(table.get("data", [])) if isinstance(table, dict) else 0), status


def one_client(
    port: int,
    pairs: list[tuple[str, str]],
    models: list[str],
    start: threading.Barrier,
    log: RoundLog,
    session: str | None = None,
    path: str = "page",
) -> None:
    """Score ``pairs`` one after another, as one user clicking Score again as soon as the table appears.

    ``session``: the Gradio session hash of this user's page (None: every request opens its own session).
    ``path``: "page" calls the Score button's queued event, as the page does; "direct" the unqueued Gradio endpoint
    ``score``; "json" the plain route ``POST /api/score`` beside the page."""
    call = ApiCaller(port, session)
    start.wait()
    for s1, s2 in pairs:
        t = time.perf_counter()
        try:
            rows, status = _score(call, path, s1, s2, models, session)
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
        if rows != len(models):
            log.record(None, error=f"scored {rows} of {len(models)} models: {str(status)[:200]}")
        else:
            log.record(time.perf_counter() - t)


def probe_queue(port: int, text: str, stop: threading.Event, every_s: float | None, limit: int | None = None) -> dict:
    """Round trips of ``detect_language`` (trivial work: what remains is HTTP + queue), until ``stop`` or ``limit``.

    The probe keeps one Gradio session, as a page does: a call without one would make the app build a new session
    each time (~30 ms of CPU for this app's blocks), which would count against the scoring requests."""
    session = uuid.uuid4().hex
    call, times, refused, failed = ApiCaller(port, session), [], 0, 0
    while not stop.is_set() and (limit is None or len(times) + refused + failed < limit):
        t = time.perf_counter()
        try:
            call("detect_language", text)
            times.append(time.perf_counter() - t)
        except ApiError as exc:
            refused, failed = refused + exc.busy, failed + (not exc.busy)
            call = ApiCaller(port, session)
        if every_s:
            stop.wait(every_s)
    return {**latency_summary(times), "busy": refused, "errors": failed}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) the process ``pid`` has used so far, from /proc (0.0 without it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def run_round(
    port: int,
    pid: int,
    clients: int,
    pairs: list[tuple[str, str]],
    models: list[str],
    requests: int,
    sessions: str = "client",
    path: str = "page",
) -> dict:
    """``clients`` users x ``requests`` each, released together, with the queue probe running alongside.

    ``sessions``: "client" gives each user one Gradio session for all their requests, as their page would; "request"
    opens a new session with every request, as bare HTTP calls without a session hash do."""
    log, start = RoundLog(), threading.Barrier(clients + 1)
    hashes = [uuid.uuid4().hex if sessions == "client" else None for _ in range(clients)]
    threads = [
        threading.Thread(
            target=one_client,
            args=(port, pairs[i * requests : (i + 1) * requests], models, start, log, hashes[i], path),
            daemon=True,
        )
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    probe_stop, probe = threading.Event(), {}
    prober = threading.Thread(
        target=lambda: probe.update(probe_queue(port, pairs[0][0], probe_stop, PROBE_EVERY_S)), daemon=True
    )
    start.wait()
    began, app_cpu, own_cpu = time.perf_counter(), cpu_seconds(pid), time.process_time()
    prober.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    app_cpu, own_cpu = cpu_seconds(pid) - app_cpu, time.process_time() - own_cpu
    probe_stop.set()
    prober.join()
    result = {
        "clients": clients,
        "requests_per_client": requests,
        "sent": clients * requests,
        "ok": len(log.ok),
        "busy_refused": log.busy,
        "errors": len(log.errors),
        "error_examples": log.errors[:MAX_ERROR_EXAMPLES],
        "wall_s": round(wall, 2),
        "ok_requests_per_s": round(len(log.ok) / wall, 2),
        "score_pair": latency_summary(log.ok),
        "detect_language_during_round": probe,
        "app_cpu_ms_per_ok_request": round(1000 * app_cpu / max(1, len(log.ok)), 1),
        "client_cpu_ms_per_ok_request": round(1000 * own_cpu / max(1, len(log.ok)), 1),
        "app_memory_after": memory_mb(pid),
    }
    lat, mem = result["score_pair"], result["app_memory_after"]
    print(
        f"{clients:>3} clients: ok {result['ok']}, busy {log.busy}, errors {len(log.errors)}; "
        f"p50 {lat['p50_ms']} / p95 {lat['p95_ms']} / p99 {lat['p99_ms']} ms; {result['ok_requests_per_s']} req/s; "
        f"app CPU {result['app_cpu_ms_per_ok_request']} ms/request (clients "
        f"{result['client_cpu_ms_per_ok_request']}); RSS {mem.get('rss_mb')} MB (peak "
        f"{mem.get('peak_rss_mb')})"
    )
    return result
