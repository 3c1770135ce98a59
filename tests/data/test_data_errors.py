"""User-facing data problems become DataError messages that name the file (and line) and what is valid."""

# ruff: noqa: F811  (pytest fixtures imported from tests/conftest_data.py are re-bound as arguments)

from __future__ import annotations

import pytest

from mlse.data import (
    ParallelCorpus,
    ScoredPairs,
    load_flores,
    load_parallel,
    load_parallel_tsv,
    load_scored_tsv,
    load_sts,
    load_tatoeba,
    load_wmt,
    read_aligned,
    read_lines,
    resolve_data_dir,
)
from mlse.data import paths as paths_module
from mlse.errors import DataError
from tests.conftest_data import data_dir  # noqa: F401  (fixture; its use as an argument is F811 below)

# --- user TSV files ---------------------------------------------------------------------------------


def _write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_scored_tsv_valid_with_header_and_blank_lines(tmp_path):
    p = _write(tmp_path, "pairs.tsv", "s1\ts2\tscore\na\tb\t0.5\n\nc\td\t-3e2\r\n")
    pairs = load_scored_tsv(p)
    assert pairs.s1 == ["a", "c"] and pairs.s2 == ["b", "d"]
    assert pairs.scores.tolist() == [0.5, -300.0]  # any scale is kept as given
    assert pairs.name == "pairs" and pairs.sources == [p]
    assert load_scored_tsv(p, name="mine").name == "mine"


def test_scored_tsv_wrong_field_count_names_file_and_line(tmp_path):
    p = _write(tmp_path, "bad.tsv", "a\tb\t1\nc\td\t2\nonly\ttwo\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: column 3: missing.*the row has 2 field\(s\), expected 3"):
        load_scored_tsv(p)
    p = _write(tmp_path, "bad4.tsv", "a\tb\t1\tx\n")
    with pytest.raises(DataError, match=r"bad4\.tsv:1: 4 column\(s\) and no header; expected 2 or 3"):
        load_scored_tsv(p)


@pytest.mark.parametrize("score", ["high", "nan", "inf", ""])
def test_scored_tsv_non_numeric_score(tmp_path, score):
    p = _write(tmp_path, "bad.tsv", f"a\tb\t1\n\nc\td\t{score}\n")
    with pytest.raises(DataError, match=rf"bad\.tsv:3: column 3: expected a number, got '{score}'"):
        load_scored_tsv(p)


def test_scored_tsv_header_only_allowed_on_first_line(tmp_path):
    p = _write(tmp_path, "late_header.tsv", "a\tb\t1\ns1\ts2\tscore\n")
    with pytest.raises(DataError, match=r"late_header\.tsv:2:"):
        load_scored_tsv(p)
    p = _write(tmp_path, "nan_first.tsv", "a\tb\tnan\nc\td\t1\n")  # a bad number is not a header
    with pytest.raises(DataError, match=r"nan_first\.tsv:1:"):
        load_scored_tsv(p)


def test_scored_file_needs_a_score_column_and_reads_csv_too(tmp_path):
    p = _write(tmp_path, "unrated.tsv", "a\tb\nc\td\n")
    with pytest.raises(DataError, match=r"unrated\.tsv: no score column"):
        load_scored_tsv(p)
    p = _write(tmp_path, "rated.csv", 'sentence1,sentence2,score\n"A, b",c,1.5\nd,e,2\n')  # the one reader: CSV too
    pairs = load_scored_tsv(p)
    assert pairs.s1 == ["A, b", "d"] and pairs.scores.tolist() == [1.5, 2.0] and pairs.name == "rated"


def test_tsv_empty_files(tmp_path):
    for text in ("", "\n\n", "s1\ts2\tscore\n"):
        p = _write(tmp_path, "empty.tsv", text)
        with pytest.raises(DataError, match=r"empty\.tsv: no rows found \(expected rows of sentence1, sentence2"):
            load_scored_tsv(p)
    with pytest.raises(DataError, match=r"empty\.tsv: no rows found \(expected rows of one column per language"):
        load_parallel_tsv(_write(tmp_path, "empty.tsv", ""))


