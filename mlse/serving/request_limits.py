"""Limits at the transport: how large a request body may be, and what the upload route may write.

An ASGI middleware in front of the whole app, so a body is refused before anything parses it into memory:
* **Every POST body but an upload** is capped at ``max_body_bytes`` (:func:`body_limit`: twice the file cap plus
  64 KiB, since JSON escaping may double pasted rows). Over the cap: 413, unread, or cut off as it arrives.
* **An upload** (``/gradio_api/upload``) must say its length, is admitted by the
  :class:`~mlse.serving.upload_folder.UploadFolder` (413 / 429 / 503), and the files written are recorded there.
"""

from __future__ import annotations

import json

from mlse.serving.upload_folder import UploadFolder, UploadRefused, client_key

UPLOAD_SUFFIX = "/gradio_api/upload"
_BODY_METHODS = ("POST", "PUT", "PATCH")


class BodyTooLarge(Exception):
    """Raised inside ``receive`` when a body without a length grows past the cap."""


def body_limit(max_upload_bytes: int) -> int:
    """The cap on a non-upload body for a deployment whose uploads hold at most ``max_upload_bytes``."""
    return 2 * max_upload_bytes + 64 * 1024


class RequestLimits:
    """ASGI middleware: ``RequestLimits(app, folder=..., max_body_bytes=...)``."""

    def __init__(self, app, *, folder: UploadFolder | None, max_body_bytes: int):
        self.app = app
        self.folder = folder
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if scope.get("path", "").rstrip("/").endswith(UPLOAD_SUFFIX) and self.folder is not None:
            await self._upload(scope, receive, send, length)
            return
        if length is not None and length > self.max_body_bytes:
            await _refuse(
                send,
                413,
                f"the request body is {length:,} bytes; at most {self.max_body_bytes:,} "
                "are accepted (paste fewer rows, or upload a file)",
            )
            return
        counted = 0
        started = False

        async def counting_receive():
            nonlocal counted
            message = await receive()
            if message["type"] == "http.request":
                counted += len(message.get("body", b""))
                if counted > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _refuse(send, 413, f"the request body is over {self.max_body_bytes:,} bytes")

    async def _upload(self, scope, receive, send, length: int | None) -> None:
        if length is None:
            await _refuse(send, 411, "an upload must say its length (Content-Length)")
            return
        try:
            admission = self.folder.admit(length, client_address(scope))
        except UploadRefused as exc:
            await _refuse(send, exc.status, str(exc), retry_after=exc.status in (429, 503))
            return
        status, chunks = 0, []

        async def capturing_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, capturing_send)
        finally:
            paths = _written_paths(b"".join(chunks)) if status == 200 else []
            self.folder.record(admission, paths)  # releases the reservation too


def client_address(scope) -> str:
    """Who sends this request (:func:`mlse.serving.upload_folder.client_key`)."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    client = scope.get("client")
    return client_key(headers.get, str(client[0]) if client else None)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _written_paths(body: bytes) -> list[str]:
    """The paths Gradio's upload route answered with (a JSON list of strings)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return []
    return [p for p in answer if isinstance(p, str)] if isinstance(answer, list) else []


async def _refuse(send, status: int, message: str, *, retry_after: bool = False) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after:
        headers.append((b"retry-after", b"60"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
