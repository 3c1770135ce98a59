"""The JSON route for scripts: ``POST /api/score`` (and ``GET /api/models``) on a plain FastAPI app of our own, which
the page is mounted on (:func:`mlse.ui.app.build_server`).

It skips Gradio's routing, session state and pre/postprocessing (docs/speed.md) and scores with the page's
:func:`mlse.serving.pair_scoring.score_api`, at most :data:`~mlse.serving.pair_scoring.API_MAX_IN_FLIGHT` at once
(past that: 503 "busy" with ``Retry-After``).

``POST /api/score``: :data:`FIELDS` (``models`` optional: the default selection; ``lang1``/``lang2``: "auto" or a
code) -> the answer of :func:`~mlse.serving.pair_scoring.score_api`. ``POST /api/what_if``: :data:`WHAT_IF_FIELDS`
for a model in :func:`explainable` -> :meth:`mlse.explain.edits.WhatIf.to_dict`; one at a time, the last
:data:`EXPLAINED_PAIRS` explanations kept. ``GET /api/models``: :func:`models_answer`. Errors: ``{"error": message}``
with 400 (not a JSON object), 413 (over :data:`MAX_BODY_BYTES`) or 422 (a bad field, model or language).
"""

from __future__ import annotations

import json
import threading

from cachetools import LRUCache
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from mlse.api import failure_text
from mlse.encoders.catalogue import chosen_models
from mlse.errors import MlseError
from mlse.explain import what_if
from mlse.serving.field_checks import choice_problem
from mlse.serving.pair_scoring import MAX_MODELS, ApiBusy, DirectApi
from mlse.text.language_id import language_choices
from mlse.text.sentences import AUTO, MAX_CHARS, clean_text

SCORE_PATH, MODELS_PATH, WHAT_IF_PATH = "/api/score", "/api/models", "/api/what_if"
FIELDS = ("sentence1", "sentence2", "models", "lang1", "lang2")
WHAT_IF_FIELDS = ("model", "sentence1", "sentence2", "drop", "edited1", "edited2")
MAX_DROP = 64  # words dropped in one edit
# Two sentences of MAX_CHARS and a full model list fit in a few kB; a body over this is refused unread.
MAX_BODY_BYTES = 64 * 1024 + 8 * MAX_CHARS
RETRY_AFTER_S = 1
_EXAMPLE = '{"sentence1": "A man plays a flute.", "sentence2": "Ein Mann spielt Flöte.", "models": ["me5-small"]}'
_WHAT_IF_EXAMPLE = (
    '{"model": "me5-small", "sentence1": "A man plays a flute.", "sentence2": "Ein Mann spielt Flöte.", '
    '"drop": ["flute"]}'
)


class RequestError(Exception):
    """A request refused before scoring: ``status`` (4xx or 503) and one message for the caller."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> dict:
    """The request's JSON object, or :class:`RequestError` 400 / 413 saying what is wrong with the body."""
    if len(raw) > MAX_BODY_BYTES:
        raise RequestError(413, f"the body is {len(raw):,} bytes; at most {MAX_BODY_BYTES:,} are accepted")
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(400, f"the body is not JSON ({str(exc)[:120]}); send {_EXAMPLE}") from None
    if not isinstance(payload, dict):
        raise RequestError(400, f"the body must be a JSON object, got a {type(payload).__name__}; send {_EXAMPLE}")
    return payload


def score_arguments(payload: dict, offered: list[str]) -> dict:
    """The keyword arguments of :func:`mlse.serving.pair_scoring.score_api` for a request, or :class:`RequestError` 422
    naming the first problem (a bad field, sentence, model list or language)."""
    _known_fields(payload, FIELDS)
    request = {field: _sentence(payload, field, _EXAMPLE) for field in ("sentence1", "sentence2")}
    request["models"] = _models(payload.get("models"), offered)
    codes = [AUTO, *(code for _, code in language_choices())]
    for field in ("lang1", "lang2"):
        value = AUTO if payload.get(field) is None else payload[field]
        problem = choice_problem(field, value, codes) if isinstance(value, str) else f"{field} must be a string"
        if problem:
            raise RequestError(422, problem)
        request[field] = value
    return request


def _known_fields(payload: dict, fields: tuple[str, ...]) -> None:
    """RequestError 422 naming the fields of ``payload`` that are not in ``fields``."""
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise RequestError(422, f"unknown field(s) {', '.join(map(repr, unknown))}; expected {', '.join(fields)}")


def _sentence(payload: dict, field: str, example: str) -> str:
    """``payload[field]``, or RequestError 422 when it is missing, not a string or empty once cleaned."""
    value = payload.get(field)
    if value is None:
        raise RequestError(422, f"{field} is missing; send {example}")
    if not isinstance(value, str):
        raise RequestError(422, f"{field} must be a string, got {type(value).__name__}")
    if not clean_text(value)[0]:
        raise RequestError(422, f"{field} is empty (after removing control characters and surrounding space)")
    return value


