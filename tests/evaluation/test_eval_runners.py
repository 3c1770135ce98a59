"""mlse.evaluation.runners end to end on the real datasets with the tiny local encoders (and a fake "perfect" encoder
for mining)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from mlse.encoders.load import load_encoder
from mlse.errors import DataError, MlseError
from mlse.evaluation.runners import mining_sources, run_mining, run_sts, run_tatoeba, sts_groups
from mlse.runs.results import EvalResult, result_table

STS_PAIRS = ["en-en", "en-de"]
STS_TEST_N = 1379  # rows of stsb_multi_mt test
SCHEMA_KEYS = {"model", "task", "split", "config", "data", "versions", "created", "scores"}


USER_TSV = (
    "sentence1\tsentence2\tscore\n"
    "A man is playing a flute.\tA man plays the flute.\t4.8\n"
    "A cat sleeps on the sofa.\tThe stock market fell sharply.\t0.1\n"
    "Two dogs run in a park.\tDogs are running outside.\t3.9\n"
    "A woman slices an onion.\tA woman is cutting an onion.\t4.5\n"
    "The train is late again.\tShe bought a new bicycle.\t0.4\n"
    "Children play football.\tKids are playing soccer.\t4.2\n"
)


def _write_user_tsv(path):
    path.write_text(USER_TSV, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def sts_runs(tmp_path_factory, tiny_bert, data_dir):
    """Two identical run_sts calls with one cached encoder, in a private embedding cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp("sts-cache")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("MLSE_DEVICE", "cpu")
        tsv = _write_user_tsv(tmp_path_factory.mktemp("user") / "mine.tsv")
        encoder = load_encoder(str(tiny_bert))
        kwargs = dict(pairs=STS_PAIRS, pairs_files=[tsv], split="test", data_dir=data_dir, n_boot=200)
        first = run_sts(encoder, **kwargs)
        second = run_sts(encoder, **kwargs)
    return first, second, tsv


# -- STS -----------------------------------------------------------------------------------------------------------


def test_sts_scores_have_the_metric_keys(sts_runs):
    result, _, tsv = sts_runs
    assert result.task == "sts" and result.split == "test"
    assert list(result.scores) == ["en-en", "en-de", "mine"]
    for key, s in result.scores.items():
        assert set(s) == {"pearson", "spearman", "spearman_ci95", "n"}
        assert s["n"] == (STS_TEST_N if key != "mine" else 6)  # header line skipped
        assert -100 <= s["pearson"] <= 100 and -100 <= s["spearman"] <= 100
        lo, hi = s["spearman_ci95"]
        if key != "mine":
            assert lo <= s["spearman"] <= hi
    assert result.config["pairs"] == STS_PAIRS and result.config["pairs_files"] == [str(tsv)]


def test_sts_scores_equal_a_direct_computation(sts_runs, tiny_bert, data_dir):
    from mlse.data import load_scored_tsv, load_sts

    result, _, tsv = sts_runs
    plain = load_encoder(str(tiny_bert), cache=False)
    datasets = {p: load_sts(p, "test", data_dir) for p in STS_PAIRS} | {"mine": load_scored_tsv(tsv)}
    # Encode the same texts in one call, as the task does: another batch composition moves embeddings by ~1e-7,
    # which reorders near-tied cosines (en-en holds identical sentence pairs) and moves Spearman by ~1e-4.
    texts = list(dict.fromkeys(t for ds in datasets.values() for t in (*ds.s1, *ds.s2)))
    emb = dict(zip(texts, plain.encode(texts), strict=True))  # text -> [d]
    for key, ds in datasets.items():
        e1 = np.stack([emb[t] for t in ds.s1]).astype(np.float64)  # [n, d]
        e2 = np.stack([emb[t] for t in ds.s2]).astype(np.float64)  # [n, d]
        cos = np.sum(e1 * e2, axis=1) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))  # [n]
        gold = np.asarray(ds.scores, dtype=np.float64)
        assert result.scores[key]["spearman"] == pytest.approx(100 * stats.spearmanr(cos, gold)[0], abs=1e-6)
        assert result.scores[key]["pearson"] == pytest.approx(100 * stats.pearsonr(cos, gold)[0], abs=1e-6)
        np.testing.assert_allclose(result.extras["predictions"][key], cos, atol=1e-6)
    # Encoding each side separately (other batches) agrees up to float noise.
    ds = datasets["en-de"]
    e1, e2 = plain.encode(ds.s1[:300]), plain.encode(ds.s2[:300])  # [300, d] each
    np.testing.assert_allclose(np.sum(e1 * e2, axis=1), result.extras["predictions"]["en-de"][:300], atol=1e-5)


