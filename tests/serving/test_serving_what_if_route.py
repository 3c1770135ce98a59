"""``POST /api/what_if`` (mlse.serving.api_route) through FastAPI's TestClient on the tiny BERT: the answer is the
library's :func:`mlse.explain.what_if` (the edited pair scored as ``python -m mlse score`` scores it), and each kind of
bad request gets one clear 4xx message under the JSON route's limits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient

import mlse
from mlse.encoders.catalogue import BACKBONE, STAGE12, ModelInfo
from mlse.encoders.protocol import similarity
from mlse.errors import ModelNotFoundError
from mlse.serving import api_route
from mlse.serving.api_route import WHAT_IF_PATH, json_api, what_if_request

S1, S2 = "A man is playing a flute.", "A man plays the flute in the park."


class TinyState:
    """What the route reads from the app's state: the offered models (one plain encoder, one scorer) and encoders."""

    backend = "torch"

    def __init__(self, model):
        self.encoders = {"tiny": model}

    def models(self):
        return [ModelInfo("tiny", BACKBONE, "local", "tiny"), ModelInfo("tiny+s12", STAGE12, "scorer", "x")]

    def model_names(self):
        return [m.name for m in self.models()]

    def default_selection(self):
        return ["tiny"], ""

    def encoder(self, name):
        if name not in self.encoders:
            raise ModelNotFoundError(f"unknown model {name!r}")
        return self.encoders[name]


@pytest.fixture(scope="module")
def model(tiny_bert):
    return mlse.load_model(str(tiny_bert), cache=False)


@pytest.fixture()
def client(model):
    with TestClient(json_api(TinyState(model))) as client:
        yield client


def test_dropping_a_word_answers_the_librarys_numbers(client, model):
    answer = client.post(WHAT_IF_PATH, json={"model": "tiny", "sentence1": S1, "sentence2": S2, "drop": ["man"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["edited1"] == "A is playing a flute." and body["edited2"] == "A plays the flute in the park."
    assert body["dropped1"] == ["man"] and body["dropped2"] == ["man"] and body["is_deletion"]
    cos, _ = similarity(model, [body["edited1"]], [body["edited2"]])  # as `mlse score` scores the edited pair
    assert body["new_score"] == pytest.approx(float(cos[0]), abs=1e-6)
    assert body["score"] == pytest.approx(float(similarity(model, [S1], [S2])[0][0]), abs=1e-6)
    assert body["predicted_delta"] is not None and body["delta"] == pytest.approx(body["new_score"] - body["score"])
    assert [w["word"] for w in body["word_effects"]] == ["man", "man"] and body["new_explanation"] is None


def test_an_edited_sentence_is_scored_without_a_prediction(client):
    body = client.post(
        WHAT_IF_PATH, json={"model": "tiny", "sentence1": S1, "sentence2": S2, "edited2": "A woman sings."}
    ).json()
    assert body["edited2"] == "A woman sings." and body["edited1"] == S1
    assert body["is_deletion"] is False and body["predicted_delta"] is None


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "drop": ["man"], "steps": 3}, "unknown field(s) 'steps'"),
        ({"model": "tiny+s12", "sentence1": S1, "sentence2": S2, "drop": ["man"]}, "'tiny+s12' is not offered"),
        ({"sentence1": S1, "sentence2": S2, "drop": ["man"]}, "model: 'None' is not offered"),
        ({"model": "tiny", "sentence2": S2, "drop": ["man"]}, "sentence1 is missing"),
        ({"model": "tiny", "sentence1": " \x00 ", "sentence2": S2, "drop": ["man"]}, "sentence1 is empty"),
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "drop": [3]}, "drop must be a list"),
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "drop": ["w"] * 65}, "at most 64 words"),
        ({"model": "tiny", "sentence1": S1, "sentence2": S2}, "nothing to change"),
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "edited1": 5}, "edited1 must be a string"),
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "drop": ["oboe"]}, "oboe"),  # the library's refusal
        ({"model": "tiny", "sentence1": S1, "sentence2": S2, "edited1": S1}, "changes neither sentence"),
    ],
)
def test_a_bad_request_gets_one_message(client, payload, words):
    answer = client.post(WHAT_IF_PATH, json=payload)
    assert answer.status_code == 422 and words in answer.json()["error"], answer.text


def test_the_json_routes_limits_hold(client, model):
    assert client.post(WHAT_IF_PATH, content=b"[1, 2]").status_code == 400
    assert client.post(WHAT_IF_PATH, content=b"x" * (api_route.MAX_BODY_BYTES + 1)).status_code == 413
    onnx = TinyState(model)
    onnx.backend = "onnx"  # no gradients: nothing to explain
    status, answer = what_if_request(
        onnx, b'{"model": "tiny", "sentence1": "a", "sentence2": "b", "drop": ["a"]}', None
    )
    assert status == 422 and "(none available)" in answer["error"]


def test_one_at_a_time_a_second_is_told_busy(model):
    slot = threading.BoundedSemaphore(1)
    slot.acquire()  # a What if? is being computed
    body = b'{"model": "tiny", "sentence1": "A man sings.", "sentence2": "A man plays.", "drop": ["man"]}'
    status, answer = what_if_request(TinyState(model), body, slot)
    assert status == 503 and answer["error"].startswith("busy")
    slot.release()
    status, answer = what_if_request(TinyState(model), body, slot)
    assert status == 200 and answer["edited1"] == "A sings." and slot.acquire(blocking=False)  # the slot given back


def test_a_second_edit_of_the_same_pair_reuses_its_explanation(model, monkeypatch):
    """A script trying edit after edit of one pair (as the page's reader does) has the pair explained once; the
    answers are the same as without the kept explanation."""
    from cachetools import LRUCache

    from mlse.explain import edits

    explained_pairs = []
    real = edits.explain_pair

    def counting(model, sentence1, sentence2, **kw):
        explained_pairs.append((sentence1, sentence2))
        return real(model, sentence1, sentence2, **kw)

    monkeypatch.setattr(edits, "explain_pair", counting)
    slot, kept = threading.BoundedSemaphore(1), LRUCache(maxsize=api_route.EXPLAINED_PAIRS)
    drop_man = b'{"model": "tiny", "sentence1": "A man sings.", "sentence2": "A man plays.", "drop": ["man"]}'
    drop_sings = b'{"model": "tiny", "sentence1": "A man sings.", "sentence2": "A man plays.", "drop": ["sings"]}'
    first = what_if_request(TinyState(model), drop_man, slot, kept)
    second = what_if_request(TinyState(model), drop_sings, slot, kept)
    assert first[0] == second[0] == 200 and second[1]["edited1"] == "A man ."
    assert explained_pairs == [("A man sings.", "A man plays.")]  # explained for the first edit only
    fresh = what_if_request(TinyState(model), drop_sings, slot)  # nothing kept: explained again, same answer
    assert len(explained_pairs) == 2 and fresh[0] == 200
    numbers = [{k: v for k, v in a.items() if k not in ("seconds", "explanation")} for a in (fresh[1], second[1])]
    assert numbers[0] == numbers[1]  # the new score, the predicted change, the words' effects
    assert np.allclose(fresh[1]["explanation"]["matrix"], second[1]["explanation"]["matrix"], atol=1e-9)
    other = b'{"model": "tiny", "sentence1": "A cat sleeps.", "sentence2": "A man plays.", "drop": ["cat"]}'
    assert what_if_request(TinyState(model), other, slot, kept)[0] == 200 and len(explained_pairs) == 3
