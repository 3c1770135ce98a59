"""Choosing the app's port: a busy port gets a plain answer, not an ``OSError`` traceback from the web server.

A port the user asked for (``--port``, ``GRADIO_SERVER_PORT``) that is busy is refused with how to choose another;
a busy default port is only a convention, so the next free one is taken, with a note.
"""

from __future__ import annotations

import errno

from mlse.errors import MlseError
from mlse.serving.http_server import bind

DEFAULT_PORT = 7860
SEARCH = 20  # how many ports after the default to try


class PortError(MlseError):
    """A port that is malformed or cannot be used; the message names it and the way to choose another."""


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now (bound and released at once)."""
    try:
        bind(host, port).close()
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            return False
        raise PortError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return True


def parse_port(value: str | int | None, source: str) -> int | None:
    """A port number from ``source`` (a flag or an environment variable); None when not given."""
    if value is None or str(value).strip() == "":
        return None
    try:
        port = int(str(value).strip())
    except ValueError:
        raise PortError(f"{source} must be a port number from 1 to 65535, got {value!r}") from None
    if not 0 < port < 65536:
        raise PortError(f"{source} must be a port number from 1 to 65535, got {port}")
    return port


def choose_port(host: str, requested: int | None, source: str = "--port") -> tuple[int, str]:
    """(port to listen on, a line to print or ""): the requested port or refusal; else 7860 or the next free one."""
    if requested is not None:
        if not port_is_free(host, requested):
            raise PortError(
                f"port {requested} on {host} is already in use (set by {source}): stop what uses it, or choose "
                f"another with --port N or GRADIO_SERVER_PORT=N"
            )
        return requested, ""
    for port in range(DEFAULT_PORT, DEFAULT_PORT + SEARCH + 1):
        if port_is_free(host, port):
            if port == DEFAULT_PORT:
                return port, ""
            return port, (
                f"port {DEFAULT_PORT} is in use; serving on {port} instead "
                "(choose one with --port N or GRADIO_SERVER_PORT=N)"
            )
    raise PortError(
        f"ports {DEFAULT_PORT}-{DEFAULT_PORT + SEARCH} on {host} are all in use: choose a free one "
        "with --port N or GRADIO_SERVER_PORT=N"
    )
