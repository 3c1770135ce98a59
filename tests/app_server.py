"""The mlse app served on loopback, for tests (and docs/make_screenshots.py) that talk to it over HTTP.

It runs in this process, in Gradio's server thread, so a test can hand it an ``AppState`` and needs no second torch
process on a busy machine; ``with served_app() as url:`` gives the page's address and closes the server after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mlse.serving.http_server import free_port
from mlse.ui.app import build_app, launch_options
from mlse.ui.state import AppState

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
