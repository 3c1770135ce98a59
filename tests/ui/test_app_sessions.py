"""Sessions the served app keeps in memory are bounded (memory that comes back).

Gradio keeps a copy of every component's config per session (~0.5 MB here), and every API call without a session
opens a new one: with Gradio's default bound (10,000) the app grew ~470 MB per 1,000 API requests. The launch options
the app uses bound them; this drives real API calls through the served app and counts what it keeps.
"""

from __future__ import annotations

import http.client
import json

from mlse.ui import app as ui_app
from tests.app_server import HOST, free_port


def call_detect_language(port: int, text: str) -> None:
    """One API call as curl or gradio_client makes it: POST the inputs (a new session), read the event stream."""
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    conn.request(
        "POST", "/gradio_api/call/detect_language", json.dumps({"data": [text]}), {"Content-Type": "application/json"}
    )
    event_id = json.loads(conn.getresponse().read())["event_id"]
    conn.request("GET", f"/gradio_api/call/detect_language/{event_id}")
    body = conn.getresponse().read().decode()
    conn.close()
    assert "event: complete" in body, body[:300]


def test_api_calls_do_not_pile_up_sessions(monkeypatch):
    monkeypatch.setattr(ui_app, "SESSION_CAPACITY", 3)
    demo = ui_app.build_app()
    port = free_port()
    demo.launch(server_name=HOST, server_port=port, prevent_thread_lock=True, quiet=True, **ui_app.launch_options())
    try:
        for i in range(8):
            call_detect_language(port, f"Ein Mann spielt Flöte, Nummer {i}.")
        assert 1 <= len(demo.state_holder.session_data) <= 3
    finally:
        demo.close()


def test_the_default_bound_keeps_sessions_to_about_a_hundred_megabytes():
    from gradio.state_holder import SessionState

    demo = ui_app.build_app()
    import tracemalloc

    tracemalloc.start()
    sessions = [SessionState(demo) for _ in range(5)]
    per_session, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sessions and ui_app.SESSION_CAPACITY * per_session / 5 <= 150e6


def test_the_queue_does_not_rebuild_its_analytics_on_every_event(monkeypatch):
    """Gradio rebuilt a DataFrame of its last 10,000 events twice per finished event (12% of the app's CPU under 20
    users); the app refreshes it every 1,000 events, unless the operator set the variables."""
    for name in ui_app.QUEUE_ANALYTICS_ENV:
        monkeypatch.delenv(name, raising=False)
    queue = ui_app.build_app()._queue
    assert queue.ANAYLTICS_CACHE_FREQUENCY == 1000 and queue.ANALYTICS_MAX_EVENTS == 1000
    monkeypatch.setenv("GRADIO_ANALYTICS_CACHE_FREQUENCY", "7")
    assert ui_app.build_app()._queue.ANAYLTICS_CACHE_FREQUENCY == 7
