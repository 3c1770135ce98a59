"""mlse.serving.request_limits on a small ASGI app: bodies capped before they are read, uploads admitted, recorded."""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from mlse.serving.request_limits import RequestLimits
from mlse.serving.upload_folder import UploadFolder, UploadQuota


def _app(folder: UploadFolder, seen: list) -> Starlette:
    async def echo(request: Request):
        body = await request.body()
        seen.append(len(body))
        return JSONResponse({"bytes": len(body)})

    async def upload(request: Request):  # what Gradio's route does: write the file, answer with its path
        form = await request.form()
        item = form["files"]
        target = folder.root / "hash1" / item.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(await item.read())
        return JSONResponse([str(target)])

    routes = [
        Route("/gradio_api/call/x", echo, methods=["POST"]),
        Route("/gradio_api/upload", upload, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(RequestLimits, folder=folder, max_body_bytes=1000)
    return app


@pytest.fixture()
def client(tmp_path):
    folder = UploadFolder(tmp_path / "up", UploadQuota(total_bytes=5000, client_bytes=3000))
    seen: list = []
    with TestClient(_app(folder, seen)) as test_client:
        yield test_client, folder, seen


def test_a_body_over_the_cap_is_refused_before_the_route_reads_it(client):
    test_client, _, seen = client
    assert test_client.post("/gradio_api/call/x", content=b"x" * 999).status_code == 200
    answer = test_client.post("/gradio_api/call/x", content=b"x" * 1001)
    assert answer.status_code == 413 and "1,000" in answer.json()["error"]
    assert seen == [999]


def test_a_body_without_a_length_is_cut_off_at_the_cap(client):
    test_client, _, seen = client

    def chunks():
        for _ in range(5):
            yield b"x" * 300

    assert test_client.post("/gradio_api/call/x", content=chunks()).status_code == 413
    assert seen == []


def test_an_upload_is_recorded_for_its_sender_and_refused_past_the_share(client):
    test_client, folder, _ = client
    first = test_client.post("/gradio_api/upload", files={"files": ("a.tsv", b"x" * 1500)})
    assert first.status_code == 200
    path = first.json()[0]
    assert folder.claim(path, "s1", client="testclient")  # the sender's address, as the route saw it
    second = test_client.post("/gradio_api/upload", files={"files": ("b.tsv", b"y" * 1500)})
    assert second.status_code == 429 and second.headers["retry-after"] == "60"
    assert "try again" in json.loads(second.text)["error"] and folder.reserved_bytes() == 0