def test_sts_averages_cover_the_groups_present(sts_runs):
    result, _, _ = sts_runs
    s = result.scores
    expected = {g: m for g, m in sts_groups(STS_PAIRS).items() if m}
    assert set(result.averages) == set(expected)  # no empty group, no group for the user file
    assert "mine" not in {m for members in expected.values() for m in members}
    mean = np.mean([s["en-en"]["spearman"], s["en-de"]["spearman"]])
    assert result.averages["all"]["spearman"] == pytest.approx(mean)
    assert result.averages["monolingual"]["spearman"] == pytest.approx(s["en-en"]["spearman"])
    assert result.averages["cross-lingual"]["pearson"] == pytest.approx(s["en-de"]["pearson"])
    assert result.averages["all"]["n_pairs"] == 2 and result.averages["all"]["missing"] == []
    table = result_table(result)
    assert "en-de" in table and "avg:all" in table and "mine" in table


def test_sts_data_hashes_name_the_real_files(sts_runs, data_dir):
    from mlse.data import file_sha256
    from mlse.data.portable import resolve_record_path

    result, _, tsv = sts_runs
    names = {p.rsplit("/", 1)[-1].removeprefix("outside:") for p in result.data}
    assert {"stsb-en-test.csv", "stsb-de-test.csv", "mine.tsv"} <= names
    for path, digest in result.data.items():  # portable paths: the user's file lies outside every known folder
        assert len(digest) == 64 and int(digest, 16) >= 0
        assert file_sha256(resolve_record_path(path, data_dir) or tsv) == digest
    assert "data:stsb_multi_mt/stsb-en-test.csv" in result.data and "outside:mine.tsv" in result.data


def test_sts_second_identical_run_encodes_nothing(sts_runs):
    first, second, _ = sts_runs
    assert first.encode_stats["encoded"] > 2 * STS_TEST_N
    assert second.encode_stats == {"encoded": 0, "served": first.encode_stats["encoded"]}
    for key in first.scores:
        assert second.scores[key] == first.scores[key]


def test_sts_needs_some_data_and_rejects_clashing_names(tmp_path, tiny_bert, data_dir):
    enc = load_encoder(str(tiny_bert), cache=False)
    with pytest.raises(DataError, match="no STS data selected"):
        run_sts(enc, pairs=[], pairs_files=[])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = [_write_user_tsv(tmp_path / d / "same.tsv") for d in ("a", "b")]
    with pytest.raises(DataError, match="same"):
        run_sts(enc, pairs_files=files)


def test_sts_on_a_user_file_only(tmp_path, tiny_bert):
    enc = load_encoder(str(tiny_bert))
    result = run_sts(enc, pairs_files=[_write_user_tsv(tmp_path / "mine.tsv")], n_boot=0)
    assert result.split == "file" and list(result.scores) == ["mine"]
    assert result.averages == {}
    assert all(math.isnan(x) for x in result.scores["mine"]["spearman_ci95"])  # n_boot=0


# -- result JSON ---------------------------------------------------------------------------------------------------


def test_result_json_schema_and_nan_as_null(sts_runs, tmp_path):
    result, _, _ = sts_runs
    path = result.write_json(tmp_path / "out" / "sts.json")
    obj = json.loads(path.read_text(encoding="utf-8"))
    assert SCHEMA_KEYS <= set(obj)
    assert obj["model"] == "outside:tiny-bert" and obj["task"] == "sts" and obj["split"] == "test"  # never absolute
    assert obj["scores"]["en-de"]["n"] == STS_TEST_N
    assert obj["scores"]["en-de"]["spearman"] == pytest.approx(result.scores["en-de"]["spearman"])
    assert set(obj["data"]) == set(result.data)
    assert "extras" not in obj and "predictions" not in json.dumps(obj)
    assert {"python", "numpy"} <= set(obj["versions"])

    odd_scores = {"x": {"a": math.nan, "ci": [math.nan, 1.0], "thr": math.inf, "neg": -math.inf}}
    odd = EvalResult(model="m", task="t", split="s", scores=odd_scores)
    text = odd.write_json(tmp_path / "odd.json").read_text(encoding="utf-8")
    strict = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert strict["scores"]["x"] == {"a": None, "ci": [None, 1.0], "thr": None, "neg": None}
    assert SCHEMA_KEYS <= set(strict)


# -- Tatoeba -------------------------------------------------------------------------------------------------------


def test_tatoeba_two_languages(tiny_bert, data_dir):
    enc = load_encoder(str(tiny_bert))
    result = run_tatoeba(enc, langs=["de", "fra"], data_dir=data_dir)
    assert result.task == "tatoeba" and list(result.scores) == ["deu", "fra"]
    keys = {
        "acc_to_en",
        "acc_from_en",
        "acc_mean",
        "acc_to_en_margin",
        "acc_from_en_margin",
        "acc_mean_margin",
        "xsim_error",
    }
    for lang, s in result.scores.items():
        assert set(s) == keys
        assert all(0.0 <= v <= 100.0 for v in s.values())
        assert s["acc_mean"] == pytest.approx((s["acc_to_en"] + s["acc_from_en"]) / 2)
        n = len(result.extras["corpora"][lang])
        errors = result.extras["errors"][lang]
        assert len(errors["to_en"]) == round((100 - s["acc_to_en"]) / 100 * n)
        assert len(errors["from_en"]) == round((100 - s["acc_from_en"]) / 100 * n)
        for e in errors["to_en"][:5]:
            assert e["retrieved"] != e["gold"] and e["rank_of_gold"] >= 2
    assert result.averages["all"]["n_langs"] == 2
    assert result.averages["all"]["acc_mean"] == pytest.approx(np.mean([s["acc_mean"] for s in result.scores.values()]))
    assert len(result.data) == 4 and all(len(h) == 64 for h in result.data.values())
    assert result.encode_stats["encoded"] > 0


