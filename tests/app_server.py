"""The mlse app served on loopback, for tests (and docs/make_screenshots.py) that talk to it over HTTP.

It runs in this process, in Gradio's server thread, so a test can hand it an ``AppState`` and needs no second torch
process on a busy machine; ``with served_app() as url:`` gives the page's address and closes the server after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mlse.serving.app_state import AppState
from mlse.serving.http_server import free_port
from mlse.ui.app import build_app, launch_options

HOST = "127.0.0.1"  # loopback only: nothing outside this machine should reach a test server


@contextmanager
def served_app(state: AppState | None = None) -> Iterator[str]:
    """Build and launch the app; yields its URL, e.g. ``http://127.0.0.1:41234/``."""
    demo = build_app(state or AppState())
    port = free_port(HOST)
    demo.launch(server_name=HOST, server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        yield f"http://{HOST}:{port}/"
    finally:
        demo.close()


@contextmanager
def fresh_app_environment(tmp_path_factory, prefix: str) -> Iterator[None]:
    """An empty runs folder and embedding cache, offline, on the CPU, for a module-scoped app fixture (conftest's
    per-test environment comes too late for those): what a fresh clone serves."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLSE_RUNS", str(tmp_path_factory.mktemp(f"{prefix}-runs")))
        env.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp(f"{prefix}-cache")))
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("MLSE_DEVICE", "cpu")
        yield
