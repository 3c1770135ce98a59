"""A real two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head and a worker node, one CPU
each): ``score --engine ray --address`` writes the byte-identical file the local engine writes, ``embed`` the same
shards, and ``mine`` the same pairs, with one model-holding actor on each node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlse.cli.main import main
from tests.scale.test_scale_mine import write_bitext

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes.add_node(num_cpus=1)
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def _pairs(data_dir, path: Path, n: int = 120) -> Path:
    base = Path(data_dir) / "wmt_newstest" / "2013"
    de = (base / "newstest2013.de").read_text(encoding="utf-8").split("\n")[:n]
    en = (base / "newstest2013.en").read_text(encoding="utf-8").split("\n")[:n]
    rows = ["sentence1\tsentence2\tscore"] + [f"{d}\t{e}\t{i % 6}" for i, (d, e) in enumerate(zip(de, en))]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_score_embed_and_mine_on_two_nodes_equal_the_local_engine(cluster, tmp_path, tiny_bert, data_dir):
    pairs = _pairs(data_dir, tmp_path / "pairs.tsv")
    ray_args = ["--engine", "ray", "--address", cluster.address, "--workers", "2"]
    common = ["score", str(pairs), "--models", str(tiny_bert), "--chunk", "32"]
    assert main([*common, "--out", str(tmp_path / "ray.csv"), *ray_args]) == 0
    assert main([*common, "--out", str(tmp_path / "local.csv"), "--engine", "local"]) == 0
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    local = (tmp_path / "local.csv").read_bytes()
    assert (tmp_path / "ray.csv").read_bytes() == local and local.count(b"\n") == 121
    assert not (tmp_path / "ray.csv.parts").exists()

    src, tgt = write_bitext(data_dir, tmp_path)
    for engine, extra in (("ray", ray_args), ("local", ["--engine", "local"])):
        argv = [
            "embed",
            str(src),
            "--model",
            str(tiny_bert),
            "--out",
            str(tmp_path / f"emb-{engine}"),
            "--shard-rows",
            "16",
            "--shard-format",
            "npy",
        ]
        assert main([*argv, *extra]) == 0
        assert (
            main(
                [
                    "mine",
                    str(src),
                    str(tgt),
                    "--model",
                    str(tiny_bert),
                    "--out",
                    str(tmp_path / f"{engine}.tsv"),
                    *extra,
                ]
            )
            == 0
        )
    shards = json.loads((tmp_path / "emb-local" / "manifest.json").read_text())["shards"]
    assert json.loads((tmp_path / "emb-ray" / "manifest.json").read_text())["shards"] == shards
    for entry in shards.values():
        assert (tmp_path / "emb-ray" / entry["file"]).read_bytes() == (
            tmp_path / "emb-local" / entry["file"]
        ).read_bytes()
    mined = (tmp_path / "local.tsv").read_text(encoding="utf-8")
    assert (tmp_path / "ray.tsv").read_text(encoding="utf-8") == mined and mined.count("\n") >= 20


def test_a_worker_killed_mid_shard_is_retried_and_its_shard_written_once(
    cluster, tmp_path, tiny_bert, data_dir, monkeypatch
):
    import os
    import signal
    import threading
    import time

    from mlse.scale.embed import embed_corpus
    from mlse.scale.engine import EngineOptions
    from mlse.scale.shards import ShardFolder
    from mlse.scale.work import TRACE_ENV

    trace = tmp_path / "trace"
    trace.mkdir()
    monkeypatch.setenv(TRACE_ENV, str(trace))
    ray.shutdown()  # join again, so that the workers get the trace folder in their environment
    target, killed, stop = 3, [], threading.Event()

    def kill_target() -> None:  # SIGKILL the worker that starts shard `target`, while it encodes it
        while not stop.is_set() and not killed:
            for started in trace.glob(f"start-{target}-*"):
                pid = int(started.name.rsplit("-", 1)[1])
                if not (trace / f"end-{target}-{pid}").exists():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.005)

    written = []
    write = ShardFolder.write
    monkeypatch.setattr(ShardFolder, "write", lambda self, i, *a, **k: (written.append(i), write(self, i, *a, **k)))
    corpus = tmp_path / "c.txt"
    lines = (Path(data_dir) / "wmt_newstest" / "2013" / "newstest2013.de").read_text(encoding="utf-8").split("\n")
    corpus.write_text("\n".join(lines[:800]) + "\n", encoding="utf-8")
    watcher = threading.Thread(target=kill_target, daemon=True)
    watcher.start()
    try:
        options = EngineOptions("ray", address=cluster.address, workers=2)
        manifest = embed_corpus(corpus, str(tiny_bert), tmp_path / "ray", shard_rows=100, options=options)
    finally:
        stop.set()
        watcher.join()
        ray.shutdown()
    assert killed, "the watcher never saw the shard start"
    assert not (trace / f"end-{target}-{killed[0]}").exists(), "killed after it finished the shard: nothing tested"
    runs = sorted(p.name for p in trace.glob(f"*-{target}-*"))
    assert len([r for r in runs if r.startswith("start-")]) >= 2 and len([r for r in runs if r.startswith("end-")]) == 1
    assert sorted(written) == list(range(8))  # every shard written once: the retried one neither lost nor twice
    local = embed_corpus(corpus, str(tiny_bert), tmp_path / "local", shard_rows=100, options=EngineOptions("local"))
    assert manifest["complete"] and manifest["shards"] == local["shards"]
    for entry in local["shards"].values():
        assert (tmp_path / "ray" / entry["file"]).read_bytes() == (tmp_path / "local" / entry["file"]).read_bytes()
