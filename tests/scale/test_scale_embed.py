"""``python -m mlse embed``: shards and manifest, bad rows reported, a folder of another job refused, a job killed with
SIGKILL midway (on the local engine, and on a local Ray with two actors) resumed into exactly the output of an
uninterrupted run without redoing a finished shard, an --address where nothing answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mlse.cli.main import main
from mlse.scale.embed import embed_corpus, load_embeddings
from tests.paths import REPO_ROOT as REPO


def _corpus(data_dir, path: Path, n: int) -> Path:
    lines = (Path(data_dir) / "wmt_newstest" / "2013" / "newstest2013.de").read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    return path


def test_embed_writes_shards_with_ids_and_a_manifest(tmp_path, tiny_bert, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"Hallo Welt\n\nGuten Morgen\n\xff bad\nDanke\n")
    code = main(
        [
            "embed",
            str(corpus),
            "--model",
            str(tiny_bert),
            "--out",
            str(tmp_path / "out"),
            "--shard-rows",
            "2",
            "--dtype",
            "fp16",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "c.txt:2: empty line" in err and "c.txt:4: not valid UTF-8" in err and "2 bad row(s)" in err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["complete"] and manifest["rows_total"] == 3 and manifest["bad_rows"] == 2
    assert [s["rows"] for s in manifest["shards"].values()] == [2, 1]
    assert manifest["model_identity"].startswith(str(tiny_bert)) and manifest["backend"] == "torch"
    assert manifest["dtype"] == "fp16" and manifest["shards"]["0"]["file"].endswith(".parquet")
    ids, emb = load_embeddings(tmp_path / "out")
    assert list(ids) == [0, 1, 2] and emb.shape[0] == 3
    assert np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-2)


def test_an_output_folder_of_another_job_is_refused(tmp_path, tiny_bert, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("eins\nzwei\n", encoding="utf-8")
    b.write_text("drei\n", encoding="utf-8")
    assert main(["embed", str(a), "--model", str(tiny_bert), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["embed", str(b), "--model", str(tiny_bert), "--out", str(tmp_path / "out"), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "another job" in err and len(err.splitlines()) == 1
    assert main(["embed", str(a), "--model", str(tiny_bert), "--out", str(tmp_path / "out")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_sigkill_midway_then_resume_gives_the_uninterrupted_output(tmp_path, tiny_bert, data_dir):
    corpus = _corpus(data_dir, tmp_path / "c.txt", 600)
    out = tmp_path / "killed"
    argv = [
        sys.executable,
        "-m",
        "mlse",
        "embed",
        str(corpus),
        "--model",
        str(tiny_bert),
        "--out",
        str(out),
        "--shard-rows",
        "20",
        "--shard-format",
        "npy",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    manifest = out / "manifest.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if manifest.is_file() and len(json.loads(manifest.read_text()).get("shards", {})) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = json.loads(manifest.read_text())
    assert not state["complete"] and 2 <= len(state["shards"]) < 30, "killed too late to test a resume"
    resumed = subprocess.run([*argv, "--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    whole = embed_corpus(corpus, str(tiny_bert), tmp_path / "whole", shard_rows=20, shard_format="npy")
    done = json.loads(manifest.read_text())
    assert done["complete"] and done["shards"] == whole["shards"] and done["job_id"] == whole["job_id"]
    for entry in whole["shards"].values():
        assert (out / entry["file"]).read_bytes() == (tmp_path / "whole" / entry["file"]).read_bytes()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def _session_members(session: int) -> list[int]:
    """Processes of the session ``session`` (a killed Ray driver's helpers live on in it for a while)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # after the ")": state, ppid, pgrp, session
            members.append(int(stat.parent.name))
    return members


def _end_session(session: int) -> None:
    for pid in _session_members(session):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_ray_run_killed_with_sigkill_resumes_to_the_uninterrupted_output(tmp_path, tiny_bert, data_dir):
    pytest.importorskip("ray")
    corpus = _corpus(data_dir, tmp_path / "c.txt", 600)
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "mlse", "embed", str(corpus), "--model", str(tiny_bert), "--out", str(out)]
    argv += ["--shard-rows", "50", "--shard-format", "npy", "--engine", "ray", "--workers", "2"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(tmp_path / "killed.err", "wb") as err:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    manifest = out / "manifest.json"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if manifest.is_file() and len(json.loads(manifest.read_text()).get("shards", {})) >= 2:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the driver; its actors lose it mid-shard
        proc.wait()
    finally:
        _end_session(proc.pid)  # Ray's helpers of the killed driver
    state = json.loads(manifest.read_text())
    assert not state["complete"] and 2 <= len(state["shards"]) < 12, "killed too late to test a resume"
    assert state["engine"] == "ray" and state["workers"] and state["workers"][0]["peak_rss_mib"] > 0
    finished = {e["file"]: (out / e["file"]).stat() for e in state["shards"].values()}
    resumed = subprocess.Popen(
        [*argv, "--resume"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = resumed.communicate(timeout=600)
    finally:
        _end_session(resumed.pid)
    assert resumed.returncode == 0, stderr
    assert f"{len(finished)} of 12 shards already done" in stderr
    for name, before in finished.items():  # not written again
        after = (out / name).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
    whole = embed_corpus(corpus, str(tiny_bert), tmp_path / "whole", shard_rows=50, shard_format="npy")
    done = json.loads(manifest.read_text())
    assert done["complete"] and done["shards"] == whole["shards"] and done["job_id"] == whole["job_id"]
    for entry in whole["shards"].values():
        assert (out / entry["file"]).read_bytes() == (tmp_path / "whole" / entry["file"]).read_bytes()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_an_address_that_does_not_answer_is_one_line_after_one_bounded_probe(tmp_path, tiny_bert, capsys, monkeypatch):
    """Nothing listens at --address: one TCP probe bounded by CONNECT_TIMEOUT_S (under ten seconds), Ray is never
    asked to join, and the answer is one line (counted calls, not a clock)."""
    import ray

    from mlse.scale import cluster

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    probes, real_connect = [], socket.create_connection

    def counted_connect(address, timeout=None, *args, **kwargs):
        probes.append((address, timeout))
        return real_connect(address, timeout, *args, **kwargs)

    monkeypatch.setattr(cluster.socket, "create_connection", counted_connect)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init was called for an address that is dead"))
    corpus = tmp_path / "c.txt"
    corpus.write_text("eins\n", encoding="utf-8")
    code = main(
        [
            "embed",
            str(corpus),
            "--model",
            str(tiny_bert),
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and probes == [(("127.0.0.1", port), cluster.CONNECT_TIMEOUT_S)]
    assert cluster.CONNECT_TIMEOUT_S < 10  # the bound the one line is promised within
    assert err[-1].startswith(f"error: --address 127.0.0.1:{port}: no Ray cluster answers there")


@pytest.mark.parametrize("bad", ["nonsense:port", "host:"])
def test_a_malformed_address_is_refused(bad):
    from mlse.errors import MlseError
    from mlse.scale.cluster import probe

    with pytest.raises(MlseError, match="HOST:PORT"):
        probe(bad)