def _models(value, offered: list[str]) -> list[str] | None:
    """The model names asked for (None: the page's default selection); RequestError 422 when they are not usable."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RequestError(422, "models must be a list of model names (GET /api/models lists them)")
    names, asked, refused = chosen_models(names, offered)  # the app's one clean-up of a model list
    if not asked:
        raise RequestError(422, "models is empty; name at least one model, or leave models out for the defaults")
    if asked > MAX_MODELS:
        raise RequestError(422, f"{asked} models named; at most {MAX_MODELS} per request")
    if refused:
        raise RequestError(422, choice_problem("models", refused[0][0], offered) + " (GET /api/models lists them)")
    return names


def score_request(direct: DirectApi, raw: bytes) -> tuple[int, dict]:
    """(HTTP status, JSON answer) for one request body: the whole route without the HTTP framework, for tests."""
    try:
        request = score_arguments(parse_body(raw), direct.state.model_names())
        return 200, direct.score(**request)
    except RequestError as exc:
        return exc.status, {"error": str(exc)}
    except ApiBusy as exc:
        return 503, {"error": str(exc)}


def explainable(state) -> list[str]:
    """The models What if? takes, as the page offers them: plain encoders on torch (a scorer's heads are not a dot
    product of two sentence vectors; ONNX has no gradients)."""
    if getattr(state, "backend", "torch") != "torch":
        return []
    return [m.name for m in state.models() if m.source != "scorer"]


def what_if_arguments(payload: dict, offered: list[str]) -> dict:
    """The keyword arguments of :func:`mlse.explain.what_if` for a request (sentences cleaned as the page cleans
    them), or RequestError 422 naming the first problem."""
    _known_fields(payload, WHAT_IF_FIELDS)
    model = payload.get("model")
    if not isinstance(model, str) or model not in offered:
        raise RequestError(422, choice_problem("model", str(model), offered) + " (models What if? can explain)")
    request = {"model": model}
    for field in ("sentence1", "sentence2", "edited1", "edited2"):
        if field.startswith("sentence") or payload.get(field) is not None:
            request[field] = clean_text(_sentence(payload, field, _WHAT_IF_EXAMPLE))[0]
    drop = payload.get("drop", [])
    drop = [drop] if isinstance(drop, str) else drop
    if not isinstance(drop, list) or not all(isinstance(w, str) and w.strip() for w in drop) or len(drop) > MAX_DROP:
        raise RequestError(422, f"drop must be a list of at most {MAX_DROP} words; send {_WHAT_IF_EXAMPLE}")
    if not drop and "edited1" not in request and "edited2" not in request:
        raise RequestError(
            422, f"nothing to change: name words to drop, or give edited1 / edited2; send {_WHAT_IF_EXAMPLE}"
        )
    return {**request, "drop": drop}


EXPLAINED_PAIRS = 32  # the last pairs a What if? explained, kept for the next edit of the same pair


def what_if_request(
    state, raw: bytes, slot: threading.Semaphore, explained: LRUCache | None = None
) -> tuple[int, dict]:
    """(HTTP status, JSON answer) for one What if? body: the route without the HTTP framework, for tests. ``slot``:
    held while computing (taken: 503 at once). ``explained``: (model, sentence 1, sentence 2) -> the pair's
    explanation, so repeated edits of one pair explain it once; accessed only while holding ``slot``."""
    explained = {} if explained is None else explained  # None: nothing kept between calls
    try:
        request = what_if_arguments(parse_body(raw), explainable(state))
    except RequestError as exc:
        return exc.status, {"error": str(exc)}
    if not slot.acquire(blocking=False):
        return 503, {"error": "busy: a What if? is being computed; try again in a moment"}
    try:
        model = state.encoder(request.pop("model"))
        key = (model, request["sentence1"], request["sentence2"])  # the encoder object: a reloaded run is another
        encode = getattr(getattr(state, "batcher", None), "encode", None)
        change = what_if(model, explain_new=False, encode=encode, explanation=explained.get(key), **request)
        explained[key] = change.explanation
    except MlseError as exc:  # a word in neither sentence, an edit that changes nothing, a model that cannot load
        return 422, {"error": str(exc)}
    except Exception as exc:  # named, never a traceback
        return 500, {"error": failure_text(exc)}
    finally:
        slot.release()
    return 200, change.to_dict()


def models_answer(state) -> dict:
    """``GET /api/models``: the models offered here with their kind, and the page's default selection."""
    return {
        "models": [{"name": m.name, "kind": m.kind} for m in state.models()],
        "default": state.default_selection()[0],
    }


def json_api(state, direct: DirectApi | None = None):
    """A FastAPI app holding the JSON routes (the page is mounted on it by :func:`mlse.ui.app.build_server`).

    Scoring runs in a worker thread, so the event loop keeps serving the page; bodies are read up to
    :data:`MAX_BODY_BYTES`."""
    direct = direct or DirectApi(state)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # Gradio's /gradio_api/info documents the page

    what_if_slot, explained = threading.BoundedSemaphore(1), LRUCache(maxsize=EXPLAINED_PAIRS)

    @app.post(SCORE_PATH)
    async def score(request: Request) -> JSONResponse:
        return await _answer(request, lambda raw: score_request(direct, raw))

    @app.post(WHAT_IF_PATH)
    async def what_if_route(request: Request) -> JSONResponse:
        return await _answer(request, lambda raw: what_if_request(state, raw, what_if_slot, explained))

    @app.get(MODELS_PATH)
    async def models() -> JSONResponse:
        return JSONResponse(await run_in_threadpool(models_answer, state))

    return app


async def _answer(request: Request, handle) -> JSONResponse:
    """Read the body (capped), run ``handle(raw) -> (status, answer)`` in a worker thread, answer with JSON."""
    try:
        raw = await _read_capped(request)
    except RequestError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    status, answer = await run_in_threadpool(handle, raw)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return JSONResponse(answer, status_code=status, headers=headers)


async def _read_capped(request) -> bytes:
    """The request's body, or RequestError 413 as soon as it passes MAX_BODY_BYTES (whatever it declared)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise RequestError(413, f"the body is over {MAX_BODY_BYTES:,} bytes, the most accepted")
    return bytes(body)
