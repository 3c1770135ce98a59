"""Loaders against the real data: counts, alignment with a direct read of the files, aliases."""

# ruff: noqa: F811  (pytest fixtures imported from tests/conftest_data.py are re-bound as arguments)

from __future__ import annotations

import csv
import hashlib
import os

import numpy as np
import pytest

from mlse.data import (
    HAM_KIM_14,
    STS_LANGS,
    default_labels,
    file_sha256,
    flores_languages,
    load_flores,
    load_parallel,
    load_sts,
    load_tatoeba,
    load_wmt,
    parallel_pairs,
    read_lines,
    resolve_data_dir,
    tatoeba_languages,
    wmt_sets,
)
from tests.conftest_data import data_dir  # noqa: F401  (fixture; its use as an argument is F811 below)

TC = "parallel/tatoeba_challenge_v2021-08-07"


def _raw_lines(path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


def _csv_rows(path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return [row for row in csv.reader(fh) if row]


# --- io -------------------------------------------------------------------------------------------


def test_read_lines_splits_on_newline_only(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes("a\u0085b\r\n\nc\u2028d\x0ce\n".encode())
    assert read_lines(p) == ["a\u0085b", "", "c\u2028d\x0ce"]
    p.write_bytes(b"no trailing newline")
    assert read_lines(p) == ["no trailing newline"]
    p.write_bytes(b"")
    assert read_lines(p) == []
    p.write_bytes(b"one\n\n")  # only the final empty element goes
    assert read_lines(p) == ["one", ""]


def test_file_sha256_matches_hashlib_and_notices_changes(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"hello")
    assert file_sha256(p) == hashlib.sha256(b"hello").hexdigest()
    p.write_bytes(b"hello world!")
    os.utime(p, ns=(1, 1))  # different mtime and size -> new cache key
    assert file_sha256(p) == hashlib.sha256(b"hello world!").hexdigest()


def test_resolve_data_dir_order(tmp_path, monkeypatch, data_dir):
    explicit = tmp_path / "explicit"
    explicit.mkdir()
    from_env = tmp_path / "env"
    from_env.mkdir()
    monkeypatch.setenv("MLSE_DATA", str(from_env))
    assert resolve_data_dir(explicit) == explicit.resolve()
    assert resolve_data_dir() == from_env.resolve()
    monkeypatch.delenv("MLSE_DATA")
    work = tmp_path / "proj" / "repo"
    work.mkdir(parents=True)
    (tmp_path / "proj" / "shared" / "data").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert resolve_data_dir() == (tmp_path / "proj" / "shared" / "data").resolve()
    monkeypatch.chdir(tmp_path)  # no ../shared/data here: falls back to the repository's sibling folder
    assert resolve_data_dir() == data_dir


# --- STS Multi MT -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("split", "count"), [("test", 1379), ("dev", 1500), ("train", 5749)])
def test_sts_counts_all_languages(data_dir, split, count):
    for lang in STS_LANGS:
        pairs = load_sts(lang, split, data_dir)
        assert len(pairs) == count, (lang, split)
        assert pairs.scores.dtype == np.float32
        assert 0.0 <= pairs.scores.min() and pairs.scores.max() <= 5.0


def test_sts_cross_lingual_pair_matches_direct_read(data_dir):
    pairs = load_sts("en-de", "test", data_dir)
    en = _csv_rows(data_dir / "stsb_multi_mt" / "stsb-en-test.csv")
    de = _csv_rows(data_dir / "stsb_multi_mt" / "stsb-de-test.csv")
    assert pairs.s1 == [r[0] for r in en]
    assert pairs.s2 == [r[1] for r in de]
    np.testing.assert_allclose(pairs.scores, [float(r[2]) for r in en], atol=1e-6)
    assert pairs.name == "stsb_multi_mt/test/en-de"
    assert [p.name for p in pairs.sources] == ["stsb-en-test.csv", "stsb-de-test.csv"]
    assert pairs.s1[0] == "A girl is styling her hair."
    assert pairs.s2[0] == "Ein Mädchen bürstet sich die Haare."
    # The reverse direction really swaps which file each side comes from.
    rev = load_sts("de-en", "test", data_dir)
    assert rev.s1 == [r[0] for r in de] and rev.s2 == [r[1] for r in en]


def test_sts_single_language_and_cache_copies(data_dir):
    a = load_sts("en", "dev", data_dir)
    assert a.name == "stsb_multi_mt/dev/en-en"
    en = _csv_rows(data_dir / "stsb_multi_mt" / "stsb-en-dev.csv")
    assert a.s1 == [r[0] for r in en] and a.s2 == [r[1] for r in en]
    a.s1[0] = "changed"
    a.scores[0] = -1.0
    b = load_sts("EN", "dev", data_dir)
    assert b.s1[0] == en[0][0] and b.scores[0] == pytest.approx(float(en[0][2]))


# --- LASER Tatoeba ----------------------------------------------------------------------------------


def test_tatoeba_languages(data_dir):
    langs = tatoeba_languages(data_dir)
    assert len(langs) == 112
    assert langs == sorted(langs)
    assert set(HAM_KIM_14) <= set(langs)
    assert "eng" not in langs


def test_tatoeba_known_language_alignment(data_dir):
    corpus = load_tatoeba("deu", data_dir)
    folder = data_dir / "tatoeba_laser_v1"
    assert len(corpus) == 1000
    assert corpus.src == _raw_lines(folder / "tatoeba.deu-eng.deu")
    assert corpus.tgt == _raw_lines(folder / "tatoeba.deu-eng.eng")
    assert (corpus.src_lang, corpus.tgt_lang) == ("deu", "eng")
    assert len(load_tatoeba("amh", data_dir)) == 168  # a small language: not every one has 1,000


@pytest.mark.parametrize(
    ("alias", "code"), [("de", "deu"), ("zh", "cmn"), ("zho", "cmn"), ("JA", "jpn"), ("ar", "ara"), ("kor", "kor")]
)
def test_tatoeba_aliases(data_dir, alias, code):
    assert load_tatoeba(alias, data_dir).src_lang == code


# --- Tatoeba-Challenge bitext -------------------------------------------------------------------------


def test_parallel_pairs(data_dir):
    pairs = parallel_pairs(data_dir)
    assert len(pairs) == 18
    assert {"deu-eng", "eng-zho", "pol-tur", "spa-zho"} <= set(pairs)


def test_parallel_direction_and_aliases(data_dir):
    folder = data_dir / TC / "deu-eng"
    deu = _raw_lines(folder / "tatoeba-test-v2021-08-07.deu")
    eng = _raw_lines(folder / "tatoeba-test-v2021-08-07.eng")
    de_en = load_parallel("deu-eng", data_dir)
    assert (de_en.src_lang, de_en.tgt_lang) == ("deu", "eng")
    assert de_en.src == deu and de_en.tgt == eng
    en_de = load_parallel("en-de", data_dir)
    assert (en_de.src_lang, en_de.tgt_lang) == ("eng", "deu")
    assert en_de.src == eng and en_de.tgt == deu
    assert load_parallel("eng-deu", data_dir).src == eng


def test_parallel_label_filtering_zho(data_dir):
    folder = data_dir / TC / "eng-zho"
    eng = _raw_lines(folder / "tatoeba-test-v2021-08-07.eng")
    zho = _raw_lines(folder / "tatoeba-test-v2021-08-07.zho")
    labels = _raw_lines(folder / "tatoeba-test-v2021-08-07.zho.labels")
    wanted = default_labels("zh")
    assert wanted == {"cmn_Hans", "cmn_Hant"}
    full = load_parallel("en-zh", data_dir)
    filtered = load_parallel("en-zh", data_dir, tgt_labels=wanted)
    assert len(full) == 10390
    assert len(filtered) < len(full)
    expected = [(e, z) for e, z, lab in zip(eng, zho, labels) if lab in wanted and e.strip() and z.strip()]
    assert list(zip(filtered.src, filtered.tgt)) == expected
    assert len(filtered) == sum(lab in wanted for lab in labels)
    only_simplified = load_parallel("zho-eng", data_dir, src_labels={"cmn_Hans"})
    assert len(only_simplified) == labels.count("cmn_Hans")
    assert set(only_simplified.src) <= {z for z, lab in zip(zho, labels) if lab == "cmn_Hans"}


def test_parallel_max_pairs_is_seeded_subset_in_file_order(data_dir):
    full = load_parallel("pol-tur", data_dir)
    position = {pair: i for i, pair in enumerate(zip(full.src, full.tgt))}
    a = load_parallel("pol-tur", data_dir, max_pairs=100, seed=3)
    b = load_parallel("pol-tur", data_dir, max_pairs=100, seed=3)
    c = load_parallel("pol-tur", data_dir, max_pairs=100, seed=4)
    assert len(a) == 100
    assert a.src == b.src and a.tgt == b.tgt
    assert a.src != c.src
    idx = [position[p] for p in zip(a.src, a.tgt)]
    assert idx == sorted(idx)
    assert len(load_parallel("pol-tur", data_dir, max_pairs=10**6)) == len(full) == 892


def test_parallel_u0085_does_not_misalign(data_dir):
    folder = data_dir / TC / "eng-pol"
    pol_path = folder / "tatoeba-test-v2021-08-07.pol"
    text = pol_path.read_text(encoding="utf-8")
    assert "\u0085" in text
    assert len(text.splitlines()) > text.count("\n")  # the trap is real: splitlines() adds lines
    corpus = load_parallel("pol-eng", data_dir)
    assert len(corpus) == text.count("\n") == 10099
    hits = [i for i, s in enumerate(corpus.src) if "\u0085" in s]
    assert hits, "the U+0085 line should survive as one line"
    eng = _raw_lines(folder / "tatoeba-test-v2021-08-07.eng")
    assert corpus.tgt == eng
    pol = _raw_lines(pol_path)
    for i in hits:
        assert corpus.src[i] == pol[i]


# --- FLORES ---------------------------------------------------------------------------------------


def test_flores_all_languages(data_dir):
    langs = flores_languages(data_dir)
    assert len(langs) == 15 and "zho_Hans" in langs and "eng_Latn" in langs
    data = load_flores(data_dir=data_dir)
    assert list(data) == langs
    assert {len(v) for v in data.values()} == {1012}
    assert data["eng_Latn"] == _raw_lines(data_dir / "flores200_devtest" / "eng_Latn.devtest")


@pytest.mark.parametrize(
    ("alias", "code"),
    [
        ("en", "eng_Latn"),
        ("eng", "eng_Latn"),
        ("zh", "zho_Hans"),
        ("zho", "zho_Hans"),
        ("zho_hant", "zho_Hant"),
        ("deu", "deu_Latn"),
        ("ar", "arb_Arab"),
        ("uk", "ukr_Cyrl"),
    ],
)
def test_flores_aliases(data_dir, alias, code):
    assert list(load_flores([alias], data_dir)) == [code]


# --- WMT ------------------------------------------------------------------------------------------


def test_wmt_sets(data_dir):
    sets = wmt_sets(data_dir)
    y2013 = [p for y, p in sets if y == 2013]
    assert len(y2013) == 15  # every unordered pair of cs de en es fr ru
    assert {tuple(sorted(p.split("-"))) for p in y2013} == {
        tuple(sorted((a, b)))
        for a in ("cs", "de", "en", "es", "fr", "ru")
        for b in ("cs", "de", "en", "es", "fr", "ru")
        if a < b
    }
    assert {
        (2018, "tr-en"),
        (2019, "de-en"),
        (2019, "ru-en"),
        (2019, "zh-en"),
        (2019, "de-fr"),
        (2020, "en-pl"),
    } <= set(sets)


def test_wmt_load_and_direction(data_dir):
    de_en = load_wmt(2013, "de-en", data_dir)
    assert len(de_en) == 3000 and (de_en.src_lang, de_en.tgt_lang) == ("de", "en")
    assert de_en.src == _raw_lines(data_dir / "wmt_newstest" / "2013" / "newstest2013.de")
    en_de = load_wmt(2019, "en-de", data_dir)  # reversed order of the 2019/de-en folder
    assert en_de.src == _raw_lines(data_dir / "wmt_newstest" / "2019" / "de-en" / "newstest2019.en")
    assert len(en_de) == 2000 and en_de.name == "wmt_newstest/2019/en-de"
    assert len(load_wmt(2019, "de-fr", data_dir)) == 1701


# --- hub conversion (no network: snapshot_download is replaced by a fake local snapshot) ----------------


def test_hub_conversion_writes_loader_layout(tmp_path, monkeypatch):
    import json

    import huggingface_hub

    from mlse.data import download_from_hub

    snapshot = tmp_path / "snapshot"
    (snapshot / "en").mkdir(parents=True)
    (snapshot / "de").mkdir()
    rows_en = [
        {"sentence1": "A, b", "sentence2": "NA", "similarity_score": 2.5},
        {"sentence1": "c", "sentence2": "d", "similarity_score": 0.0},
    ]
    rows_de = [
        {"sentence1": "A, b (de)", "sentence2": "NA (de)", "similarity_score": 2.5},
        {"sentence1": "c", "sentence2": "d", "similarity_score": 0.0},
    ]
    for lang, rows in (("en", rows_en), ("de", rows_de)):
        (snapshot / lang / "test-00000-of-00001.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (snapshot / "test").mkdir()
    (snapshot / "test" / "deu-eng.jsonl").write_text(
        json.dumps({"sentence1": "Hallo\nWelt", "sentence2": "Hello world"})
        + "\n"
        + json.dumps({"sentence1": "Ja", "sentence2": "Yes"})
        + "\n"
    )
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = []

    def fake_snapshot_download(repo_id, **kwargs):
        calls.append((repo_id, kwargs.get("repo_type")))
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    target = tmp_path / "data"
    assert download_from_hub("stsb_multi_mt", target) == target
    assert download_from_hub("tatoeba", target) == target
    assert calls == [("PhilipMay/stsb_multi_mt", "dataset"), ("mteb/tatoeba-bitext-mining", "dataset")]
    sts = load_sts("en-de", "test", target)
    assert sts.s1 == ["A, b", "c"] and sts.s2 == ["NA (de)", "d"] and sts.scores.tolist() == [2.5, 0.0]
    tat = load_tatoeba("de", target)
    assert tat.src == ["Hallo Welt", "Ja"] and tat.tgt == ["Hello world", "Yes"]  # embedded newline flattened
