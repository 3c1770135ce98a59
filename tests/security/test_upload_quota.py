"""A stranger cannot fill the disk or the memory of a public deployment through uploads or pasted text.

The upload folder never holds more than its cap while visitors flood it (each refused upload is a 429 for a visitor
over their share or a 503 for a full folder, never a crash), the app serves afterwards, and a pasted body over the
transport's cap is refused before it is read (docs/deploy.md, threat model).
"""

from __future__ import annotations

import json
import socket
import uuid

import httpx
import pytest

from benchmarks.upload_quota import flood, serves
from mlse.public_mode import MAX_UPLOAD_BYTES
from mlse.serving.request_limits import body_limit
from mlse.serving.upload_folder import PUBLIC_QUOTA
from tests.security.public_app import start_public_app, stop_app

HANG_S = 60  # a hang guard, not a speed target


@pytest.fixture(scope="module")
def flooded_app(tmp_path_factory):
    app = start_public_app(tmp_path_factory.mktemp("flooded-app"))
    yield app
    stop_app(app)


def test_the_upload_folder_never_holds_more_than_its_cap_and_the_app_serves(flooded_app):
    # 15 visitors x 22 files of 0.99 MB: more than the folder holds (200 MB), and past some visitors' share (20 MB)
    result = flood(flooded_app.url, flooded_app.uploads, uploads=330, visitors=15, size=990_000, threads=6)
    assert result["peak_bytes"] <= PUBLIC_QUOTA.total_bytes, result
    assert set(result["statuses"]) <= {"200", "429", "503"}, result
    assert result["statuses"].get("503", 0) > 0 and result["statuses"]["200"] >= 150, result
    assert serves(flooded_app.url) and flooded_app.alive()


def test_a_visitor_over_their_share_is_told_to_come_back(flooded_app):
    # the first flood visitor (198.51.100.1) fills its whole share, whatever ran before, then sends one more
    flood(
        flooded_app.url,
        flooded_app.uploads,
        uploads=PUBLIC_QUOTA.client_bytes // 990_000 + 1,
        visitors=1,
        size=990_000,
        threads=1,
    )
    refused = flooded_app.upload("one-more.tsv", b"a\tb\n" * 247_500, visitor="198.51.100.1")  # 0.99 MB
    assert refused.status_code in (429, 503) and refused.headers.get("retry-after"), refused.text
    assert "try again" in refused.json()["error"]


@pytest.mark.parametrize("megabytes", [3, 45])
def test_pasted_text_over_the_cap_is_refused_unread(public_app, megabytes):
    pasted = "A dog runs.\tUn chien court.\n" * (megabytes * 1_000_000 // 28)
    body = {"data": [None, pasted, ["minilm-en"]], "session_hash": uuid.uuid4().hex}
    answer = httpx.post(f"{public_app.url}/gradio_api/call/score_file", json=body, timeout=60)
    assert answer.status_code == 413, answer.text[:300]
    assert f"{body_limit(MAX_UPLOAD_BYTES):,}" in answer.json()["error"]
    # unread: the same request with only its first KiB sent is answered, so the app never waited for the rest
    encoded = json.dumps(body).encode()
    assert answer_before_the_body(public_app.url, "/gradio_api/call/score_file", encoded).startswith(b"HTTP/1.1 413")
    assert public_app.alive()


def answer_before_the_body(url: str, path: str, body: bytes, sent: int = 1024) -> bytes:
    """The status line the server answers to ``body`` declared whole but only ``sent`` bytes of it sent; fails when the
    server waits for the rest (a hang guard of HANG_S seconds ends the wait)."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=HANG_S) as connection:
        connection.sendall(head + body[:sent])
        try:
            return connection.recv(4096).split(b"\r\n", 1)[0]
        except TimeoutError:
            raise AssertionError(f"no answer until the other {len(body) - sent:,} bytes were sent") from None


def test_pasted_text_under_the_cap_is_still_read(public_app):
    pasted = "A dog runs.\tUn chien court.\n" * 3
    answer = public_app.call("score_file", [None, pasted, ["minilm-en"]], session=uuid.uuid4().hex)
    assert "Read 3 sentence pairs" in answer, answer