def test_parallel_tsv(tmp_path):
    p = _write(tmp_path, "bitext.tsv", "Hallo\tHello\n\nJa\tYes\n")
    corpus = load_parallel_tsv(p, "de", "en")
    assert corpus.src == ["Hallo", "Ja"] and corpus.tgt == ["Hello", "Yes"]
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "en")
    p = _write(tmp_path, "bitext.tsv", "Hallo\tHello\nJa\tYes\tOui\n")
    with pytest.raises(DataError, match=r"bitext\.tsv:2: column 3: unexpected extra field.* 3 field\(s\)"):
        load_parallel_tsv(p)
    p = _write(tmp_path, "bitext3.tsv", "Hallo\tHello\tBonjour\n")
    with pytest.raises(DataError, match=r"bitext3\.tsv:1: expected 2 tab-separated fields .*found 3"):
        load_parallel_tsv(p)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(DataError, match=r"nope\.tsv: file not found"):
        load_scored_tsv(tmp_path / "nope.tsv")
    p = tmp_path / "latin1.txt"
    p.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"latin1\.txt:2: not valid UTF-8"):
        read_lines(p)


# --- alignment ----------------------------------------------------------------------------------------


def test_misaligned_files(tmp_path):
    a = _write(tmp_path, "a.txt", "1\n2\n3\n")
    b = _write(tmp_path, "b.txt", "1\n2\n")
    with pytest.raises(DataError) as err:
        read_aligned(a, b)
    msg = str(err.value)
    assert "a.txt" in msg and "b.txt" in msg and "3 lines" in msg and "2 lines" in msg


def test_misaligned_parallel_folder(tmp_path):
    folder = tmp_path / "parallel" / "tatoeba_challenge_v2021-08-07" / "deu-eng"
    folder.mkdir(parents=True)
    for name, text in [("deu", "a\nb\n"), ("eng", "a\n"), ("deu.labels", "deu\ndeu\n"), ("eng.labels", "eng\n")]:
        (folder / f"tatoeba-test-v2021-08-07.{name}").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=r"tatoeba-test-v2021-08-07\.deu has 2 lines.*\.eng has 1 lines"):
        load_parallel("de-en", tmp_path)


def test_containers_validate_lengths():
    with pytest.raises(DataError, match="equal lengths"):
        ScoredPairs(["a"], ["b", "c"], [1.0], name="x")
    with pytest.raises(DataError, match="equal lengths"):
        ParallelCorpus(["a"], [], "de", "en", name="x")


# --- data directory -----------------------------------------------------------------------------------


def test_missing_data_dir_messages(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"does-not-exist does not exist"):
        resolve_data_dir(tmp_path / "does-not-exist")
    monkeypatch.setenv("MLSE_DATA", str(tmp_path / "env-missing"))
    with pytest.raises(DataError, match=r"env-missing does not exist \(from the MLSE_DATA"):
        resolve_data_dir()
    monkeypatch.delenv("MLSE_DATA")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths_module, "package_parent", lambda: tmp_path / "a" / "b")
    with pytest.raises(DataError) as err:
        resolve_data_dir()
    msg = str(err.value)
    assert "pass --data-dir or set MLSE_DATA" in msg
    assert str((tmp_path / ".." / "shared" / "data").resolve()) in msg


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(DataError, match=r"tatoeba_laser_v1: dataset folder not found"):
        load_tatoeba("deu", tmp_path)


# --- unknown languages list what is available ---------------------------------------------------------------


def test_unknown_languages_list_available(data_dir):
    with pytest.raises(DataError, match=r"unknown STS Multi MT language 'xx'; available: en, de, es"):
        load_sts("en-xx", data_dir=data_dir)
    with pytest.raises(DataError, match=r"unknown STS split 'validation'; available: train, dev, test"):
        load_sts("en", "validation", data_dir)
    with pytest.raises(DataError, match=r"unknown Tatoeba language 'xyz'; available: .*deu"):
        load_tatoeba("xyz", data_dir)
    with pytest.raises(DataError, match=r"English is the pivot side"):
        load_tatoeba("en", data_dir)
    with pytest.raises(DataError, match=r"unknown FLORES language 'tlh'; available: .*eng_Latn"):
        load_flores(["en", "tlh"], data_dir)
    with pytest.raises(DataError, match=r"unknown Tatoeba-Challenge pair 'deu-jpn'; .*deu-eng"):
        load_parallel("deu-jpn", data_dir)
    with pytest.raises(DataError, match=r"unknown WMT set 2019 'fi-en'; .*2019 de-en"):
        load_wmt(2019, "fi-en", data_dir)


