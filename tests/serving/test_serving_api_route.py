"""The JSON route for scripts (POST /api/score, GET /api/models) through FastAPI's TestClient, on fake models: the
answer a script reads, and one clear 4xx message for each kind of bad request."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from mlse.encoders.catalogue import BACKBONE, STAGE12
from mlse.errors import ModelNotFoundError
from mlse.serving import api_route
from mlse.serving.api_route import MODELS_PATH, SCORE_PATH, json_api, score_request
from mlse.serving.pair_scoring import DirectApi
from tests.fake_encoder import FakeEncoder

EN, DE = "A man is playing a flute.", "Ein Mann spielt Flöte."


class BrokenEncoder:
    name, identity = "broken", "broken:v1"

    def encode(self, texts, **kwargs):
        raise RuntimeError("weights missing")


class FakeState:
    """What the route reads from the app's state: the offered models, their kinds, the defaults, the encoders."""

    def __init__(self):
        self.encoders = {
            "fake-a": FakeEncoder("a:v1", "fake-a"),
            "fake-b": FakeEncoder("b:v1", "fake-b"),
            "broken": BrokenEncoder(),
        }
        self.kinds = {"fake-a": BACKBONE, "fake-b": STAGE12, "broken": BACKBONE}
        self.calibration_notes = {}

    def model_names(self):
        return list(self.encoders)

    def models(self):
        from mlse.encoders.catalogue import ModelInfo

        return [ModelInfo(n, self.kinds[n], "fake", n) for n in self.encoders]

    def model_kind(self, name):
        return self.kinds[name]

    def default_selection(self):
        return ["fake-a", "fake-b"], ""

    def encoder(self, name):
        if name not in self.encoders:
            raise ModelNotFoundError(f"unknown model {name!r}")
        return self.encoders[name]


@pytest.fixture()
def client():
    state = FakeState()
    with TestClient(json_api(state)) as client:
        client.state = state
        yield client


def test_a_pair_is_scored_with_the_models_named(client):
    answer = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE, "models": ["fake-b"]})
    assert answer.status_code == 200
    body = answer.json()
    assert [s["model"] for s in body["scores"]] == ["fake-b"] and body["scores"][0]["kind"] == STAGE12
    a, b = client.state.encoders["fake-b"].encode([EN, DE])
    assert body["scores"][0]["cosine"] == pytest.approx(float(np.dot(a, b)), abs=1e-4)
    assert body["scores"][0]["calibrated"] is None and body["not_scored"] == []
    assert [lang["code"] for lang in body["languages"]] == ["en", "de"]


def test_without_models_the_pages_default_selection_is_scored(client):
    body = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE}).json()
    assert [s["model"] for s in body["scores"]] == ["fake-a", "fake-b"]


def test_a_model_that_fails_on_the_server_is_reported_beside_the_others(client):
    body = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE, "models": ["broken", "fake-a"]}).json()
    assert [s["model"] for s in body["scores"]] == ["fake-a"]
    assert body["not_scored"][0]["model"] == "broken" and "weights missing" in body["not_scored"][0]["why"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"not json", 400, "the body is not JSON"),
        (b"[1, 2]", 400, "must be a JSON object, got a list"),
        ({"sentence2": DE}, 422, "sentence1 is missing"),
        ({"sentence1": 12, "sentence2": DE}, 422, "sentence1 must be a string, got int"),
        ({"sentence1": " \x00 ", "sentence2": DE}, 422, "sentence1 is empty"),
        ({"sentence1": EN, "sentence_2": DE}, 422, "unknown field(s) 'sentence_2'"),
        ({"sentence1": EN, "sentence2": DE, "models": ["nope"]}, 422, "models: 'nope' is not offered; choose from"),
        ({"sentence1": EN, "sentence2": DE, "models": "/etc/passwd"}, 422, "'/etc/passwd' is not offered"),
        ({"sentence1": EN, "sentence2": DE, "models": [1]}, 422, "models must be a list of model names"),
        ({"sentence1": EN, "sentence2": DE, "models": []}, 422, "models is empty"),
        ({"sentence1": EN, "sentence2": DE, "lang1": "xx"}, 422, "lang1: 'xx' is not offered"),
    ],
)
def test_a_bad_request_gets_one_message_and_a_4xx(client, body, status, message):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = client.post(SCORE_PATH, content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == status
    assert message in answer.json()["error"], answer.json()
    assert client.state.encoders["fake-a"].calls == 0  # refused before any model ran


def test_too_many_models_are_refused(client, monkeypatch):
    monkeypatch.setattr(api_route, "MAX_MODELS", 1)
    answer = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE, "models": ["fake-a", "fake-b"]})
    assert answer.status_code == 422 and "at most 1 per request" in answer.json()["error"]


def test_an_oversized_body_is_refused_unread(client):
    answer = client.post(SCORE_PATH, content=b"x" * (api_route.MAX_BODY_BYTES + 1))
    assert answer.status_code == 413 and "bytes" in answer.json()["error"]


def test_past_its_limit_the_route_answers_busy_with_retry_after():
    state = FakeState()
    direct = DirectApi(state, max_in_flight=1)
    direct._slots.acquire()  # one request in flight
    with TestClient(json_api(state, direct)) as client:
        answer = client.post(SCORE_PATH, json={"sentence1": EN, "sentence2": DE})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "busy" in answer.json()["error"]


def test_models_are_listed_with_their_kind_and_the_defaults(client):
    body = client.get(MODELS_PATH).json()
    assert {m["name"]: m["kind"] for m in body["models"]} == client.state.kinds
    assert body["default"] == ["fake-a", "fake-b"]


def test_score_request_is_the_route_without_http():
    status, answer = score_request(DirectApi(FakeState()), json.dumps({"sentence1": EN, "sentence2": DE}).encode())
    assert status == 200 and len(answer["scores"]) == 2
