"""Start a local Ray or join a cluster, for the Ray engine (:mod:`mlse.scale.engine`).

Without ``address`` a local Ray is started on demand. With ``address`` (``HOST:PORT``, ``ray://HOST:PORT`` or
``auto``) the cluster is joined; an address where nothing answers is a one-line error within
:data:`CONNECT_TIMEOUT_S` seconds. Workers get this process's mlse settings and a ``PYTHONPATH`` with this checkout;
on several machines, model folders and the checkout must exist at the same paths on every node.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from mlse.dirs import package_parent
from mlse.errors import MlseError

CONNECT_TIMEOUT_S = 8.0  # a TCP probe of the address, then ray.init, each bounded by this
DEFAULT_PORT = 6379
CLIENT_PORT = 10001
PASSED_ENV = (
    "MLSE_CACHE",
    "MLSE_RUNS",
    "MLSE_DEVICE",
    "MLSE_DATA",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "MLSE_SCALE_TRACE",  # mlse.scale.work.TRACE_ENV
)


def parse_address(address: str) -> tuple[str, int] | None:
    """(host, port) to probe, or None for ``auto`` (Ray finds the local head itself)."""
    if address == "auto":
        return None
    rest = address.removeprefix("ray://")
    default = CLIENT_PORT if address.startswith("ray://") else DEFAULT_PORT
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, str(default)
    if not host or not port.isdigit():
        raise MlseError(f"--address {address}: expected HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:PORT or auto")
    return host.strip("[]"), int(port)


def probe(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise a one-line MlseError when nothing accepts a connection at ``address``."""
    target = parse_address(address)
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=timeout).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or type(exc).__name__
        raise MlseError(
            f"--address {address}: no Ray cluster answers there ({why}); start one with `ray start --head` "
            "or leave out --address to run on this machine"
        ) from None


def runtime_env() -> dict:
    """The environment every worker starts with: mlse's settings and a PYTHONPATH that finds this checkout."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    paths = [str(package_parent()), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return {"env_vars": env}


def connect(address: str | None = None) -> None:
    """Join ``address`` or start a local Ray (nothing when this process is already connected)."""
    import ray  # lazy: only the Ray engine needs Ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    kwargs = {
        "runtime_env": runtime_env(),
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    if address:
        probe(address)
        _bounded(lambda: ray.init(address=address, **kwargs), f"--address {address}")
    else:
        ray.init(include_dashboard=False, **kwargs)
    import ray.data  # lazy: as above

    for name in ("ray", "ray._private"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes on progress bars and plans are noise here
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False


def _bounded(start, what: str) -> None:
    errors: list[BaseException] = []

    def target():
        try:
            start()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S)
    if thread.is_alive():
        raise MlseError(f"{what}: the Ray cluster did not answer within {CONNECT_TIMEOUT_S:.0f} s")
    if errors:
        exc = errors[0]
        raise MlseError(f"{what}: cannot join the Ray cluster ({type(exc).__name__}: {str(exc).splitlines()[0]})")


def resources() -> dict[str, float]:
    """The cluster's CPUs and GPUs (``{"CPU": 4.0, "GPU": 1.0}``) once connected."""
    import ray  # lazy: only the Ray engine needs Ray

    total = ray.cluster_resources()
    return {"CPU": float(total.get("CPU", 0)), "GPU": float(total.get("GPU", 0))}
