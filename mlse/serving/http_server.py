"""Serve an ASGI app (the page mounted on the JSON routes, :func:`mlse.ui.app.build_server`) with uvicorn.

The socket is bound before uvicorn starts, so a port taken since :func:`mlse.serving.ports.choose_port` is an
``OSError`` the caller reports in one line; uvicorn logs warnings only, as under Gradio.
"""

from __future__ import annotations

import socket
import sys


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when the host is one); OSError when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now on ``host`` (the OS picks it): tests and benchmarks start an app on it, so
    parallel runs never collide. Free when asked; another process may take it before it is used."""
    with bind(host, 0) as sock:
        return sock.getsockname()[1]


def serve(app, host: str, port: int) -> None:
    """Serve ``app`` on ``host:port`` until interrupted (Ctrl-C, SIGTERM); OSError when the port cannot be bound."""
    import uvicorn  # lazy: only a running app needs the server

    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"* Running on local URL:  http://{shown}:{port}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
