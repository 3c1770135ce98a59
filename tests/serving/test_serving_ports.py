"""`python app.py` on a busy port: a one-line answer naming the port and how to change it (mlse.serving.ports,
app.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import mlse.serving.ports
from mlse.serving.ports import PortError, choose_port, parse_port
from tests.paths import REPO_ROOT as ROOT


@pytest.fixture()
def busy_port():
    """A port something is listening on for the test's duration."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def run_app(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
    return subprocess.run(
        [sys.executable, "app.py", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_busy_requested_port_is_named_with_the_way_to_change_it(busy_port, how):
    args, env = (["--port", str(busy_port)], {}) if how == "flag" else ([], {"GRADIO_SERVER_PORT": str(busy_port)})
    done = run_app(*args, env=env)
    assert done.returncode == 2
    assert f"port {busy_port}" in done.stderr and "--port" in done.stderr and "GRADIO_SERVER_PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_malformed_port_is_refused_with_its_value():
    done = run_app("--port", "78x0")
    assert done.returncode == 2 and "'78x0'" in done.stderr and "1 to 65535" in done.stderr
    assert "Traceback" not in done.stderr


def test_when_the_default_port_is_busy_the_next_free_one_is_taken_and_said(busy_port, monkeypatch):
    monkeypatch.setattr(mlse.serving.ports, "DEFAULT_PORT", busy_port)
    port, notice = choose_port("127.0.0.1", None)
    assert port > busy_port and f"port {busy_port} is in use; serving on {port}" in notice


def test_parse_port_names_the_source():
    assert parse_port(None, "--port") is None and parse_port(" 8080 ", "--port") == 8080
    with pytest.raises(PortError, match="GRADIO_SERVER_PORT must be a port number from 1 to 65535, got 70000"):
        parse_port("70000", "GRADIO_SERVER_PORT")
