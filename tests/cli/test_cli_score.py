"""``python -m mlse score FILE``: the scored file equals the library's numbers, stdout mode, bad rows, user mistakes,
the embedding cache on a rerun, Ctrl-C, and the benchmark's quick mode."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlse.cli import score as cli_score
from mlse.cli.main import main
from mlse.data import scored_file
from mlse.data.user_files import read_pairs
from mlse.encoders.progress import show_bar
from mlse.models import load_model
from tests.paths import REPO_ROOT as REPO

EXAMPLE = REPO / "assets" / "examples" / "my_pairs.tsv"
ENCODED = re.compile(r"encoded ([\d,]+) texts, served ([\d,]+) from the embedding cache")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["score", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code: int, err: str, *fragments: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _table(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


def _encoded(err: str) -> list[tuple[int, int]]:
    return [(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b in ENCODED.findall(err)]


@pytest.fixture()
def pairs_file(tmp_path) -> Path:
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "sentence1\tsentence2\tscore\tnote\n"
        "A man plays a flute.\tA man is playing the flute.\t4.6\tfirst\n"
        "A dog runs.\tThe market fell.\t0.2\t\n"
        "Kids play football.\tChildren are playing soccer.\t4.1\tx\n"
        "She reads a book.\tA woman is reading.\t3.5\ty\n"
        "The sun is hot.\tIt is cold at night.\t1.0\tz\n",
        encoding="utf-8",
    )
    return path


def test_scored_csv_equals_similarity_and_a_rerun_encodes_nothing(capsys, tmp_path):
    out = tmp_path / "scored.csv"
    argv = [str(EXAMPLE), "--models", "minilm-en", "--out", str(out), "--chunk", "2"]
    code, stdout, err = _run(capsys, *argv)
    assert code == 0, err
    assert stdout == ""  # the table went to --out; progress and the summary to stderr
    table = read_pairs(EXAMPLE)
    rows = _table(out.read_text(encoding="utf-8"))
    assert list(rows[0]) == [*table.columns, "minilm-en cosine", "minilm-en 0-5"]
    assert [[r[c] for c in table.columns] for r in rows] == table.rows  # the input's cells come back unchanged
    cos, cal = load_model("minilm-en").similarity(table.role("sentence1"), table.role("sentence2"))
    np.testing.assert_allclose([float(r["minilm-en cosine"]) for r in rows], cos, atol=2e-6)
    np.testing.assert_allclose([float(r["minilm-en 0-5"]) for r in rows], cal, atol=2e-6)
    assert "minilm-en: mean cosine" in err and "Pearson" in err and "Spearman" in err
    unique = len(set(table.role("sentence1")) | set(table.role("sentence2")))
    assert _encoded(err)[0][0] == unique  # each distinct text encoded once, whatever chunk it recurs in
    assert f"wrote {out}: {len(table)} rows" in err

    first = out.read_bytes()
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    encoded, served = _encoded(err)[0]
    assert encoded == 0 and served > 0  # every text came from the embedding cache
    assert out.read_bytes() == first


def test_stdout_mode_tsv_out_and_extra_columns(capsys, tmp_path, tiny_bert, pairs_file):
    code, stdout, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert))
    assert code == 0, err
    rows = _table(stdout)
    name = f"{tiny_bert} cosine"
    assert list(rows[0]) == ["sentence1", "sentence2", "score", "note", name]  # uncalibrated: no 0-5 column
    assert len(rows) == 5 and rows[1]["note"] == "" and rows[2]["note"] == "x"
    assert all(-1.0 <= float(r[name]) <= 1.0 for r in rows)
    assert "Traceback" not in err and "wrote the scores to stdout" in err

    tsv = tmp_path / "scored.tsv"
    code, stdout, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--out", str(tsv))
    assert code == 0, err
    assert stdout == ""
    rows_tsv = _table(tsv.read_text(encoding="utf-8"), delimiter="\t")
    assert [r[name] for r in rows_tsv] == [r[name] for r in rows]


def test_format_overrides_the_suffix(capsys, tmp_path, tiny_bert):
    rows = tmp_path / "rows.txt"
    rows.write_text(
        '{"sentence1": "A cat sleeps.", "sentence2": "Un chat dort.", "id": 7}\n'
        '{"sentence1": "It rains.", "sentence2": "Es regnet.", "id": 8}\n',
        encoding="utf-8",
    )
    code, stdout, err = _run(capsys, str(rows), "--models", str(tiny_bert), "--format", "jsonl")
    assert code == 0, err
    scored = _table(stdout)
    assert [(r["sentence1"], r["id"]) for r in scored] == [("A cat sleeps.", "7"), ("It rains.", "8")]
    assert "Pearson" not in err  # no score column: no correlation in the summary


def test_skip_bad_rows_lists_each_skipped_row(capsys, tmp_path, tiny_bert):
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence1\tsentence2\tscore\na\tb\t1\nc\t\t2\nd\te\thigh\nf\tg\t3\nonly one\n", encoding="utf-8")
    code, _, err = _run(capsys, str(bad), "--models", str(tiny_bert))
    _one_error_line(code, err, f"{bad}:3", "empty sentence")  # without the flag: the first bad row is the error

    out = tmp_path / "scored.csv"
    code, _, err = _run(capsys, str(bad), "--models", str(tiny_bert), "--out", str(out), "--skip-bad-rows")
    assert code == 0, err
    skipped = [line for line in err.splitlines() if line.startswith("skipped ")]
    assert skipped[:2] == [
        f"skipped {bad}:3: column 'sentence2': empty sentence",
        f"skipped {bad}:4: column 'score': expected a number, got 'high'",
    ]
    assert len(skipped) == 3 and skipped[2].startswith(f"skipped {bad}:6: column 'sentence2': missing")
    assert "the row has 1 field(s), expected 3" in skipped[2]
    assert "3 bad row(s) skipped, 2 kept" in err
    assert [r["sentence1"] for r in _table(out.read_text(encoding="utf-8"))] == ["a", "f"]


def test_gold_range_refuses_scores_outside_it(capsys, tiny_bert, pairs_file):
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--gold-range", "0:4")
    _one_error_line(code, err, f"{pairs_file}:2", "4.6", "[0, 4]")
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--gold-range", "5:0")
    _one_error_line(code, err, "5:0", "LOW:HIGH")


@pytest.mark.parametrize(
    ("content", "extra", "fragments"),
    [
        (None, [], ["nope.tsv", "file not found"]),
        ("a\tb\t1\tx\n", [], [":1:", "4 column(s)"]),
        (b"caf\xe9\tb\n", [], [":1:", "not valid UTF-8"]),
        ("a\tb\t1\n", ["--models", "nope"], ["unknown model 'nope'"]),
        ("a\tb\t1\n", ["--chunk", "0"], ["--chunk"]),
        ("a\tb\t1\n", ["--models", ","], ["--models"]),
    ],
    ids=["missing", "four-columns", "not-utf8", "unknown-model", "chunk", "no-models"],
)
def test_user_mistakes_exit_2_with_one_line(capsys, tmp_path, tiny_bert, content, extra, fragments):
    path = tmp_path / "nope.tsv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    models = [] if "--models" in extra else ["--models", str(tiny_bert)]
    code, _, err = _run(capsys, str(path), *models, *extra)
    _one_error_line(code, err, *fragments)


def test_out_may_not_be_a_folder_or_the_input(capsys, tmp_path, tiny_bert, pairs_file):
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--out", str(tmp_path))
    _one_error_line(code, err, "is a folder")
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--out", str(pairs_file))
    _one_error_line(code, err, "is the input file")
    blocked = pairs_file / "scored.csv"  # its "folder" is a file: refused before anything is read or loaded
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--out", str(blocked))
    _one_error_line(code, err, f"--out {blocked}: cannot write it", f"{pairs_file} is a file, not a folder")


@pytest.mark.parametrize("where", ["parent-is-a-file", "grandparent-is-a-file", "not-writable"])
def test_an_out_that_cannot_be_written_fails_at_once(capsys, monkeypatch, tmp_path, tiny_bert, pairs_file, where):
    """One line naming the path, before the file is read, any model loads or anything is scored (the order of events
    says "at once", not a clock)."""
    touched: list[str] = []  # what the command did before refusing: nothing but the check of --out

    def never(what):
        def called(*args, **kwargs):
            touched.append(what)
            raise AssertionError(f"{what} before --out was checked")

        return called

    monkeypatch.setattr(cli_score, "load_model", never("a model was loaded"))
    monkeypatch.setattr(cli_score, "read_pairs", never("the pairs file was read"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    out = {
        "parent-is-a-file": blocker / "scored.csv",
        "grandparent-is-a-file": blocker / "sub" / "dir" / "scored.csv",
        "not-writable": tmp_path / "locked" / "scored.csv",
    }[where]
    if where == "not-writable":
        out.parent.mkdir()
        out.parent.chmod(0o555)
        if os.access(out.parent, os.W_OK):  # root writes anyway: make the file system say no
            real_mkstemp = cli_score.tempfile.mkstemp

            def refuse(*args, dir=None, **kwargs):  # noqa: A002 - tempfile's name
                if Path(dir) == out.parent:
                    touched.append("write probed")
                    raise PermissionError(13, "Permission denied")
                return real_mkstemp(*args, dir=dir, **kwargs)

            monkeypatch.setattr(cli_score.tempfile, "mkstemp", refuse)
    probed_by_hand = where == "not-writable" and os.access(out.parent, os.W_OK)
    try:
        code, stdout, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--out", str(out))
    finally:
        if where == "not-writable":
            out.parent.chmod(0o755)  # so that pytest can remove it
    assert touched == (["write probed"] if probed_by_hand else []) and stdout == ""
    reason = "Permission denied" if where == "not-writable" else f"{blocker} is a file, not a folder"
    _one_error_line(code, err, f"--out {out}: cannot write it", reason)
    assert not out.exists() and not list(tmp_path.glob("**/.scored.csv.*"))


def test_a_50_mb_style_field_is_scored_and_written_back_whole(capsys, tmp_path, tiny_bert):
    """A field of megabytes: read (TSV and CSV), cut before tokenising, and written back byte for byte in slices."""
    long = ('word, "quoted" and more ' * 200_000).strip()  # 4.8 MB: commas and quotes, so CSV quotes it
    tsv = tmp_path / "long.tsv"
    tsv.write_text(f"sentence1\tsentence2\n{long}\tshort\na\tb\n", encoding="utf-8")
    for out in (tmp_path / "scored.csv", tmp_path / "scored.tsv"):
        code, _, err = _run(capsys, str(tsv), "--models", str(tiny_bert), "--out", str(out))
        assert code == 0, err
        assert read_pairs(out).role("sentence1") == [long, "a"]  # every cell back intact, the CSV quoting right
        assert len(read_pairs(out).columns) == 3


@pytest.mark.parametrize("tsv", [False, True], ids=["csv", "tsv"])
def test_a_row_written_in_slices_equals_the_csv_module(monkeypatch, tsv):
    monkeypatch.setattr(scored_file, "BIG_CELL", 3)
    cells = [
        ["plain text here", "x"],
        ['a "quoted" word, with a comma', "y\r\nz"],
        ["line\nbreak\rcarriage\ttab", ""],
        ["ab\r\ncd\r\n\r\nef", " padded "],
        [""],
    ]
    for row in cells:
        theirs = io.StringIO()
        if tsv:
            theirs.write("\t".join(scored_file.tsv_clean(c) for c in row) + "\n")
        else:
            csv.writer(theirs, lineterminator="\n").writerow(row)
        ours = io.StringIO()
        scored_file._write_big_row(ours, row, tsv)
        assert ours.getvalue() == theirs.getvalue(), row


def test_no_progress_bars_when_stderr_is_not_a_terminal(tmp_path, tiny_bert):
    """sentence-transformers draws ``Batches:`` bars with carriage returns for 1,000 texts or more; on a pipe or in a
    log there are none (one chunk of 512 pairs: 1,024 distinct texts in one encode call)."""
    pairs = tmp_path / "many.tsv"
    pairs.write_text(
        "".join(f"sentence number {i} is here\tand its partner {i} there\n" for i in range(520)), encoding="utf-8"
    )
    out = tmp_path / "scored.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "mlse", "score", str(pairs), "--models", str(tiny_bert), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "Batches" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr[-2000:]
    assert "encoded 1,040 texts" in proc.stderr


def test_show_bar_only_on_a_terminal(monkeypatch):
    class Stream(io.StringIO):
        def __init__(self, tty: bool):
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setattr(sys, "stderr", Stream(True))
    assert show_bar(None, 1000) and show_bar(True, 1) and not show_bar(None, 999) and not show_bar(False, 5000)
    monkeypatch.setattr(sys, "stderr", Stream(False))
    assert not show_bar(None, 5000) and not show_bar(True, 5000)


class _InterruptAfter:
    """A model that raises KeyboardInterrupt (Ctrl-C) on its ``calls``-th encode."""

    def __init__(self, inner, calls: int):
        self.inner, self.calls = inner, calls

    def encode(self, texts, **kwargs):
        self.calls -= 1
        if self.calls == 0:
            raise KeyboardInterrupt
        return self.inner.encode(texts, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


def test_ctrl_c_writes_nothing_and_the_rerun_reuses_the_finished_chunks(
    capsys, monkeypatch, tmp_path, tiny_bert, pairs_file
):
    out = tmp_path / "scored.csv"
    out.write_text("an older result\n", encoding="utf-8")
    load = cli_score.load_model
    monkeypatch.setattr(cli_score, "load_model", lambda name, **kw: _InterruptAfter(load(name, **kw), calls=3))
    argv = [str(pairs_file), "--models", str(tiny_bert), "--out", str(out), "--chunk", "2"]
    code, stdout, err = _run(capsys, *argv)
    assert code == 130
    assert (
        "interrupted after 4 of 5 rows; run the same command again: the embedding cache already holds the "
        "finished rows" in err
    )
    assert "Traceback" not in err and stdout == ""
    assert out.read_text(encoding="utf-8") == "an older result\n"  # nothing partial replaced it
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".scored.csv")]  # no temporary file left

    monkeypatch.setattr(cli_score, "load_model", load)
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    encoded, served = _encoded(err)[0]
    assert served >= 8 and encoded == 2  # the two finished chunks' 8 texts came from the cache; the last row's 2 not
    assert len(_table(out.read_text(encoding="utf-8"))) == 5


def test_progress_lines_carry_rows_rate_and_eta(capsys, monkeypatch, tiny_bert, pairs_file):
    monkeypatch.setattr(cli_score, "PROGRESS_EVERY_S", 0.0)
    code, _, err = _run(capsys, str(pairs_file), "--models", str(tiny_bert), "--chunk", "2")
    assert code == 0, err
    progress = [line for line in err.splitlines() if "rows/s, ETA" in line]
    # the last chunk: the summary instead
    assert [line.split(" rows")[0] for line in progress] == ["scoring: 2 / 5", "scoring: 4 / 5"]
    assert all(re.fullmatch(r"scoring: \d / 5 rows \(\d+%\), [\d,.]+ rows/s, ETA \d+s", x) for x in progress), progress


@pytest.mark.slow  # three CLI processes each load torch and MiniLM: about a minute on two busy cores
def test_the_benchmark_quick_mode_runs(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.score_file", "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / "score-file.json").read_text(encoding="utf-8"))
    assert result["quick"] is True and result["command"].startswith("python -m benchmarks.score_file")
    for key in ("cold", "warm", "memory"):
        assert result[key]["pairs"] > 0 and result[key]["seconds"] > 0, result[key]
    assert result["warm"]["encoded"] == 0 and result["cold"]["encoded"] > 0
    assert result["memory"]["peak_rss_mb"] > 0 and result["warm"]["same_output"] is True
    assert result["app"]["cold_s"] > 0 and result["app"]["cached_s"] > 0
    assert set(result["targets"]) == {"cold_pairs_per_s", "warm_speedup", "peak_rss_mb", "app_cold_s", "app_cached_s"}
    assert (out / "score-file.md").is_file()
