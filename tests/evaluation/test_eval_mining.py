"""mlse.evaluation.mining: task construction invariants, LASER max-score mining, threshold tuning."""

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.evaluation.index import l2_normalize
from mlse.evaluation.margin import margin_retrieve
from mlse.evaluation.mining import (
    MiningSplit,
    best_threshold,
    build_mining_task,
    evaluate_mining,
    mine_candidates,
    mining_prf,
)


def _parallel(n: int) -> list[tuple[str, str]]:
    return [(f"src {i}", f"tgt {i}") for i in range(n)]


def _check_invariants(parallel, train: MiningSplit, test: MiningSplit, n_gold: int) -> None:
    translations = {(s.strip(), t.strip()) for s, t in parallel}
    assert len(train.gold) + len(test.gold) == n_gold
    assert train.gold and test.gold
    for split in (train, test):
        assert len(set(split.src)) == len(split.src) and len(set(split.tgt)) == len(split.tgt)
        for i, j in split.gold:
            assert (split.src[i], split.tgt[j]) in translations  # gold pairs are real translations
    assert not set(train.src) & set(test.src) and not set(train.tgt) & set(test.tgt)
    # The only translation pairs anywhere in the pools are the gold pairs of one split.
    gold_texts = {(sp.src[i], sp.tgt[j]) for sp in (train, test) for i, j in sp.gold}
    all_src, all_tgt = set(train.src) | set(test.src), set(train.tgt) | set(test.tgt)
    hidden = {(s, t) for s, t in translations if s in all_src and t in all_tgt}
    assert hidden == gold_texts


def test_build_mining_task_invariants_and_seed():
    parallel = _parallel(300)
    train, test = build_mining_task(parallel, n_gold=40, seed=0, distractors_src=["extra a"], distractors_tgt=["x"])
    _check_invariants(parallel, train, test, 40)
    assert len(train.gold) == len(test.gold) == 20
    # 260 remaining pairs: 130 src sides, 130 tgt sides become distractors, plus the extra sentences.
    assert len(train.src) + len(test.src) == 40 + 130 + 1
    assert len(train.tgt) + len(test.tgt) == 40 + 130 + 1
    again = build_mining_task(parallel, n_gold=40, seed=0, distractors_src=["extra a"], distractors_tgt=["x"])
    assert again == (train, test)
    other = build_mining_task(parallel, n_gold=40, seed=1, distractors_src=["extra a"], distractors_tgt=["x"])
    assert other != (train, test)
    # Gold positions carry no signal: not all on the diagonal / at the start.
    assert sorted(i for i, _ in train.gold) != list(range(len(train.gold)))


def test_build_mining_task_dedup_and_many_to_many_translations():
    parallel = _parallel(100) + [
        ("src 0", "tgt zero"),  # a second translation of src 0
        ("src dup", "tgt 1"),  # a second source of tgt 1
        ("  src 2 ", "tgt 2"),  # duplicate after stripping
        ("same", "same"),  # identical on both sides
        ("", "tgt empty"),
    ]
    extra_src = ["src 5", "src 5", "lonely src"]  # duplicates of a possible gold/distractor sentence
    extra_tgt = ["tgt 7", "lonely tgt", "same"]
    for seed in range(5):
        train, test = build_mining_task(
            parallel, n_gold=30, seed=seed, train_fraction=0.3, distractors_src=extra_src, distractors_tgt=extra_tgt
        )
        _check_invariants([(s, t) for s, t in parallel if s.strip() and t.strip()], train, test, 30)
        assert len(train.gold) == 9
        assert "lonely src" in train.src + test.src and "lonely tgt" in train.tgt + test.tgt
        for sp in (train, test):
            assert not set(sp.src) & set(train.tgt + test.tgt)  # identical strings never sit on both sides


def test_build_mining_task_errors():
    with pytest.raises(MlseError, match="n_gold"):
        build_mining_task(_parallel(10), n_gold=20)
    with pytest.raises(ValueError):
        build_mining_task(_parallel(10), n_gold=1)
    with pytest.raises(ValueError):
        build_mining_task(_parallel(10), n_gold=4, train_fraction=1.0)


