"""mlse.analysis.retrieval_errors on hand-made numbers: two scorers' error lists compared, one query's neighbours
(moved from tests/ui/test_ui_tatoeba.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.retrieval_errors import compare_errors, query_neighbours


def _err(i, query="q", retrieved="r", gold="g"):
    return {"index": i, "query": f"{query}{i}", "retrieved": f"{retrieved}{i}", "gold": f"{gold}{i}"}


def test_compare_errors_hand_made():
    a = {"to_en": [_err(1), _err(2), _err(3)], "from_en": [_err(7)]}
    b = {"to_en": [_err(2, retrieved="x"), _err(4)], "from_en": []}
    rows, counts = compare_errors(a, b)
    assert counts == {"fixed": 3, "broken": 1, "both_wrong": 1}
    got = {(r["change"], r["direction"], r["index"]) for r in rows}
    assert got == {
        ("fixed by B", "to_en", 1),
        ("fixed by B", "to_en", 3),
        ("fixed by B", "from_en", 7),
        ("broken by B", "to_en", 4),
    }
    broken = next(r for r in rows if r["change"] == "broken by B")
    assert broken["retrieved_a"] == "g4" and broken["retrieved_b"] == "r4"
    fixed = next(r for r in rows if r["index"] == 1)
    assert fixed["retrieved_a"] == "r1" and fixed["retrieved_b"] == "g1"


def test_query_neighbours_hand_made():
    # Query 0 is closest to base 1 (cos 0.9), then its gold base 0 (cos 0.8).
    q = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    b = np.array([[0.8, 0.6, 0.0], [0.9, 0.0, np.sqrt(0.19)], [0.0, 0.0, 1.0]], dtype=np.float32)
    nn = query_neighbours(q, b, 0, k=2, margin_k=1)
    assert list(nn["ids"]) == [1, 0] and nn["cosine"][0] == pytest.approx(0.9)
    assert nn["gold_rank_cosine"] == 2 and nn["gold_cosine"] == pytest.approx(0.8)
    with pytest.raises(ValueError):
        query_neighbours(q, b, 3)
