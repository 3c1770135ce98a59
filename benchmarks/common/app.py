"""The app as a process a benchmark starts: its environment, ``python app.py`` started and stopped, the wait for its
page, its models prepared beforehand, and the models it ticks for a new visitor.

The app always runs from the repository root on a free loopback port, offline, with its own embedding cache
(:func:`app_env`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE_TIMEOUT_S = 300


def wait_for_page(url: str, proc: subprocess.Popen, started: float) -> float:
    """Seconds from ``started`` until ``url`` answers 200 (the app process must stay alive)."""
    while time.perf_counter() - started < PAGE_TIMEOUT_S:
        if proc.poll() is not None:
            raise SystemExit(f"app.py exited with code {proc.returncode} before serving the page")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"the page was not served within {PAGE_TIMEOUT_S} s")


def app_env(port: int, runs_dir: Path, backend: str, cache: str | None = None) -> dict:
    """The environment ``python app.py`` runs in for a benchmark: loopback, offline, its own (fresh) cache."""
    cache = cache or tempfile.mkdtemp(prefix="mlse-bench-cache-")
    return {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "MLSE_CACHE": cache,
        "MLSE_RUNS": str(runs_dir),
        "MLSE_BACKEND": backend,
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }


def start_app(env: dict) -> subprocess.Popen:
    """``python app.py`` (the real entry point) in ``env``, its output discarded."""
    return subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def stop_app(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def prepare_models(models: list[str], env: dict) -> float:
    """Use every model once on the backend, in its own process, then empty the embedding cache again.

    A model's first use leaves files in the cache for good (me5-small's conversion, its compact tokenizer, muse's
    table, the ONNX exports); the app is measured as it starts every later time (exporting needs torch and costs
    memory that a started app does not pay again). The time is reported.
    """
    code = (
        "import sys; from mlse.models import load_model\n"
        "for name in sys.argv[1:]:\n    load_model(name, backend=sys.argv[0]).encode(['warm up'])"
    )
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code.replace("sys.argv[0]", repr(env["MLSE_BACKEND"])), *models],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - started
    shutil.rmtree(Path(env["MLSE_CACHE"]) / "embeddings", ignore_errors=True)  # no pair may come from the cache
    print(f"prepared {len(models)} models for {env['MLSE_BACKEND']} in {seconds:.1f} s")
    return round(seconds, 1)


def default_models(runs_dir: Path) -> list[str]:
    """What the page ticks for a new visitor here: ``AppState.default_selection`` (the offline default backbones,
    then one trained model of each kind)."""
    os.environ["MLSE_RUNS"] = str(runs_dir)
    from mlse.data.hub_probe import remember
    from mlse.serving.app_state import AppState

    remember(False)  # never wait on the hub to list models
    return AppState().default_selection()[0]
