"""More users than the app can hold: the overflow is refused at once with HTTP 503, which the page shows as "busy,
try again", instead of waiting without end."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

from mlse.serving.app_state import AppState
from mlse.ui.app import QUEUE_MAX_SIZE
from mlse.ui.score_tab import SCORE_CONCURRENCY
from tests.app_server import served_app

BUSY_MESSAGE = "This application is currently busy. Please try again."


class BlockedEncoder:
    """An encoder that does not answer until released: keeps every scoring request in the app busy."""

    def __init__(self):
        self.release = threading.Event()

    def encode(self, texts, **kwargs):
        self.release.wait(60)
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0


def _post(port: int, body: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/gradio_api/call/score_pair", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.slow  # serves the whole app (~15 s on a busy 2-core machine)
def test_a_full_queue_refuses_with_503_and_the_page_says_busy_try_again():
    state, blocked = AppState(default_models=("minilm-en",)), BlockedEncoder()
    state.encoder = lambda name: blocked
    body = {"data": ["a sentence", "another sentence", ["minilm-en"], "auto", "auto", None]}
    with served_app(state) as url:
        port = urlparse(url).port
        try:
            statuses = []
            for _ in range(SCORE_CONCURRENCY + QUEUE_MAX_SIZE + 20):
                statuses.append(_post(port, body))
                if statuses[-1] != 200:
                    break
        finally:
            blocked.release.set()
    assert statuses[-1] == 503, statuses
    assert QUEUE_MAX_SIZE <= statuses.count(200) <= SCORE_CONCURRENCY + QUEUE_MAX_SIZE
    import gradio

    bundles = (Path(gradio.__file__).parent / "templates" / "frontend").rglob("*.js")
    assert any(BUSY_MESSAGE in p.read_text(errors="ignore") for p in bundles)  # the page's message for a 503
