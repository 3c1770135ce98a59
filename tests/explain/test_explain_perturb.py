"""The perturbation check (mlse.explain.perturb) and the two explain benchmarks in --quick mode."""

from __future__ import annotations

import importlib
import json
import sys

import numpy as np

from mlse.explain import explain_pair
from mlse.explain.perturb import delete_spans, perturb, random_cells, top_cells, without_cells


def test_delete_spans_cuts_words_and_tidies_spaces():
    text = "A man is playing a flute."
    assert delete_spans(text, [(2, 5), (19, 24)]) == "A is playing a ."
    assert delete_spans(text, []) == text
    assert delete_spans("one", [(0, 3)]) == ""


def test_top_and_random_cells_and_the_shortened_sentences(tiny_bert):
    from mlse.encoders.load import load_encoder

    model = load_encoder(str(tiny_bert), cache=False)
    e = explain_pair(model, "A man is playing a flute.", "A man plays the flute.", steps=4, layer=1)
    top = top_cells(e, 2)
    values = [e.matrix[c] for c in top]
    assert len(top) == 2 and values[0] >= values[1] > 0
    assert values[0] == max(
        e.matrix[i, j]
        for i in range(len(e.words1))
        for j in range(len(e.words2))
        if not e.special1[i] and not e.special2[j]
    )
    by_words = top_cells(e, 1, "words")[0]
    totals = e.word_totals1[:, None] + e.word_totals2[None, :] - e.matrix
    assert totals[by_words] == max(
        totals[i, j]
        for i in range(len(e.words1))
        for j in range(len(e.words2))
        if not e.special1[i] and not e.special2[j]
    )
    cells = random_cells(e, 3, np.random.default_rng(0))
    assert len(set(cells)) == 3 and not any(e.special1[i] or e.special2[j] for i, j in cells)
    ((i, j),) = top[:1]
    s1, s2, n = without_cells(e, [(i, j)])
    assert n == 2 and e.words1[i] not in s1.split() and len(s1) < len(e.sentence1)
    result = perturb(model, e, 1, draws=3, rng=np.random.default_rng(1))
    assert len(result.random_drops) == 3 and result.top_words == 2
    emb = model.encode([s1, s2])
    assert abs(result.top_drop - (e.score - float(emb[0] @ emb[1]))) < 1e-5
    swapped = perturb(model, e, 1, draws=2, how="reference")  # the top pair's tokens take the reference at layer 1
    assert len(swapped.random_drops) == 2 and swapped.top_words == 2
    assert swapped.top_drop != result.top_drop


def _run(script: str, argv: list[str], monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [f"python -m benchmarks.{script}"])
    importlib.import_module(f"benchmarks.{script}").main(argv)


def test_speed_benchmark_quick(tiny_bert, data_dir, tmp_path, monkeypatch):
    _run(
        "explain_speed",
        ["--quick", "--models", str(tiny_bert), "--out", str(tmp_path), "--data-dir", str(data_dir), "--threads", "1"],
        monkeypatch,
    )
    data = json.loads((tmp_path / "explain-speed.json").read_text())
    model = data["models"][0]
    assert model["headline"]["explain_s"] > 0 and model["headline"]["align_s"] > 0
    assert {(g["layer"], g["steps"]) for g in model["grid"]} == {(0, 2), (0, 4), (1, 2), (1, 4)}
    assert model["convergence"]["pairs"] == 3 and 0 <= model["convergence"]["share_within_2pct"] <= 1
    assert data["isa"] is not None and "| model |" in (tmp_path / "explain-speed.md").read_text()


def test_faithfulness_benchmark_quick(tiny_bert, data_dir, tmp_path, monkeypatch):
    _run(
        "explain_faithfulness",
        ["--quick", "--models", str(tiny_bert), "--out", str(tmp_path), "--data-dir", str(data_dir), "--threads", "1"],
        monkeypatch,
    )
    data = json.loads((tmp_path / "faithfulness.json").read_text())
    per_k = data["models"][0]["per_k"]
    assert [(p["how"], p["rank"], p["k"]) for p in per_k] == [
        (h, r, k) for h in ("delete", "reference") for r in ("cell", "words") for k in (1, 2, 3)
    ]
    assert all(0 <= p["top_wins"] <= 1 and p["pairs"] == 3 for p in per_k)
    assert "top-k drop" in (tmp_path / "faithfulness.md").read_text()