def test_label_filter_that_keeps_nothing_lists_labels(data_dir):
    with pytest.raises(DataError, match=r"no pairs left.*cmn_Hans"):
        load_parallel("en-zh", data_dir, tgt_labels={"zho"})


# --- STS CSV in a constructed layout -----------------------------------------------------------------------


def _sts_layout(tmp_path, en: str, de: str | None = None):
    folder = tmp_path / "stsb_multi_mt"
    folder.mkdir(exist_ok=True)
    (folder / "stsb-en-test.csv").write_text(en, encoding="utf-8")
    if de is not None:
        (folder / "stsb-de-test.csv").write_text(de, encoding="utf-8")
    return folder


GOOD_EN = 'A man plays.,"A man, playing.",2.5\nNA,null,5.0\n'
GOOD_DE = 'Ein Mann spielt.,"Ein Mann, spielend.",2.5\nNA,None,5.0\n'


def test_sts_small_layout_loads(tmp_path):
    _sts_layout(tmp_path, GOOD_EN, GOOD_DE)
    pairs = load_sts("en-de", "test", tmp_path)
    assert pairs.s1 == ["A man plays.", "NA"]  # "NA" is a sentence, not a missing value
    assert pairs.s2 == ["Ein Mann, spielend.", "None"]
    assert pairs.scores.tolist() == [2.5, 5.0]


@pytest.mark.parametrize(
    ("row", "pattern"),
    [
        ("a,b,high", r"stsb-en-test\.csv:3: expected a numeric score"),
        ("a,b,7.5", r"stsb-en-test\.csv:3: score 7\.5 is outside 0\.\.5"),
        ("a,b,-1", r"stsb-en-test\.csv:3: score -1 is outside"),
        ("a,b,1,extra", r"stsb-en-test\.csv:3: expected 3 comma-separated fields .*found 4"),
        ("a,b", r"stsb-en-test\.csv:3: expected 3 comma-separated fields .*found 2"),
    ],
)
def test_sts_bad_row_names_file_and_line(tmp_path, row, pattern):
    _sts_layout(tmp_path, f"x,y,1.0\nz,w,2.0\n{row}\nq,r,3.0\n")
    with pytest.raises(DataError, match=pattern):
        load_sts("en", "test", tmp_path)


def test_sts_line_number_counts_quoted_newlines(tmp_path):
    _sts_layout(tmp_path, 'x,"two\nlines",1.0\nz,w,oops\n')
    with pytest.raises(DataError, match=r"stsb-en-test\.csv:3: expected a numeric score"):
        load_sts("en", "test", tmp_path)


def test_sts_bad_first_row(tmp_path):
    _sts_layout(tmp_path, "a,b,1,2\nc,d,3\n")
    with pytest.raises(DataError, match=r"stsb-en-test\.csv:1: expected 3 comma-separated fields"):
        load_sts("en", "test", tmp_path)


def test_sts_files_not_row_aligned(tmp_path):
    _sts_layout(tmp_path, GOOD_EN, GOOD_DE.replace("5.0", "4.0"))
    with pytest.raises(DataError, match=r"score differs on row 2"):
        load_sts("en-de", "test", tmp_path)
    _sts_layout(tmp_path, GOOD_EN, GOOD_DE + "extra,row,1.0\n")
    with pytest.raises(DataError, match=r"stsb-en-test\.csv has 2 rows, .*stsb-de-test\.csv has 3 rows"):
        load_sts("en-de", "test", tmp_path)


def test_sts_missing_language_file(tmp_path):
    _sts_layout(tmp_path, GOOD_EN)
    with pytest.raises(DataError, match=r"stsb-de-test\.csv: file not found"):
        load_sts("en-de", "test", tmp_path)


# --- hub ------------------------------------------------------------------------------------------------


def test_hub_offline_and_unreachable(tmp_path, monkeypatch):
    import huggingface_hub

    from mlse.data import download_from_hub

    with pytest.raises(DataError, match=r"unknown hub dataset 'glue'; available: stsb_multi_mt, flores200, tatoeba"):
        download_from_hub("glue", tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match=r"the hub is not reachable; pass --data-dir"):
        download_from_hub("tatoeba", tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def unreachable(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    with pytest.raises(
        DataError, match=r"openlanguagedata/flores_plus: the hub is not reachable \(OSError\); pass --data-dir"
    ) as err:
        download_from_hub("flores200", tmp_path)
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no chained traceback
