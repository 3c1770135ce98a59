"""A stranger cannot read or delete server files through the app's file parameters (docs/deploy.md, threat model).

Each file endpoint is first called with the visitor's own upload of a file (the control: its rows are read, so the
endpoint and its other parameters work and a read would show), then with every other kind of path a hostile client
can write into a ``gradio.FileData``: a server path (absolute, relative to the app's folder, with ``..`` out of the
upload folder), a file planted in the upload folder that nobody uploaded, a link in the upload folder to a server
file, another visitor's upload, and a file the app itself wrote there for another visitor's download. None of them is
read, and none is deleted.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.security.public_app import VISITORS, file_data

MARKER = "zebra-quartz-7f3a"  # in every secret row: a read would show it
ROWS = f"sentence1\tsentence2\tscore\n{MARKER} one.\t{MARKER} eins.\t4.0\n{MARKER} two.\t{MARKER} zwei.\t3.0\n"
BITEXT = f"en\tde\n{MARKER} one.\t{MARKER} eins.\n{MARKER} two.\t{MARKER} zwei.\n"
# endpoint -> (its parameters with the file at FILE, the rows it reads)
FILE = object()
ENDPOINTS = {
    "score_file": ([FILE, "", ["minilm-en"]], ROWS),
    "map_my_sentences": (["minilm-en", FILE, ""], BITEXT),
    "tatoeba_bitext_errors": ([FILE, "", "", "minilm-en", "cosine"], BITEXT),
    "compare_file_with_gold": ([FILE, "", ["minilm-en"], "0-5"], ROWS),
    "file_disagreements": ([FILE, "", "minilm-en", "0-5", 0.0, 5.0, 5], ROWS),
}
KINDS = ("absolute", "relative", "dotdot", "planted", "link", "other-visitor", "app-output")


def _params(template: list, file: dict) -> list:
    return [file if p is FILE else p for p in template]


def _read(answer: str) -> bool:
    """Whether an answer shows the secret rows (or says it read them)."""
    return MARKER in answer or "Read 2 " in answer


@pytest.fixture(scope="module")
def secrets_on_server(public_app, tmp_path_factory):
    """A server file outside the upload folder, one planted inside it, and a link inside it to the outside one."""
    outside = tmp_path_factory.mktemp("server-files")
    secret = outside / "secret-rows.tsv"
    secret.write_text(ROWS, encoding="utf-8")
    bitext = outside / "secret-bitext.tsv"
    bitext.write_text(BITEXT, encoding="utf-8")
    planted = public_app.uploads / "planted0123456789abcdef"
    planted.mkdir(parents=True, exist_ok=True)
    (planted / "secret-rows.tsv").write_text(ROWS, encoding="utf-8")
    (planted / "secret-bitext.tsv").write_text(BITEXT, encoding="utf-8")
    link = public_app.uploads / "link0123456789abcdef"
    link.mkdir(parents=True, exist_ok=True)
    (link / "secret-rows.tsv").symlink_to(secret)
    (link / "secret-bitext.tsv").symlink_to(bitext)
    return {"outside": outside, "planted": planted, "link": link}


def _probe_path(kind: str, rows_name: str, files: dict, public_app, endpoint: str) -> str:
    outside = files["outside"] / rows_name
    if kind == "absolute":
        return str(outside)
    if kind == "relative":
        return os.path.relpath(outside, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    if kind == "dotdot":
        return str(public_app.uploads / ".." / os.path.relpath(outside, public_app.uploads.parent))
    if kind == "planted":
        return str(files["planted"] / rows_name)
    if kind == "link":
        return str(files["link"] / rows_name)
    if kind == "other-visitor":  # visitor 2 uploads; visitor 1 names the path in a session of its own
        content = (files["outside"] / rows_name).read_bytes()
        answer = public_app.upload(f"theirs-{endpoint}.tsv", content, visitor=VISITORS[1])
        assert answer.status_code == 200, answer.text
        files.setdefault("theirs", []).append(answer.json()[0])
        return answer.json()[0]
    if kind == "app-output":  # the scored CSV the app wrote for visitor 2's download
        own = public_app.upload("own.tsv", ROWS.encode(), visitor=VISITORS[1])
        answer = public_app.call(
            "score_file", [file_data(own.json()[0]), "", ["minilm-en"]], session=uuid.uuid4().hex, visitor=VISITORS[1]
        )
        assert _read(answer), answer
        csv = [p for p in _paths_in(answer) if p.endswith(".csv")]
        assert csv, answer
        return csv[0]
    raise AssertionError(kind)


def _paths_in(answer: str) -> list[str]:
    import json

    found: list[str] = []

    def walk(value):
        if isinstance(value, dict):
            if isinstance(value.get("path"), str):
                found.append(value["path"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    try:
        walk(json.loads(answer))
    except ValueError:
        pass
    return found


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_no_file_parameter_reads_or_deletes_what_this_session_did_not_upload(public_app, secrets_on_server, endpoint):
    template, rows = ENDPOINTS[endpoint]
    rows_name = "secret-bitext.tsv" if rows is BITEXT else "secret-rows.tsv"
    # the control: the visitor's own upload is read by this endpoint, so a read would show in the answer
    own = public_app.upload("mine.tsv", rows.encode(), visitor=VISITORS[0])
    assert own.status_code == 200, own.text
    answer = public_app.call(endpoint, _params(template, file_data(own.json()[0])), session=uuid.uuid4().hex)
    assert _read(answer), f"the control did not read its own upload: {answer[:500]}"

    through = []  # every probe that read or deleted something
    for kind in KINDS:
        path = _probe_path(kind, rows_name, secrets_on_server, public_app, endpoint)
        answer = public_app.call(endpoint, _params(template, file_data(path)), session=uuid.uuid4().hex)
        if _read(answer):
            through.append(f"{kind} read: {answer[:160]}")
        if not os.path.exists(path):
            through.append(f"{kind} deleted the file")
    assert through == [], f"{len(through)} failures over {len(KINDS)} probes: {through}"
    assert public_app.alive()


def test_the_other_visitors_upload_is_still_theirs_to_read(public_app, secrets_on_server):
    """The probes above neither read nor removed visitor 2's uploads: visitor 2 reads one now (then it is deleted)."""
    theirs = secrets_on_server.get("theirs") or []
    assert theirs and all(os.path.exists(p) for p in theirs)
    path = theirs[0]
    answer = public_app.call(
        "score_file", [file_data(path), "", ["minilm-en"]], session=uuid.uuid4().hex, visitor=VISITORS[1]
    )
    assert _read(answer), answer
    assert not os.path.exists(path)  # a public deployment keeps no visitor's file once read
