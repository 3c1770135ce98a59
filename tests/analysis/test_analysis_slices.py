"""mlse.analysis.slices on hand-made arrays: per-slice correlations checked against scipy, the length rule and bands,
the rows of the slices table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mlse.analysis.slices import (
    LANGUAGE_PAIR,
    LENGTH,
    MIN_CI_PAIRS,
    SLICE_COLUMNS,
    language_pair_labels,
    languages_or_detected,
    length_bands,
    pair_lengths,
    slice_metrics,
    slice_rows,
    text_length,
)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    labels = np.array(["en-de"] * 30 + ["en-en"] * 12 + ["de-fr"] * 5 + ["zh-en"] * 2, dtype=object)
    gold = rng.uniform(0, 5, labels.size)
    pred = gold / 5 + rng.normal(scale=0.3, size=labels.size)
    return pred, gold, labels


def test_slice_metrics_match_scipy_per_slice():
    pred, gold, labels = _data()
    rows = slice_metrics(pred, gold, labels, n_boot=200)
    assert [r["value"] for r in rows] == ["en-de", "en-en", "de-fr", "zh-en"]  # most pairs first
    assert sum(r["n"] for r in rows) == labels.size
    for row in rows[:3]:
        mask = labels == row["value"]
        assert row["n"] == mask.sum()
        assert row["pearson"] == pytest.approx(100 * stats.pearsonr(pred[mask], gold[mask])[0])
        assert row["spearman"] == pytest.approx(100 * stats.spearmanr(pred[mask], gold[mask])[0])
    big, medium, small, tiny = rows
    assert big["pearson_lo"] <= big["pearson"] <= big["pearson_hi"] and big["spearman_lo"] <= big["spearman_hi"]
    assert medium["note"] == "" and not math.isnan(medium["spearman_lo"])
    assert math.isnan(small["pearson_lo"]) and f"fewer than {MIN_CI_PAIRS}" in small["note"]  # 5 pairs: no CI
    assert math.isnan(tiny["pearson"]) and math.isnan(tiny["spearman"]) and "no correlation" in tiny["note"]


def test_slice_metrics_order_and_constant_slice():
    pred = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    gold = np.array([1.0, 1.0, 1.0, 2.0, 3.0, 4.0])
    labels = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    rows = slice_metrics(pred, gold, labels, order=["b", "a", "c"], n_boot=0)
    assert [r["value"] for r in rows] == ["b", "a", "c"] and [r["n"] for r in rows] == [3, 3, 0]
    assert rows[0]["pearson"] == pytest.approx(100.0) and "constant" in rows[1]["note"]
    with pytest.raises(ValueError):
        slice_metrics(pred, gold, labels[:5])


def test_length_rule_and_terciles():
    assert text_length("The cat sleeps on the sofa.") == 6
    assert text_length("猫在睡觉。") == 4  # characters (no punctuation) for Chinese, detected by script
    assert text_length("猫在睡觉。", "zh") == 4 and text_length("a b c", "ja") == 3  # the language code decides
    assert text_length("The cat", "und") == 2
    lengths = pair_lengths(["one two", "一二三四"], ["one two three four", "a b"])
    assert list(lengths) == [3.0, 3.0]
    x = np.array([2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40], dtype=float)
    labels, order = length_bands(x)
    counts = [int((labels == o).sum()) for o in order]
    assert sum(counts) == x.size and counts == [4, 4, 4]
    assert order[0] == "short (≤ 5 words)" and order[1] == "medium (6–9 words)" and order[2] == "long (≥ 10 words)"
    same, only = length_bands(np.full(5, 7.0))  # ties: one band, no empty ones
    assert only == ["short (≤ 7 words)"] and (same == only[0]).all()


def test_language_labels_and_detection():
    assert list(language_pair_labels(["en", "DE ", ""], ["de", "de", "fr"])) == ["en-de", "de-de", "und-fr"]
    codes, detected = languages_or_detected(["The weather is lovely today.", "Das Wetter ist heute schön."], ["", None])
    assert codes == ["en", "de"] and detected == 2
    codes, detected = languages_or_detected(["whatever"], ["fr"])
    assert codes == ["fr"] and detected == 0


def test_slice_rows_one_row_per_slice_and_model():
    pred, gold, labels = _data(1)
    bands, order = length_bands(np.arange(labels.size, dtype=float))
    preds = {"m1": pred, "m2": -pred}
    rows = slice_rows(preds, gold, {LANGUAGE_PAIR: (labels, None), LENGTH: (bands, order)}, n_boot=0)
    assert all(list(r) == SLICE_COLUMNS for r in rows)
    assert len(rows) == 2 * (4 + 3)
    for kind in (LANGUAGE_PAIR, LENGTH):
        for model in preds:
            assert sum(r["n"] for r in rows if r["slice"] == kind and r["model"] == model) == labels.size
    first = [r for r in rows if r["value"] == "en-de"]
    assert [r["model"] for r in first] == ["m1", "m2"] and first[0]["pearson"] == pytest.approx(-first[1]["pearson"])