def _embed(split: MiningSplit, vectors: dict[str, np.ndarray], rng: np.random.Generator, noise: float):
    def side(texts):
        return l2_normalize(np.stack([vectors[t] + noise * rng.standard_normal(vectors[t].shape) for t in texts]))

    return split, side(split.src), side(split.tgt)


def test_mining_near_identical_gold_gives_f1_100():
    rng = np.random.default_rng(0)
    parallel = _parallel(1200)
    vectors = {}
    for s, t in parallel:
        v = rng.standard_normal(64).astype(np.float32)
        vectors[s] = vectors[t] = v  # a translation pair shares its meaning vector; distractors are unrelated
    train, test = build_mining_task(parallel, n_gold=200, seed=3)
    result = evaluate_mining(_embed(train, vectors, rng, 0.05), _embed(test, vectors, rng, 0.05))
    assert result["f1"] >= 99.0 and result["train_f1"] >= 99.0
    assert result["n_gold"] == len(test.gold) == 100
    assert result["n_src"] == len(test.src) and result["n_tgt"] == len(test.tgt)
    assert set(result) == {"precision", "recall", "f1", "threshold", "n_gold", "n_src", "n_tgt", "train_f1"}


def test_greedy_one_to_one_never_reuses_an_index():
    rng = np.random.default_rng(1)
    hub = rng.standard_normal(16)
    src = l2_normalize(rng.standard_normal((80, 16)) + 2 * hub)  # strong hubness: many ties for the same targets
    tgt = l2_normalize(rng.standard_normal((50, 16)) + 2 * hub)
    cands = mine_candidates(src, tgt, k=4, candidates=8)
    assert len({i for i, _, _ in cands}) == len(cands) and len({j for _, j, _ in cands}) == len(cands)
    scores = [sc for _, _, sc in cands]
    assert scores == sorted(scores, reverse=True)
    # Every mined pair was proposed forward or backward, with that score.
    fwd_ids, fwd_sc = margin_retrieve(src, tgt, 4, 8)
    bwd_ids, bwd_sc = margin_retrieve(tgt, src, 4, 8)
    proposed = {(i, int(j)) for i, j in enumerate(fwd_ids)} | {(int(i), j) for j, i in enumerate(bwd_ids)}
    assert all((i, j) in proposed for i, j, _ in cands)
    # The best-scoring proposal overall is always accepted first.
    assert cands[0][2] == pytest.approx(max(fwd_sc.max(), bwd_sc.max()))


def test_mining_prf_counts():
    cands = [(0, 0, 1.5), (1, 2, 1.2), (2, 1, 1.1), (3, 3, 0.9)]
    gold = {(0, 0), (2, 1), (4, 4)}
    m = mining_prf(cands, gold, 1.1)
    assert m["precision"] == pytest.approx(200 / 3) and m["recall"] == pytest.approx(200 / 3)
    assert m["f1"] == pytest.approx(200 / 3)
    assert mining_prf(cands, gold, 9.0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


@pytest.mark.parametrize("seed", range(5))
def test_best_threshold_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 200
    scores = np.round(rng.uniform(0.8, 1.4, n), 2)  # rounding creates ties
    cands = [(i, i, float(s)) for i, s in enumerate(scores)]
    p_gold = (scores - 0.8) / 0.6
    gold = {(i, i) for i in range(n) if rng.uniform() < p_gold[i]} | {(n + 1, n + 1)}
    thr = best_threshold(cands, gold)
    brute = max(mining_prf(cands, gold, float(s))["f1"] for s in scores)
    assert mining_prf(cands, gold, thr)["f1"] == pytest.approx(brute)
    # The threshold sits at a midpoint between two distinct candidate scores (or on the lowest one).
    kept = scores[scores >= thr]
    below = scores[scores < thr]
    if below.size == 0:
        assert thr == scores.min()
    else:
        assert kept.min() > thr > below.max()
        assert thr == pytest.approx((kept.min() + below.max()) / 2)


def test_best_threshold_degenerate():
    assert best_threshold([], {(0, 0)}) == float("inf")
    assert best_threshold([(0, 1, 1.0)], {(0, 0)}) == float("inf")
