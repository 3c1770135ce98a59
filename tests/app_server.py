"""The mlse app served on loopback, for tests (and docs/make_screenshots.py) that talk to it over HTTP.

It runs in this process, in Gradio's server thread, so a test can hand it an ``AppState`` and needs no second torch
process on a busy machine; ``with served_app() as url:`` gives the page's address and closes the server after.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from mlse.ui.app import build_app, launch_options
from mlse.ui.state import AppState

HOST = "127.0.0.1"  # loopback only: nothing outside this machine should reach a test server


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it), so parallel runs never collide on 7860."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@contextmanager
def served_app(state: AppState | None = None) -> Iterator[str]:
    """Build and launch the app; yields its URL, e.g. ``http://127.0.0.1:41234/``."""
    demo = build_app(state or AppState())
    port = free_port()
    demo.launch(server_name=HOST, server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        yield f"http://{HOST}:{port}/"
    finally:
        demo.close()
