"""Is the Hugging Face hub reachable from here? One cheap, bounded probe, remembered for a while.

The app offers uncached hub models only when a download could work. The probe runs in a background thread
(:func:`probe_in_background`) so nothing waits on the network; until it answers the hub counts as unreachable.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request

from mlse.data.hub_download import hub_offline

REMEMBER_SECONDS = 600.0  # connectivity rarely changes while an app is up; re-probe every ten minutes
TIMEOUT_SECONDS = 3.0
# A tiny JSON answer from the hub's API (the model card of a model mlse offers anyway).
PROBE_PATH = "/api/models/sentence-transformers/LaBSE"

_lock = threading.Lock()
_answer: tuple[float, bool] | None = None  # (monotonic time of the answer, reachable)
_probing = False


def probe_hub(timeout: float = TIMEOUT_SECONDS) -> bool:
    """True when the hub answers an HTTP request within ``timeout`` seconds (any HTTP status counts as an answer)."""
    if hub_offline():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(endpoint + PROBE_PATH, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return True
    except urllib.error.HTTPError:  # the server answered (rate limit, auth...): the hub itself is reachable
        return True
    except (OSError, ValueError):  # DNS failure, refused, timeout, no route, bad HF_ENDPOINT
        return False


def hub_reachable() -> bool | None:
    """The remembered answer (None while no probe has answered yet); starts a new probe when the answer is stale."""
    with _lock:
        answer = _answer
    if answer is None or time.monotonic() - answer[0] > REMEMBER_SECONDS:
        probe_in_background()
    return None if answer is None else answer[1]


def probe_in_background() -> None:
    """Start one probe thread unless one is already running; its answer is remembered for :data:`REMEMBER_SECONDS`."""
    global _probing
    with _lock:
        if _probing:
            return
        _probing = True

    def run() -> None:
        global _answer, _probing
        reachable = probe_hub()
        with _lock:
            _answer, _probing = (time.monotonic(), reachable), False

    threading.Thread(target=run, name="mlse-hub-probe", daemon=True).start()


def remember(reachable: bool | None) -> None:
    """Set (or with None, forget) the remembered answer: for tests, and for deployments that know better."""
    global _answer
    with _lock:
        _answer = None if reachable is None else (time.monotonic(), bool(reachable))
