"""mlse.evaluation.retrieval: Tatoeba accuracy both ways, margin vs hubs, xSIM, the error list."""

import numpy as np
import pytest

from mlse.evaluation.index import l2_normalize
from mlse.evaluation.retrieval import retrieval_accuracy, retrieval_errors, tatoeba_metrics, xsim_error


def _one_wrong() -> tuple[np.ndarray, np.ndarray]:
    """xx side: s2 leans towards en0, so xx->en gets query 2 wrong; en->xx is all right."""
    tgt = np.eye(3, dtype=np.float32)  # en0, en1, en2
    src = l2_normalize(np.array([[1, 0, 0], [0, 1, 0], [0.9, 0, 0.5]], dtype=np.float32))
    return src, tgt


def _hub() -> tuple[np.ndarray, np.ndarray]:
    """Target 0 is a hub: every query is closer to it than to its own translation, by cosine."""
    n, d = 6, 7
    e = np.eye(d, dtype=np.float32)
    u = e[0]
    x = [u] + [e[i] + 1.2 * u for i in range(1, n)]
    y = [u] + [e[i] + 0.1 * u + 0.3 * e[i % (n - 1) + 1] for i in range(1, n)]
    return l2_normalize(np.array(x)), l2_normalize(np.array(y))


def test_identical_embeddings_are_perfect():
    rng = np.random.default_rng(0)
    x = l2_normalize(rng.standard_normal((100, 16)).astype(np.float32))
    m = tatoeba_metrics(x, x.copy())
    assert set(m) == {
        "acc_to_en",
        "acc_from_en",
        "acc_mean",
        "acc_to_en_margin",
        "acc_from_en_margin",
        "acc_mean_margin",
        "xsim_error",
    }
    assert m["acc_mean"] == m["acc_mean_margin"] == 100.0
    assert m["xsim_error"] == 0.0
    assert retrieval_errors([str(i) for i in range(100)], [str(i) for i in range(100)], x, x) == []


def test_one_wrong_query_in_one_direction():
    src, tgt = _one_wrong()
    m = tatoeba_metrics(src, tgt, k=1)
    assert m["acc_to_en"] == pytest.approx(200 / 3)
    assert m["acc_from_en"] == 100.0
    assert m["acc_mean"] == pytest.approx((200 / 3 + 100) / 2)
    errs = retrieval_errors(["s0", "s1", "s2"], ["en0", "en1", "en2"], src, tgt, direction="to_en", k=1)
    assert len(errs) == 1
    e = errs[0]
    assert (e["index"], e["query"], e["retrieved"], e["gold"]) == (2, "s2", "en0", "en2")
    assert e["sim_retrieved"] > e["sim_gold"]
    assert e["rank_of_gold"] == 2
    assert set(e) == {
        "index",
        "query",
        "retrieved",
        "gold",
        "sim_retrieved",
        "sim_gold",
        "margin_retrieved",
        "margin_gold",
        "rank_of_gold",
    }
    assert retrieval_errors(["s0", "s1", "s2"], ["en0", "en1", "en2"], src, tgt, direction="from_en", k=1) == []


def test_margin_fixes_hub_error():
    x, y = _hub()
    assert retrieval_accuracy(x, y) == pytest.approx(100 / 6)  # only the hub's own query is right
    assert retrieval_accuracy(x, y, margin=True, k=4) == 100.0
    m = tatoeba_metrics(x, y)
    assert m["acc_to_en_margin"] == 100.0 and m["xsim_error"] == 0.0
    errs = retrieval_errors([f"x{i}" for i in range(6)], [f"y{i}" for i in range(6)], x, y)
    assert [e["index"] for e in errs] == [1, 2, 3, 4, 5]
    assert all(e["retrieved"] == "y0" and e["margin_gold"] > e["margin_retrieved"] for e in errs)
    assert retrieval_errors([f"x{i}" for i in range(6)], [f"y{i}" for i in range(6)], x, y, margin=True) == []


def test_xsim_counts_errors_over_k_shortlist():
    x, y = _hub()
    # With k=1 the shortlist is the cosine nearest only, so margin cannot re-rank: 5 of 6 wrong (LASER behaviour).
    assert xsim_error(x, y, k=1) == pytest.approx(500 / 6)


def test_validation():
    src, tgt = _one_wrong()
    with pytest.raises(ValueError, match="aligned"):
        retrieval_accuracy(src, tgt[:2])
    with pytest.raises(ValueError, match="direction"):
        retrieval_errors(["a"] * 3, ["b"] * 3, src, tgt, direction="sideways")
    with pytest.raises(ValueError, match="texts"):
        retrieval_errors(["a"] * 2, ["b"] * 3, src, tgt)


def test_metrics_from_shared_neighbour_lists_equal_the_one_number_functions():
    """tatoeba_metrics and retrieval_errors read one set of searches; each number must equal its own function's,
    ties included (duplicated rows: identical embeddings, as all-[UNK] sentences give)."""
    from mlse.evaluation.retrieval import neighbour_lists

    rng = np.random.default_rng(5)
    src, tgt = rng.normal(size=(2, 60, 8)).astype(np.float32)
    tgt = tgt + src * 0.5
    src[10:15] = src[10]  # five identical queries
    tgt[20:23] = tgt[20]  # three identical candidates
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    m = tatoeba_metrics(src, tgt, k=4)
    assert m["acc_to_en"] == retrieval_accuracy(src, tgt) and m["acc_from_en"] == retrieval_accuracy(tgt, src)
    assert m["acc_to_en_margin"] == retrieval_accuracy(src, tgt, margin=True)
    assert m["acc_from_en_margin"] == retrieval_accuracy(tgt, src, margin=True)
    assert m["xsim_error"] == xsim_error(src, tgt, k=4)
    texts_s, texts_t = [f"s{i}" for i in range(60)], [f"t{i}" for i in range(60)]
    nb = neighbour_lists(src, tgt, 4)
    for direction, (q, b) in (("to_en", (src, tgt)), ("from_en", (tgt, src))):
        for margin in (False, True):
            errors = retrieval_errors(texts_s, texts_t, src, tgt, direction=direction, margin=margin, neighbours=nb)
            assert len(errors) == round(60 * (1 - retrieval_accuracy(q, b, margin=margin) / 100)) > 0