def test_tatoeba_unknown_language_is_a_data_error(tiny_bert, data_dir):
    with pytest.raises(DataError, match="unknown Tatoeba language 'xx'"):
        run_tatoeba(load_encoder(str(tiny_bert), cache=False), langs=["xx"], data_dir=data_dir)


# -- mining --------------------------------------------------------------------------------------------------------


class PerfectEncoder:
    """Gives a sentence and its gold translation one shared random vector; every other text its own random one."""

    name = "perfect"
    identity = "perfect:0"

    def __init__(self, src: list[str], tgt: list[str], dim: int = 64, seed: int = 0):
        self.dim = dim
        self.rng = np.random.default_rng(seed)
        self.vectors: dict[str, np.ndarray] = {}
        for s, t in zip(src, tgt, strict=True):
            v = self.rng.standard_normal(dim)
            self.vectors.setdefault(s.strip(), v)
            self.vectors.setdefault(t.strip(), v)
        self.stats = {"encoded": 0, "served": 0}

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None) -> np.ndarray:
        rows = [self.vectors.setdefault(t.strip(), self.rng.standard_normal(self.dim)) for t in texts]
        self.stats["encoded"] += len(rows)
        emb = np.stack(rows) if rows else np.zeros((0, self.dim))  # [n, dim]
        if normalize:
            emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        return emb.astype(np.float32)


@pytest.fixture(scope="module")
def perfect(data_dir) -> PerfectEncoder:
    gold, _, _, _ = mining_sources("de-en", data_dir)
    return PerfectEncoder(gold.src, gold.tgt)


def test_mining_sources_de_en(data_dir):
    gold, extra_src, extra_tgt, sources = mining_sources("de-en", data_dir)
    assert gold.name == "wmt_newstest/2019/de-en" and (gold.src_lang, gold.tgt_lang) == ("de", "en")
    assert len(gold) == 2000
    assert extra_src and extra_tgt
    assert not set(extra_src) & set(gold.src) and not set(extra_tgt) & set(gold.tgt)
    names = {p.name for p in sources}
    assert {"newstest2019.de", "newstest2019.en", "newstest2013.de", "newstest2013.en"} <= names
    assert {"deu_Latn.devtest", "eng_Latn.devtest"} <= names


def test_mining_with_a_tiny_model_reports_prf_and_config(tiny_bert, data_dir):
    enc = load_encoder(str(tiny_bert), max_seq_length=16)  # ~6,000 news sentences: truncate for speed
    result = run_mining(enc, pair="de-en", data_dir=data_dir, n_gold=40, seed=1)
    assert result.task == "mining" and list(result.scores) == ["de-en"]
    s = result.scores["de-en"]
    assert {"precision", "recall", "f1", "threshold", "n_gold", "train_f1"} <= set(s)
    assert all(0.0 <= s[k] <= 100.0 for k in ("precision", "recall", "f1"))
    assert s["n_gold"] == 20
    assert result.config["gold_source"] == "wmt_newstest/2019/de-en"
    assert result.config["n_gold"] == 40 and result.config["seed"] == 1 and result.config["pair"] == "de-en"
    assert any(p.endswith("newstest2019.de") for p in result.data)
    assert all(len(h) == 64 for h in result.data.values())
    assert result.encode_stats["encoded"] > 1000


def test_mining_with_a_perfect_encoder_finds_the_gold_pairs(perfect, data_dir):
    result = run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=100, seed=0)
    s = result.scores["de-en"]
    assert s["f1"] >= 95.0 and s["train_f1"] >= 95.0, s
    assert s["n_gold"] == 50 and s["n_src"] > 1000 and s["n_tgt"] > 1000
    assert math.isfinite(s["threshold"])


def test_mining_task_construction_is_deterministic_for_a_seed(perfect, data_dir):
    a = run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=20, seed=7).extras
    b = run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=20, seed=7).extras
    c = run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=20, seed=8).extras
    for split in ("train", "test"):
        assert a[split].src == b[split].src and a[split].tgt == b[split].tgt and a[split].gold == b[split].gold
    assert a["train"].src != c["train"].src or a["train"].gold != c["train"].gold


def test_mining_user_errors(perfect, data_dir):
    with pytest.raises(DataError, match="no WMT news test for mining pair 'ja-en'"):
        run_mining(perfect, pair="ja-en", data_dir=data_dir)
    with pytest.raises(DataError, match="too large"):
        run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=1001)
    with pytest.raises(MlseError, match=">= 2"):
        run_mining(perfect, pair="de-en", data_dir=data_dir, n_gold=1)
