"""The app as ``python app.py`` serves it: the page mounted on our FastAPI app beside the JSON route, with what
``launch()`` used to set (session bound, public upload cap, the queue), on fake models and without a browser."""

from __future__ import annotations

import json
import socket

import pytest
from fastapi.testclient import TestClient

from mlse.serving.api_route import SCORE_PATH
from mlse.serving.app_state import AppState
from mlse.serving.http_server import bind
from mlse.ui import app as ui_app
from tests.fake_encoder import FakeEncoder

EN, DE = "A man is playing a flute.", "Ein Mann spielt Flöte."


def _mounted(server):
    """The Gradio app mounted at / (the last route of ours)."""
    return server.routes[-1].app


@pytest.fixture()
def state(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    state = AppState(default_models=("minilm-en",))
    fake = FakeEncoder("minilm-fake:v1", "minilm-en")
    state.encoder = lambda name: fake  # no model is loaded: the test is about the serving, not the scores
    return state


def test_the_page_the_queue_and_the_json_route_are_served_together(state, monkeypatch):
    monkeypatch.delenv("MLSE_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    server = ui_app.build_server(state)
    gradio_app = _mounted(server)
    assert gradio_app.state_holder.capacity == ui_app.SESSION_CAPACITY  # launch()'s bound, kept when mounted
    assert gradio_app.get_blocks().max_file_size is None and gradio_app.get_blocks().show_error is False
    assert gradio_app.get_blocks().has_launched  # else Gradio skips its own check that a file is an upload
    with TestClient(server) as client:
        assert "<html" in client.get("/").text.lower()
        answer = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE, "models": ["minilm-en"]})
        assert answer.status_code == 200 and answer.json()["scores"][0]["model"] == "minilm-en"
        # the page's own queued event still runs: the queue started with the mounted app
        posted = client.post(
            "/gradio_api/call/score_pair", json={"data": [EN, DE, ["minilm-en"], "auto", "auto", None]}
        )
        stream = client.get(f"/gradio_api/call/score_pair/{posted.json()['event_id']}").text
        assert "event: complete" in stream and "minilm-en" in stream
        result = json.loads(stream.split("event: complete", 1)[1].split("data:", 1)[1].strip())
        assert result[0]["data"][0][0] == "minilm-en"


def test_on_a_space_uploads_are_capped_and_the_page_installable_as_launch_had_it(state, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/mlse")  # public mode is implied on a Space
    from mlse.public_mode import MAX_UPLOAD_BYTES

    blocks = _mounted(ui_app.build_server(state)).get_blocks()
    assert blocks.max_file_size == MAX_UPLOAD_BYTES and blocks.pwa is True


def test_a_taken_port_is_an_oserror_before_serving():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(OSError):
            bind("127.0.0.1", taken.getsockname()[1])
