"""mlse.serving.http_server.free_port, the one "any free port" of the package: tests and benchmarks serve apps on it."""

from __future__ import annotations

import socket

from mlse.serving.http_server import bind, free_port


def test_a_free_port_can_be_bound_and_differs_from_a_taken_one():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = free_port()
        assert 0 < port < 65536 and port != taken.getsockname()[1]
        sock = bind("127.0.0.1", port)  # nobody listens there: a server can have it
        sock.close()


def test_the_test_server_and_the_benchmarks_use_it():
    from tests import app_server

    assert app_server.free_port is free_port
