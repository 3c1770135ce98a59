"""``python app.py --public`` started as a Space would run it, on a free loopback port, for hostile-client probes.

The app runs in a child process with its own runs folder, embedding cache and upload folder (``GRADIO_TEMP_DIR``),
offline, with ``SPACE_ID`` set so that a visitor is told apart by the last ``X-Forwarded-For`` hop, as behind the
Space's proxy: a probe plays several visitors by sending several addresses (documentation-range addresses, only as
header text; every request goes to 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from mlse.serving.http_server import free_port

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
VISITORS = [f"198.51.100.{i}" for i in range(1, 21)]  # TEST-NET-2 addresses, sent only as X-Forwarded-For text


@dataclass
class PublicApp:
    """A running public app: its URL, process and folders."""

    url: str
    process: subprocess.Popen
    runs: Path
    uploads: Path
    log: Path
    env: dict = field(default_factory=dict)

    def upload(self, name: str, data: bytes, visitor: str = VISITORS[0]) -> httpx.Response:
        """POST a file to Gradio's upload route as ``visitor``."""
        return httpx.post(
            f"{self.url}/gradio_api/upload",
            files={"files": (name, data)},
            headers={"x-forwarded-for": visitor},
            timeout=60,
        )

    def call(self, api: str, data: list, *, session: str, visitor: str = VISITORS[0], timeout: float = 180) -> str:
        """Call ``/gradio_api/call/<api>`` in ``session`` as ``visitor``; the final SSE event's data (or the HTTP
        error) as text."""
        headers = {"x-forwarded-for": visitor}
        body = {"data": data, "session_hash": session}
        started = httpx.post(f"{self.url}/gradio_api/call/{api}", json=body, headers=headers, timeout=60)
        if started.status_code != 200:
            return f"HTTP {started.status_code}: {started.text}"
        event = started.json()["event_id"]
        stream = httpx.get(f"{self.url}/gradio_api/call/{api}/{event}", headers=headers, timeout=timeout).text
        return stream.strip().split("data:")[-1].strip() if "data:" in stream else stream

    def alive(self) -> bool:
        return self.process.poll() is None


def file_data(path: str, name: str = "rows.tsv") -> dict:
    """A file parameter as a hostile client writes it: any path it likes."""
    return {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": name}


def start_public_app(tmp: Path, *, runs: Path | None = None, extra_env: dict | None = None) -> PublicApp:
    """Start the app in public mode and wait until it answers (at most 120 s)."""
    runs = runs or tmp / "runs"
    uploads = tmp / "uploads"
    for folder in (runs, uploads, tmp / "cache"):
        folder.mkdir(parents=True, exist_ok=True)
    port = free_port(HOST)
    env = {
        **os.environ,
        "MLSE_RUNS": str(runs),
        "MLSE_CACHE": str(tmp / "cache"),
        "GRADIO_TEMP_DIR": str(uploads),
        "HF_HUB_OFFLINE": "1",
        "MLSE_DEVICE": "cpu",
        "SPACE_ID": "mlse-tests/hostile-probe",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("MLSE_PUBLIC", None)
    log = tmp / f"app-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "app.py", "--public", "--no-warm", "--no-fetch", "--host", HOST, "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    app = PublicApp(f"http://{HOST}:{port}", process, runs, uploads, log, env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited with {process.returncode}: {log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{app.url}/gradio_api/info", timeout=5).status_code == 200:
                return app
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_app(app)
    raise RuntimeError(f"the app did not answer within 120 s: {log.read_text()[-3000:]}")


def stop_app(app: PublicApp) -> None:
    if app.process.poll() is None:
        app.process.terminate()
        try:
            app.process.wait(20)
        except subprocess.TimeoutExpired:
            app.process.kill()
            app.process.wait()


def parse(data: str):
    """An SSE data line as JSON (None when it is not)."""
    try:
        return json.loads(data)
    except ValueError:
        return None
