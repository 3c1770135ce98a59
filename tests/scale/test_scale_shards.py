"""mlse.scale.shards and mlse.scale.corpus: chunk planning, atomic shards in both formats, the manifest's job check and
resume, and the corpus reader's bad rows (invalid UTF-8, empty lines, ragged rows, null Parquet cells)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.scale.corpus import read_span, scan_corpus
from mlse.scale.shards import ShardFolder, job_id, plan_chunks, read_shard_file


def test_plan_chunks_cover_the_rows_once():
    assert plan_chunks(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert plan_chunks(0, 3) == []
    with pytest.raises(MlseError):
        plan_chunks(5, 0)


@pytest.mark.parametrize("fmt", ["parquet", "npy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_shards_round_trip(tmp_path, fmt, dtype):
    folder = ShardFolder(tmp_path / "out", {"a": 1}, shard_format=fmt)
    folder.open(plan_chunks(5, 3))
    emb = np.arange(15, dtype=np.float32).reshape(5, 3).astype(dtype)
    folder.write(0, {"id": np.arange(3), "embedding": emb[:3]})
    folder.write(1, {"id": np.arange(3, 5), "embedding": emb[3:]})
    manifest = folder.finish()
    assert manifest["complete"] and manifest["rows_total"] == 5 and manifest["progress"]["rows_done"] == 5
    back = read_shard_file(tmp_path / "out" / manifest["shards"]["1"]["file"])
    assert back["embedding"].dtype == dtype and np.array_equal(back["embedding"], emb[3:])
    assert list(back["id"]) == [3, 4]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_another_jobs_folder_is_refused_and_the_same_job_resumes_only_when_asked(tmp_path):
    first = ShardFolder(tmp_path, {"input": "a"})
    first.open(plan_chunks(4, 2))
    first.write(0, {"id": np.arange(2)})
    with pytest.raises(MlseError, match="another job"):
        ShardFolder(tmp_path, {"input": "b"}, resume=True).open(plan_chunks(4, 2))
    with pytest.raises(MlseError, match="--resume"):
        ShardFolder(tmp_path, {"input": "a"}).open(plan_chunks(4, 2))
    again = ShardFolder(tmp_path, {"input": "a"}, resume=True)
    again.open(plan_chunks(4, 2))
    assert again.done(0) and not again.done(1) and again.rows_done == 2
    with pytest.raises(MlseError, match="missing"):
        again.finish()
    assert json.loads((tmp_path / "manifest.json").read_text())["job_id"] == job_id({"input": "a"})


def test_a_resume_removes_the_temporary_files_a_kill_left(tmp_path):
    first = ShardFolder(tmp_path, {"input": "a"})
    first.open(plan_chunks(4, 2))
    first.write(0, {"id": np.arange(2)})
    for name in (".shard-00001.npz.x1.tmp", ".manifest.json.x2.tmp"):  # what atomic writes leave when killed
        (tmp_path / name).write_bytes(b"half")
    ShardFolder(tmp_path, {"input": "a"}, resume=True).open(plan_chunks(4, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "shard-00000.npz"]


def test_a_folder_of_stray_shards_is_refused(tmp_path):
    (tmp_path / "shard-00000.npz").write_bytes(b"x")
    with pytest.raises(MlseError, match="without a manifest"):
        ShardFolder(tmp_path, {}).open([(0, 1)])


def _whole(path):
    """(every kept text of ``path``, read back as one shard; the scan with its bad rows)."""
    scan = scan_corpus(path, shard_rows=1 << 62)
    return (scan.shard_texts(0) if scan.rows else []), scan


def test_txt_corpus_counts_bad_lines_with_file_and_line(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"one\r\n\n\xff\xfe two\n  \nthree\tx\nfour\xc2\x85five\n")
    texts, corpus = _whole(path)
    assert texts == ["one", "three\tx", "four\u0085five"]
    assert corpus.n_bad == 3
    assert corpus.bad == ["c.txt:2: empty line", "c.txt:3: not valid UTF-8 (byte 1)", "c.txt:4: empty line"]


def test_table_corpus_skips_ragged_rows_through_the_reader(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("sentence\tlang\nHallo\tde\nzu\tviele\tfelder\nHello\ten\n", encoding="utf-8")
    texts, corpus = _whole(path)
    assert texts == ["Hallo", "Hello"] and corpus.n_bad == 1 and "c.tsv:3" in corpus.bad[0]


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
@pytest.mark.parametrize("shard_rows", [1, 2, 5])
def test_table_shards_are_read_from_the_file_not_held(tmp_path, fmt, shard_rows):
    texts = ["Hallo", "Hello, world", 'She said "no"', "Bonjour", "Hola", "Ciao", "Hej"]
    if fmt == "jsonl":
        body = "".join(json.dumps({"sentence": t, "lang": "xx"}) + "\n" for t in texts[:3]) + "[1, 2]\n"
        body += "".join(json.dumps({"sentence": t, "lang": "xx"}) + "\n" for t in texts[3:])
    else:
        sep = "\t" if fmt == "tsv" else ","
        quoted = [t if fmt == "tsv" else '"' + t.replace('"', '""') + '"' for t in texts]
        rows = [f"{q}{sep}xx" for q in quoted]
        body = f"sentence{sep}lang\n" + "\n".join(rows[:3] + [f"a{sep}b{sep}c"] + rows[3:]) + "\n"
    path = tmp_path / f"c.{fmt}"
    path.write_text(body, encoding="utf-8")
    scan = scan_corpus(path, shard_rows=shard_rows)
    bad_line = 4 if fmt == "jsonl" else 5  # after the header line
    assert scan.rows == len(texts) and scan.n_bad == 1 and scan.bad[0].startswith(f"c.{fmt}:{bad_line}:")
    shards = [scan.locator(i) for i in range(-(-scan.rows // shard_rows))]
    assert all(not any(t in repr(loc) for t in texts) for loc in shards)  # where the shard lies, not its texts
    assert [t for loc in shards for t in read_span(loc)] == texts == _whole(path)[0]


def test_parquet_corpus_counts_null_and_empty_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["a", None, "", "b"]}), path)
    texts, corpus = _whole(path)
    assert texts == ["a", "b"] and corpus.n_bad == 2 and corpus.bad[0].startswith("c.parquet:row 2")


@pytest.mark.parametrize("shard_rows", [1, 2, 3, 100])
def test_txt_shards_read_back_the_texts_of_a_whole_read(tmp_path, shard_rows):
    path = tmp_path / "c.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\n\n\xff bad\ntwo\n  \nthree\xc2\x85x\nfour\nfive")  # BOM, no final break
    scan = scan_corpus(path, shard_rows=shard_rows)
    assert scan.rows == 5 and scan.n_bad == 3 and len(scan.spans) == -(-5 // shard_rows)
    shards = [read_span(scan.locator(i)) for i in range(len(scan.spans))]
    assert [t for s in shards for t in s] == ["one", "two", "three\u0085x", "four", "five"]
    assert all(len(s) == shard_rows for s in shards[:-1])
    assert scan.sha256 == __import__("hashlib").sha256(path.read_bytes()).hexdigest()


def test_parquet_shards_span_row_groups(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    values = [f"t{i}" if i % 4 else None for i in range(40)]  # every fourth row null
    pq.write_table(pa.table({"sentence": values}), path, row_group_size=7)
    scan = scan_corpus(path, shard_rows=8)
    kept = [v for v in values if v]
    assert scan.rows == len(kept) == 30 and scan.n_bad == 10 and scan.column == "sentence"
    assert [t for i in range(len(scan.spans)) for t in scan.shard_texts(i)] == kept
    assert [len(scan.shard_texts(i)) for i in range(len(scan.spans))] == [8, 8, 8, 6]
