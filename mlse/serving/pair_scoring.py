"""Scoring one pair with several models, as the app does it: the Score tab's table, its direct API and the JSON route
for scripts (:mod:`mlse.serving.api_route`) all call :func:`score_models` / :func:`score_api`, so each gives the same
numbers through the same micro-batcher. No page here: :mod:`mlse.ui.score_tab` renders the results.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mlse.api import failure_text
from mlse.encoders.catalogue import chosen_models
from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.text.sentences import AUTO, clean_text, resolve_language

MAX_MODELS = 24  # per request: an API caller cannot make one click load every model on disk
# Direct API calls scored at once: Gradio runs unqueued calls in its 40 worker threads, so more would wait anyway
API_MAX_IN_FLIGHT = 32


def score_one(state, name: str, s1: str, s2: str) -> tuple[float, float | None]:
    """Cosine of the pair under one model, and its calibrated 0-5 score when the model has one: the library's
    :func:`mlse.encoders.protocol.similarity`, through the app's micro-batcher (concurrent requests share one encoder
    call)."""
    encode = getattr(getattr(state, "batcher", None), "encode", None)  # None: a state without a batcher
    cos, calibrated = similarity(state.encoder(name), [s1], [s2], encode=encode)
    return float(cos[0]), (float(calibrated[0]) if calibrated is not None else None)


def clean_pair(sentence1, sentence2) -> tuple[str, str, list[tuple[int, str]]]:
    """Both sentences cleaned (:func:`clean_text`), and (1 or 2, notice) for each one that was changed."""
    (s1, n1), (s2, n2) = clean_text(sentence1), clean_text(sentence2)
    return s1, s2, [(i, n) for i, n in ((1, n1), (2, n2)) if n]


def score_models(
    state, names: list[str], s1: str, s2: str, progress: Callable[[float, str], None] | None = None
) -> tuple[list[tuple[str, str, float, float | None]], list[tuple[str, str]]]:
    """(name, kind, cosine, calibrated or None) for every model that scored the (cleaned) pair, and (name, why) for
    every one that could not: one broken model never takes the others down with it."""
    scores, failures = [], []
    for i, name in enumerate(names):
        if progress is not None:
            progress(i / len(names), f"scoring with {name}")
        try:
            cos, calibrated = score_one(state, name, s1, s2)
        except Exception as exc:  # unknown model, missing files, a broken run: never takes the other models down
            failures.append((name, failure_text(exc)))
            continue
        scores.append((name, state.model_kind(name), cos, calibrated))
    return scores, failures


def score_api(state, sentence1, sentence2, models=None, lang1=AUTO, lang2=AUTO) -> dict:
    """The direct JSON API (``POST /gradio_api/run/score``): the Score tab's work without its table and markdown.

    -> ``{"scores": [{"model", "kind", "cosine", "calibrated"}], "languages": [{"code", "how"}] x 2, "notices": [...],
    "not_scored": [{"model", "why"}]}``; no model named: the default selection. Bad input lands in ``notices`` /
    ``not_scored``, never raises."""
    s1, s2, cleaned = clean_pair(sentence1, sentence2)
    notices = [f"sentence {i}: {n}" for i, n in cleaned]
    answer = {"scores": [], "languages": [], "notices": notices, "not_scored": []}
    if not s1 or not s2:
        notices.append("enter two non-empty sentences")
        return answer
    # only the models the page offers: a name must never reach the loader as a path on disk or a hub id
    asked_for = models if chosen_models(models)[0] else state.default_selection()[0]
    names, asked, refused = chosen_models(asked_for, set(state.model_names()), MAX_MODELS)
    if asked > len(names) + len(refused):
        notices.append(f"scored the first {MAX_MODELS} of {asked} models")
    scores, failures = score_models(state, names, s1, s2)
    failures = [(name, f"{why} (the Models list of the Score tab names them)") for name, why in refused] + failures
    answer["scores"] = [
        {"model": name, "kind": kind, "cosine": round(cos, 4), "calibrated": round(cal, 2) if cal is not None else None}
        for name, kind, cos, cal in scores
    ]
    answer["not_scored"] = [{"model": name, "why": why} for name, why in failures]
    answer["languages"] = [
        dict(zip(("code", "how"), resolve_language(text, override))) for text, override in ((s1, lang1), (s2, lang2))
    ]
    return answer


class DirectApi:
    """``score_api`` as an unqueued endpoint for scripts: each call is one HTTP POST answered with JSON, the cheapest
    path Gradio has (docs/speed.md). Calls still meet in the micro-batcher; with no queue to bound them, past
    :data:`API_MAX_IN_FLIGHT` at once a call is refused as "busy" rather than left waiting."""

    def __init__(self, state, max_in_flight: int | None = None):
        self.state = state
        self.max_in_flight = max_in_flight or API_MAX_IN_FLIGHT
        self._slots = threading.BoundedSemaphore(self.max_in_flight)

    def score(self, sentence1, sentence2, models=None, lang1=AUTO, lang2=AUTO) -> dict:
        """``score_api``, or :class:`ApiBusy` when too many calls are in flight."""
        if not self._slots.acquire(blocking=False):
            raise ApiBusy(f"busy: {self.max_in_flight} requests are being scored right now; try again in a moment")
        try:
            return score_api(self.state, sentence1, sentence2, models, lang1, lang2)
        finally:
            self._slots.release()


class ApiBusy(MlseError):
    """The direct API is at its limit of concurrent calls (the caller should retry shortly)."""
