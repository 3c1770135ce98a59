"""Calling the running app over HTTP: a queued Gradio endpoint as the page calls it (:class:`ApiCaller`), an
unqueued one (:func:`direct_call`), and the plain JSON route beside the page (:func:`json_call`); a call that
returns no result raises :class:`ApiError`.
"""

from __future__ import annotations

import http.client
import json

JSON_PATH = "/api/score"  # mlse.serving.api_route.SCORE_PATH (not imported: the benchmark must not load the app)


class ApiError(Exception):
    """A call that did not return a result; ``busy`` when the app refused it because its queue was full (HTTP 503)."""

    def __init__(self, message: str, *, busy: bool = False):
        super().__init__(message)
        self.busy = busy


class ApiCaller:
    """Calls a queued Gradio endpoint over one keep-alive HTTP connection: POST the inputs, read the event stream.

    ``session_hash``: the Gradio session every call belongs to, as a page (or ``gradio_client.Client``) keeps one for
    its visitor's whole visit; without one, each call opens a session of its own (what a bare ``curl`` does), which
    costs the app a copy of every component's config per call.
    """

    def __init__(self, port: int, session_hash: str | None = None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.session_hash = session_hash

    def __call__(self, api_name: str, *data):
        """The endpoint's outputs; :class:`ApiError` when it was refused (``busy`` for a full queue) or failed."""
        payload = {"data": list(data)}
        if self.session_hash is not None:
            payload["session_hash"] = self.session_hash
        body = json.dumps(payload)
        self.conn.request("POST", f"/gradio_api/call/{api_name}", body, {"Content-Type": "application/json"})
        posted = self.conn.getresponse()
        answer = posted.read()
        if posted.status != 200:
            raise ApiError(f"{api_name}: HTTP {posted.status} {answer[:200]!r}", busy=posted.status == 503)
        event_id = json.loads(answer)["event_id"]
        self.conn.request("GET", f"/gradio_api/call/{api_name}/{event_id}")
        response, event = self.conn.getresponse(), None
        while True:
            line = response.readline().decode()
            if not line:
                raise ApiError(f"{api_name}: the event stream ended without a result")
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                response.read()  # drain, so the connection can be reused
                if event == "error":
                    raise ApiError(f"{api_name} failed: {line[5:].strip()}")
                return json.loads(line[5:])


def direct_call(conn: http.client.HTTPConnection, api_name: str, *data, session_hash: str | None = None):
    """An unqueued endpoint's outputs: one POST to ``/gradio_api/run/<api_name>``, answered with JSON (no event
    stream); :class:`ApiError` when refused or failed (``busy`` when the app says it is at its limit).
    ``session_hash`` as in :class:`ApiCaller` (gradio_client sends its own with every call)."""
    payload = {"data": list(data)} | ({"session_hash": session_hash} if session_hash else {})
    conn.request("POST", f"/gradio_api/run/{api_name}", json.dumps(payload), {"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = response.read()
    if response.status != 200:
        raise ApiError(f"{api_name}: HTTP {response.status} {answer[:200]!r}", busy=b"busy" in answer)
    return json.loads(answer)["data"]


def json_call(conn: http.client.HTTPConnection, s1: str, s2: str, models: list[str]) -> dict:
    """One ``POST /api/score`` on a keep-alive connection -> the JSON answer; ApiError when refused (``busy`` for
    503) or failed."""
    body = json.dumps({"sentence1": s1, "sentence2": s2, "models": models})
    conn.request("POST", JSON_PATH, body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = response.read()
    if response.status != 200:
        raise ApiError(f"{JSON_PATH}: HTTP {response.status} {answer[:200]!r}", busy=response.status == 503)
    return json.loads(answer)
