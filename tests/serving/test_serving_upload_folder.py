"""mlse.serving.upload_folder: which files a session may read, and the folder's quota, on hand-made folders."""

from __future__ import annotations

import os

import pytest

from mlse.serving.upload_folder import UploadFolder, UploadQuota, UploadRefused, client_key

MB = 1_000_000


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture()
def clock():
    return Clock()


def _folder(tmp_path, clock, **quota) -> UploadFolder:
    settings = dict(total_bytes=10 * MB, client_bytes=4 * MB, max_age_s=3600, grace_s=600) | quota
    return UploadFolder(tmp_path / "uploads", UploadQuota(**settings), clock=clock)


def _upload(folder: UploadFolder, name: str, size: int, client: str = "a") -> str:
    """What the upload route does: admit, write the file (Gradio: a folder per upload), record it."""
    admission = folder.admit(size, client)
    path = folder.root / f"h-{name}" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (folder.clock(), folder.clock()))
    folder.record(admission, [str(path)])
    return str(path)


def test_a_session_reads_its_own_upload_and_no_other_session_or_address_does(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    path = _upload(folder, "mine.tsv", 100, client="a")
    with pytest.raises(UploadRefused, match="not uploaded in this page's session"):
        folder.claim(path, "s1", client="b")  # another address
    assert folder.claim(path, "s1", client="a") == folder.root / "h-mine.tsv" / "mine.tsv"
    assert folder.claim(path, "s1", client="a")  # again, the same session
    with pytest.raises(UploadRefused):
        folder.claim(path, "s2", client="a")  # another session, the same address
    with pytest.raises(UploadRefused, match="session"):
        folder.claim(path, None)


def test_nothing_that_did_not_come_through_the_upload_route_is_readable(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    outside = tmp_path / "secret.tsv"
    outside.write_text("a\tb\n")
    planted = folder.root / "planted" / "secret.tsv"
    planted.parent.mkdir(parents=True)
    planted.write_text("a\tb\n")
    link = folder.root / "link" / "secret.tsv"
    link.parent.mkdir()
    link.symlink_to(outside)
    own = _upload(folder, "mine.tsv", 10)
    for path in (outside, planted, link, folder.root / ".." / "secret.tsv", f"{own}/../../planted/secret.tsv"):
        with pytest.raises(UploadRefused):
            folder.claim(path, "s1", client="a")
    assert outside.exists() and planted.exists() and link.exists()


def test_a_visitor_past_their_share_gets_429_and_a_full_folder_503(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    for i in range(4):
        _upload(folder, f"a{i}", MB, client="a")
    with pytest.raises(UploadRefused) as over_share:
        folder.admit(MB, "a")
    assert over_share.value.status == 429
    for i in range(4):
        _upload(folder, f"b{i}", MB, client="b")
    _upload(folder, "c0", MB, client="c")
    _upload(folder, "c1", MB, client="c")
    with pytest.raises(UploadRefused) as full:  # 10 MB held, none past the grace period: nothing may go
        folder.admit(MB, "d")
    assert full.value.status == 503 and folder.used_bytes() == 10 * MB


def test_room_is_made_from_the_oldest_uploads_past_the_grace_period(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    first = _upload(folder, "old", 4 * MB, client="a")
    clock.now += 700  # past the grace period, within the age
    _upload(folder, "b", 4 * MB, client="b")
    _upload(folder, "c", 2 * MB, client="c")
    _upload(folder, "d", 2 * MB, client="d")  # 12 MB wanted: the old upload goes
    assert not os.path.exists(first) and folder.used_bytes() == 8 * MB


def test_reservations_keep_concurrent_uploads_under_the_cap(tmp_path, clock):
    folder = _folder(tmp_path, clock, client_bytes=10 * MB)
    admissions = [folder.admit(3 * MB, "a") for _ in range(3)]  # nothing written yet: 9 MB reserved
    with pytest.raises(UploadRefused):
        folder.admit(2 * MB, "b")
    folder.cancel(admissions[0])
    folder.admit(2 * MB, "b")


def test_old_files_are_swept_and_a_closed_session_takes_its_uploads_along(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    old = _upload(folder, "old", 10)
    stray = folder.root / "stray.txt"  # anything under the folder ages out, whoever wrote it
    stray.write_text("x")
    os.utime(stray, (clock.now, clock.now))
    clock.now += 3601
    mine = _upload(folder, "mine", 10)
    folder.claim(mine, "s1", client="a")
    assert not os.path.exists(old) and not stray.exists()
    assert folder.end_session("s2") == 0 and os.path.exists(mine)
    assert folder.end_session("s1") == 1 and not os.path.exists(mine)


def test_the_same_bytes_uploaded_again_make_a_new_file_to_claim(tmp_path, clock):
    folder = _folder(tmp_path, clock)
    path = _upload(folder, "same.tsv", 10)
    folder.claim(path, "s1", client="a")
    folder.release(path)
    assert not os.path.exists(path)
    again = _upload(folder, "same.tsv", 10)
    assert again == path and folder.claim(again, "s2", client="a")


def test_the_client_is_the_peer_or_on_a_space_the_proxys_last_hop(monkeypatch):
    headers = {"x-forwarded-for": "203.0.113.9, 198.51.100.4"}
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert client_key(headers.get, "127.0.0.1") == "127.0.0.1"
    monkeypatch.setenv("SPACE_ID", "me/space")
    assert client_key(headers.get, "127.0.0.1") == "198.51.100.4"
    assert client_key({}.get, "127.0.0.1") == "127.0.0.1"
