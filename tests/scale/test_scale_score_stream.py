"""``score`` streams its input: the user-file reader with ``chunk_rows`` scans a table once and reads it back a chunk at
a time with the rows, line numbers, skipped rows and refusals of a whole read; the ``score`` command and the scale
pipeline never build a table of more than one chunk (counted on every UserTable made), the Ray payloads carry where a
chunk lies and not its texts, and the scored numbers equal the whole-table ones bit for bit."""

from __future__ import annotations

import csv
import io
import json
import pickle
import random
import tracemalloc

import numpy as np
import pytest

from mlse import api
from mlse.cli.main import main
from mlse.data import scored_file, user_table
from mlse.data.user_files import read_pairs, read_table
from mlse.errors import DataError
from mlse.models import load_model
from mlse.scale import score as scale_score
from mlse.scale.engine import EngineOptions
from mlse.scale.pairs import PairSource
from mlse.scale.score import score_on_engine


def _rows(n: int, seed: int = 0, bad: bool = True) -> list[list[str]]:
    """Pairs with a score; with ``bad``, some ragged rows, empty sentences and non-numeric scores among them."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        r = rng.random() if bad else 1.0
        if r < 0.04:
            rows.append(["only one field"])
        elif r < 0.07:
            rows.append(["", f"right {i}", "1"])
        elif r < 0.09:
            rows.append([f"left {i}", f"right {i}", "high"])
        else:  # texts repeat across chunks now and then (the plan must see earlier chunks' texts)
            rows.append([f"Satz {rng.randrange(n)} ü", f'sentence, "{i % 50}"', str(i % 6)])
    return rows


def _write(path, rows, fmt: str) -> None:
    if fmt == "tsv":
        ends = ["\r\n" if i % 3 else "\n" + ("\n" if i % 17 == 0 else "") for i in range(len(rows))]  # CRLF, blanks
        body = "".join("\t".join(r) + end for r, end in zip(rows, ends))
        path.write_text("\ufeffsentence1\tsentence2\tscore\n" + body, encoding="utf-8")
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["sentence1", "sentence2", "score"])
        for i, r in enumerate(rows):  # a quoted field spanning two lines now and then
            writer.writerow([r[0] + ("\nsecond line" if i % 13 == 0 else ""), *r[1:]])
        path.write_text(buffer.getvalue(), encoding="utf-8")
    else:
        keys = ["sentence1", "sentence2", "score"]
        lines = [json.dumps(dict(zip(keys, r))) if len(r) == 3 else "not json" for r in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_a_streamed_read_gives_the_rows_and_problems_of_a_whole_read(tmp_path, fmt):
    path = tmp_path / f"pairs.{fmt}"
    _write(path, _rows(400), fmt)
    whole = read_table(path, kind="pairs", bad_rows="skip")
    assert whole.n_skipped > 20  # the file has bad rows of every kind
    for chunk_rows in (1, 7, 64, 10_000):
        streamed = read_table(path, kind="pairs", bad_rows="skip", chunk_rows=chunk_rows)
        assert len(streamed) == len(whole) and streamed.n_chunks == -(-len(whole) // chunk_rows)
        rows, lines = [], []
        for chunk in streamed.chunks():
            assert len(chunk) <= chunk_rows and chunk.columns == whole.columns and chunk.roles == whole.roles
            rows += chunk.rows
            lines += chunk.lines
        assert rows == whole.rows and lines == whole.lines
        assert [str(p) for p in streamed.skipped] == [str(p) for p in whole.skipped]
        assert streamed.n_skipped == whole.n_skipped
    with pytest.raises(DataError) as first:  # bad_rows="raise": the same first refusal, from the scan
        read_table(path, kind="pairs")
    with pytest.raises(DataError) as streamed_first:
        read_table(path, kind="pairs", chunk_rows=5)
    assert str(streamed_first.value) == str(first.value)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("u.tsv", b"sentence1\tsentence2\na\tb\ncaf\xe9\tb\n"),
        ("nul.tsv", b"a\tb\x00\n"),
        ("zip.tsv", b"PK\x03\x04rest"),
        ("array.jsonl", b'[\n{"sentence1": "a", "sentence2": "b"}\n]\n'),
        ("empty.tsv", b""),
        ("header-only.tsv", b"sentence1\tsentence2\n"),
        ("open-quote.csv", b'sentence1,sentence2\n"a,b\nc,d\n'),
        ("no-header.txt", b"one\ttwo\tthree\tfour\n"),
    ],
)
def test_a_file_a_whole_read_refuses_is_refused_by_the_scan_with_the_same_message(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError) as whole:
        read_table(path, kind="pairs")
    with pytest.raises(DataError) as streamed:
        read_table(path, kind="pairs", chunk_rows=2)
    assert str(streamed.value) == str(whole.value)


def _traced_peak(read) -> tuple[int, object]:
    tracemalloc.start()
    try:
        value = read()
        return tracemalloc.get_traced_memory()[1], value
    finally:
        tracemalloc.stop()


def test_reading_a_large_file_holds_one_chunk_flat_in_its_size(tmp_path):
    """Traced Python memory while a file is scanned and read back chunk by chunk: one chunk's rows and the chunk
    starts, about the same for 4,000 and 40,000 rows, and far below what holding the file takes. Chunks of 1,000 rows,
    so one chunk's rows outweigh the chunk starts (at 100 rows a chunk the starts of 400 chunks alone were 1.75x
    the 4,000-row peak: a flaky margin)."""
    peaks = {}
    for n in (4_000, 40_000):
        path = tmp_path / f"pairs-{n}.tsv"
        _write(path, _rows(n, bad=False), "tsv")
        peaks[n], rows = _traced_peak(
            lambda path=path: sum(len(c) for c in read_pairs(path, chunk_rows=1_000).chunks())
        )
        assert rows == n
    whole_peak, whole = _traced_peak(lambda: read_pairs(path))
    assert len(whole) == 40_000 and peaks[40_000] * 20 < whole_peak, (peaks, whole_peak)
    assert peaks[40_000] < 1.5 * peaks[4_000], peaks  # ten times the rows, about the same memory (measured +1.5 %)


@pytest.fixture()
def tables_made(monkeypatch) -> list[int]:
    """The row count of every UserTable made while the test runs."""
    made: list[int] = []
    real = user_table.UserTable.__init__

    def counted(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(len(self.rows))

    monkeypatch.setattr(user_table.UserTable, "__init__", counted)
    return made


def _expected_file(path, model_path, tmp_path, monkeypatch, chunk: int) -> str:
    """The scored CSV the whole-table way: every row read at once, score_pairs, one write (from an empty cache)."""
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-whole"))
    table = read_pairs(path, bad_rows="skip")
    frame = api.score_pairs(table, {str(model_path): load_model(str(model_path))}, chunk=chunk)
    buffer = io.StringIO()
    scored_file.write_scored(table, frame, buffer, tsv=False)
    return buffer.getvalue()


def test_the_score_command_never_holds_more_than_a_chunk(capsys, tmp_path, monkeypatch, tiny_bert, tables_made):
    path, out, chunk = tmp_path / "pairs.tsv", tmp_path / "scored.csv", 40
    _write(path, _rows(1_000), "tsv")
    argv = ["score", str(path), "--models", str(tiny_bert), "--chunk", str(chunk), "--skip-bad-rows"]
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-stdout"))
    code = main(argv)
    scored, err = capsys.readouterr()
    assert code == 0, err
    assert tables_made and max(tables_made) <= chunk  # never a table of more than a chunk of rows
    assert sum(tables_made) == len(read_pairs(path, bad_rows="skip")) > 900  # each row read once
    assert scored == _expected_file(path, tiny_bert, tmp_path, monkeypatch, chunk)
    del tables_made[:]
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-out"))
    stale = tmp_path / ".scored.csv.killed.tmp"  # what a run killed with SIGKILL leaves: the next run drops it
    stale.write_text("sentence1,sentence2\nhalf a ro", encoding="utf-8")
    code = main([*argv, "--out", str(out)])
    assert code == 0 and out.read_text(encoding="utf-8") == scored and max(tables_made) <= chunk
    assert not stale.exists() and not list(tmp_path.glob(".scored.csv.*"))


def test_the_pipeline_reads_chunks_from_the_file_and_equals_score_pairs(tmp_path, monkeypatch, tiny_bert, tables_made):
    """Exact mode on the local engine over a scanned file: the workers' payloads say where a chunk lies (no text of
    the file in them), no table of more than a chunk is made, the numbers equal score_pairs' bit for bit, and a run
    stopped midway resumes from its parts to the same numbers."""
    path, chunk = tmp_path / "pairs.csv", 32
    rows = _rows(300)
    _write(path, rows, "csv")
    payloads = []
    real_run_chunks = scale_score.run_chunks

    def recorded(spec, chunks, *args, **kwargs):
        def tap():
            for index, payload in chunks:
                payloads.append(pickle.dumps(payload))
                yield index, payload

        return real_run_chunks(spec, tap(), *args, **kwargs)

    monkeypatch.setattr(scale_score, "run_chunks", recorded)

    def run(parts, progress=None):
        got = []
        score_on_engine(
            [str(tiny_bert)],
            PairSource(read_pairs(path, bad_rows="skip", chunk_rows=chunk)),
            backend="torch",
            options=EngineOptions("local"),
            job={"input": "pairs.csv"},
            parts=parts,
            progress=progress,
            emit=lambda index, part, columns: got.append((index, len(part.s1), columns)),
        )
        return got

    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-a"))
    got = run(None)
    assert [index for index, _, _ in got] == list(range(len(got))) and max(tables_made) <= chunk
    texts = {t for r in rows for t in r[:2] if t}
    assert payloads and not any(t.encode() in p for p in payloads for t in texts)  # where, not what
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-b"))
    table = read_pairs(path, bad_rows="skip")
    frame = api.score_pairs(table, {str(tiny_bert): load_model(str(tiny_bert))}, chunk=chunk)
    for key in frame.attrs["run"].columns:
        assert np.array_equal(np.concatenate([c[key] for _, _, c in got]), frame[key].to_numpy()), key

    def stop_after_three(done, total):
        if done >= 3 * chunk:
            raise KeyboardInterrupt

    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache-c"))
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "parts", progress=stop_after_three)
    resumed = run(tmp_path / "parts")
    assert len(resumed) == len(got)
    for (_, _, a), (_, _, b) in zip(resumed, got):
        assert all(np.array_equal(a[key], b[key]) for key in b)


def test_the_benchmark_calls_memory_flat_only_within_20_percent_and_1_5_gb():
    from benchmarks.scale_score import flatness, memory_by_n

    def peaks(driver, worker):
        return {"driver_peak_rss_mib": driver, "worker_peak_rss_mib": worker}

    runs = [{"config": "ray-2", "n": n, **peaks(d, w)} for n, d, w in [(100_000, 230, 590), (20_000, 200, 500)]]
    flat = flatness(memory_by_n(runs, ["ray-2"])["ray-2"])
    assert flat["sizes"] == [20_000, 100_000] and flat["worker_growth"] == 0.18
    assert flat["flat_within_20pct"] and flat["worker_under_1_5_gb"]
    grew = flatness({1: peaks(200, 500), 2: peaks(251, 500)})  # the driver grew 25 %, the workers did not
    assert not grew["flat_within_20pct"] and grew["worker_flat_within_20pct"]
    assert not flatness({1: peaks(200, 1500), 2: peaks(200, 1600)})["worker_under_1_5_gb"]
    assert not flatness({1: peaks(200, 500)})["flat_within_20pct"]  # one size proves nothing


def test_the_benchmark_tags_repeats_so_every_text_is_new_to_the_cache():
    from benchmarks.scale_score import tagged

    real = [("ein Hund", "a dog"), ("eine Katze", "a cat"), ("ein Haus", "a house")]
    pairs = tagged(real, 8)
    assert pairs[:3] == real and pairs[3] == ("ein Hund #1", "a dog #1") and pairs[7] == ("eine Katze #2", "a cat #2")
    texts = [t for pair in pairs for t in pair]
    assert len(set(texts)) == len(texts) == 16  # distinct: nothing served by the embedding cache
