"""BUCC-like bitext mining built from parallel data, scored the way LASER and Reimers & Gurevych (2020) do.

Task (`build_mining_task`): gold translation pairs hidden in two monolingual pools among sentences with no
translation across. Mining (`mine_candidates`) is LASER's `mine_bitexts.py --mode mine --retrieval max`; the margin
threshold is tuned for F1 on train and applied to test, as for BUCC (Reimers & Gurevych 2020, Sec. 4.2).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlse.errors import MlseError
from mlse.evaluation.index import SearchFn, as_float32_matrix, knn
from mlse.evaluation.margin import margin_retrieve_both


@dataclass
class MiningSplit:
    """One side of the task: the two pools and the gold pairs as (index into src, index into tgt)."""

    src: list[str]
    tgt: list[str]
    gold: set[tuple[int, int]] = field(default_factory=set)


def _clean_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Stripped pairs without an empty side, in their given order."""
    stripped = [(s.strip(), t.strip()) for s, t in pairs]
    return [(s, t) for s, t in stripped if s and t]


def _n_train(n: int, train_fraction: float, *, at_least_one_each: bool) -> int:
    """How many of n items go to train; with at_least_one_each both splits keep one (needs n >= 2)."""
    n_train = round(n * train_fraction)
    if at_least_one_each:
        n_train = min(max(n_train, 1), n - 1)
    return n_train


def shuffled_split(
    gold: list[tuple[str, str]], src_extra: list[str], tgt_extra: list[str], rng: np.random.Generator
) -> MiningSplit:
    """Shuffle gold and distractor sentences together per side so that positions say nothing about gold."""
    src = [s for s, _ in gold] + src_extra
    tgt = [t for _, t in gold] + tgt_extra
    src_perm, tgt_perm = rng.permutation(len(src)), rng.permutation(len(tgt))  # new position -> old position
    src_pos, tgt_pos = np.argsort(src_perm), np.argsort(tgt_perm)  # old position -> new position
    pairs = {(int(src_pos[g]), int(tgt_pos[g])) for g in range(len(gold))}
    return MiningSplit(src=[src[p] for p in src_perm], tgt=[tgt[p] for p in tgt_perm], gold=pairs)


def build_mining_task(
    parallel: list[tuple[str, str]],
    *,
    n_gold: int,
    seed: int = 0,
    train_fraction: float = 0.5,
    distractors_src: Sequence[str] = (),
    distractors_tgt: Sequence[str] = (),
    gold_candidates: Sequence[tuple[str, str]] | None = None,
    src_share: float = 0.5,
) -> tuple[MiningSplit, MiningSplit]:
    """Build (train, test) mining splits from parallel sentence pairs.

    Seeded by `numpy.random.default_rng(seed)`; sentences are stripped, pairs with an empty side ignored.

    1. Gold: from the shuffled pairs (or from `gold_candidates` only, `parallel` still listing every known
       translation), up to `n_gold` pairs (s, t), s != t, whose sentences are not in the pools yet and have no
       translation in `parallel` in the opposite pool; MlseError if fewer exist.
    2. Distractors: source sides of the first `src_share` of the remaining pairs, target sides of the rest, then the
       shuffled `distractors_src` / `distractors_tgt`. Each passes the gold checks (no duplicate in its pool; no
       translation or identical string in the opposite pool), so the only cross-pool translations are gold.
    3. Gold and each side's distractors are split by `train_fraction` (one gold pair per split at least); each
       split's sides are shuffled independently, `gold` holding (src index, tgt index) pairs.
    """
    if isinstance(n_gold, bool) or not isinstance(n_gold, (int, np.integer)) or n_gold < 2:
        raise ValueError(f"n_gold must be an integer >= 2 (one gold pair per split at least), got {n_gold!r}")
    if not 0.0 < float(train_fraction) < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    if not 0.0 <= float(src_share) <= 1.0:
        raise ValueError(f"src_share must be in [0, 1], got {src_share!r}")
    rng = np.random.default_rng(seed)
    clean = _clean_pairs(parallel)
    # Gold candidates count as known translations too, in case the caller did not also list them in `parallel`.
    s2t, t2s = defaultdict(set), defaultdict(set)  # every translation of each (stripped) sentence, both ways
    for s, t in clean + list(gold_candidates or ()):
        s, t = s.strip(), t.strip()
        s2t[s].add(t)
        t2s[t].add(s)
    pool_src: set[str] = set()
    pool_tgt: set[str] = set()

    # A sentence identical to one in the opposite pool counts as its translation (names, numbers, "OK").
    def src_ok(s: str) -> bool:
        return bool(s) and s not in pool_src and s not in pool_tgt and not (s2t.get(s, set()) & pool_tgt)

    def tgt_ok(t: str) -> bool:
        return bool(t) and t not in pool_tgt and t not in pool_src and not (t2s.get(t, set()) & pool_src)

    order = rng.permutation(len(clean))
    gold: list[tuple[str, str]] = []
    used: set[int] = set()
    # (index into clean, pair) in draw order; separately given gold candidates have no index there
    given = _clean_pairs(gold_candidates or ())
    offers = (
        [(int(p), clean[p]) for p in order]
        if gold_candidates is None
        else [(None, given[p]) for p in rng.permutation(len(given))]
    )
    for p, (s, t) in offers:
        if len(gold) == n_gold:
            break
        if s == t or not src_ok(s) or not tgt_ok(t):
            continue
        pool_src.add(s)
        pool_tgt.add(t)
        gold.append((s, t))
        if p is not None:
            used.add(p)
    if gold_candidates is not None:  # set aside every copy of a gold pair in `parallel`, so src_share counts the rest
        chosen = set(gold)
        used = {int(p) for p in order if clean[p] in chosen}
    if len(gold) < n_gold:
        raise MlseError(
            f"only {len(gold)} usable distinct parallel pairs for mining, but n_gold={n_gold} was requested"
        )

    rest = [int(p) for p in order if int(p) not in used]
    half = math.ceil(len(rest) * float(src_share))  # src_share 0.5: (len + 1) // 2, the first half rounded up
    cand_src = [clean[p][0] for p in rest[:half]]
    cand_tgt = [clean[p][1] for p in rest[half:]]
    extra_src = [s.strip() for s in distractors_src]
    extra_tgt = [t.strip() for t in distractors_tgt]
    cand_src += [extra_src[i] for i in rng.permutation(len(extra_src))]
    cand_tgt += [extra_tgt[i] for i in rng.permutation(len(extra_tgt))]
    dis_src: list[str] = []
    dis_tgt: list[str] = []
    for cands, ok, pool, kept in ((cand_src, src_ok, pool_src, dis_src), (cand_tgt, tgt_ok, pool_tgt, dis_tgt)):
        for c in cands:
            if ok(c):
                pool.add(c)
                kept.append(c)

    g_train = _n_train(len(gold), train_fraction, at_least_one_each=True)
    s_train = _n_train(len(dis_src), train_fraction, at_least_one_each=False)
    t_train = _n_train(len(dis_tgt), train_fraction, at_least_one_each=False)
    train = shuffled_split(gold[:g_train], dis_src[:s_train], dis_tgt[:t_train], rng)
    test = shuffled_split(gold[g_train:], dis_src[s_train:], dis_tgt[t_train:], rng)
    return train, test


def mine_candidates(
    src_emb: np.ndarray, tgt_emb: np.ndarray, *, k: int = 4, candidates: int = 16, search: SearchFn = knn
) -> list[tuple[int, int, float]]:
    """Mined pairs (src index, tgt index, ratio-margin score), sorted by score, decreasing.

    LASER `--mode mine --retrieval max`: best ratio-margin candidate each way (among `candidates` cosine neighbours,
    neighbourhood k), union accepted greedily 1:1 (:func:`select_one_to_one`). `search`: exact by default, or
    `mlse.evaluation.index.make_search` for IVF / HNSW.
    """
    s = as_float32_matrix(src_emb, "src_emb")  # [n, d]
    t = as_float32_matrix(tgt_emb, "tgt_emb")  # [m, d]
    if s.shape[1] != t.shape[1]:
        raise ValueError(f"dimension mismatch: src_emb d={s.shape[1]}, tgt_emb d={t.shape[1]}")
    if s.shape[0] == 0 or t.shape[0] == 0:
        return []
    fwd_ids, fwd_scores, bwd_ids, bwd_scores = margin_retrieve_both(s, t, k, candidates, search=search)
    return select_one_to_one(fwd_ids, fwd_scores, bwd_ids, bwd_scores)


def select_one_to_one(
    fwd_ids: np.ndarray, fwd_scores: np.ndarray, bwd_ids: np.ndarray, bwd_scores: np.ndarray
) -> list[tuple[int, int, float]]:
    """The union of forward proposals (src i -> tgt fwd_ids[i], [n]) and backward ones (tgt j -> src bwd_ids[j],
    [m]), sorted by score and accepted greedily 1:1; a proposal with id -1 (empty approximate shortlist) is skipped.
    Returns (src index, tgt index, score) sorted by score, decreasing (ties by src, then tgt index)."""
    src, tgt, score = select_pairs(fwd_ids, fwd_scores, bwd_ids, bwd_scores)
    return list(zip(src.tolist(), tgt.tolist(), score.tolist()))


def select_pairs(
    fwd_ids: np.ndarray, fwd_scores: np.ndarray, bwd_ids: np.ndarray, bwd_scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`select_one_to_one` on arrays (mining at scale holds no tuple a pair) -> (src ids, tgt ids, scores); a
    pair proposed both ways counts once, with its higher score."""
    fwd_ids, bwd_ids = np.asarray(fwd_ids, dtype=np.int64), np.asarray(bwd_ids, dtype=np.int64)
    f_ok, b_ok = fwd_ids >= 0, bwd_ids >= 0
    src = np.concatenate([np.flatnonzero(f_ok), bwd_ids[b_ok]])
    tgt = np.concatenate([fwd_ids[f_ok], np.flatnonzero(b_ok)])
    score = np.concatenate([np.asarray(fwd_scores)[f_ok], np.asarray(bwd_scores)[b_ok]]).astype(np.float64)
    order = np.lexsort((-score, tgt, src))  # by pair, its best score first
    src, tgt, score = src[order], tgt[order], score[order]
    first = np.ones(len(src), dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (tgt[1:] != tgt[:-1])
    src, tgt, score = src[first], tgt[first], score[first]
    order = np.lexsort((tgt, src, -score))
    src, tgt, score = src[order], tgt[order], score[order]
    used_src, used_tgt = bytearray(len(fwd_ids)), bytearray(len(bwd_ids))
    keep = np.zeros(len(src), dtype=bool)
    for t, (i, j) in enumerate(zip(src.tolist(), tgt.tolist())):
        if not used_src[i] and not used_tgt[j]:
            used_src[i] = used_tgt[j] = 1
            keep[t] = True
    return src[keep], tgt[keep], score[keep]


def mining_prf(candidates: list[tuple[int, int, float]], gold: set[tuple[int, int]], threshold: float) -> dict:
    """Precision, recall, F1 (percent) of the candidates with score >= threshold against the gold pairs.
    Nothing kept -> precision 0; no gold -> recall 0; F1 is 0 when precision + recall is 0."""
    kept = [(i, j) for i, j, sc in candidates if sc >= threshold]
    tp = sum(1 for pair in kept if pair in gold)
    precision = 100.0 * tp / len(kept) if kept else 0.0
    recall = 100.0 * tp / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def best_threshold(candidates: list[tuple[int, int, float]], gold: set[tuple[int, int]]) -> float:
    """The threshold that, used in `mining_prf`, gives the highest F1 on these candidates.

    Cuts only fall between distinct scores; among equal F1 the highest cut wins. As in LASER's BUCC tool
    (tasks/bucc/bucc.py) it returns the midpoint between the lowest kept score and the next lower one (the lowest
    score when all are kept). +inf (keep nothing) when there are no candidates or none is gold.
    """
    if not candidates:
        return float("inf")
    scores = np.array([sc for _, _, sc in candidates], dtype=np.float64)  # [c]
    hits = np.array([(i, j) in gold for i, j, _ in candidates], dtype=np.float64)  # [c]
    order = np.argsort(-scores, kind="stable")
    scores, hits = scores[order], hits[order]
    tp = np.cumsum(hits)  # [c] true positives when keeping the top p+1
    kept = np.arange(1, len(scores) + 1)  # [c]
    f1 = 2 * tp / (kept + len(gold))  # [c] = 2PR/(P+R) written with counts
    valid = np.append(scores[1:] < scores[:-1], True)  # last index of each run of equal scores
    f1 = np.where(valid, f1, -1.0)
    p = int(np.argmax(f1))
    if f1[p] <= 0:
        return float("inf")
    if p + 1 == len(scores):
        return float(scores[p])
    return float((scores[p] + scores[p + 1]) / 2)


def split_half_prf(
    candidates: list[tuple[int, int, float]], gold: set[tuple[int, int]], n_src: int, *, seed: int = 0
) -> dict:
    """P / R / F1 (percent) at a threshold chosen on held-out sentences of the same mined pool.

    Source sentences are split into two seeded halves: the threshold is tuned on the first and applied to the second.
    Both halves were mined together, so margin scores (which depend on pool size) share one distribution. Returns
    {"precision", "recall", "f1", "threshold", "tune_f1", "n_gold"} (n_gold of the evaluated half).
    """
    in_a = np.zeros(n_src, dtype=bool)
    in_a[np.random.default_rng(seed).permutation(n_src)[: n_src // 2]] = True
    tune_c = [c for c in candidates if in_a[c[0]]]
    eval_c = [c for c in candidates if not in_a[c[0]]]
    tune_g = {g for g in gold if in_a[g[0]]}
    eval_g = {g for g in gold if not in_a[g[0]]}
    threshold = best_threshold(tune_c, tune_g)
    out = mining_prf(eval_c, eval_g, threshold)
    out.update({"threshold": threshold, "tune_f1": mining_prf(tune_c, tune_g, threshold)["f1"], "n_gold": len(eval_g)})
    return out


def _mine_split(split: tuple[MiningSplit, np.ndarray, np.ndarray], name: str, k: int, candidates: int) -> list:
    data, src_emb, tgt_emb = split
    if len(data.src) != np.shape(src_emb)[0] or len(data.tgt) != np.shape(tgt_emb)[0]:
        raise ValueError(
            f"{name}: {len(data.src)} / {len(data.tgt)} sentences but {np.shape(src_emb)[0]} / "
            f"{np.shape(tgt_emb)[0]} embedding rows"
        )
    return mine_candidates(src_emb, tgt_emb, k=k, candidates=candidates)


def evaluate_mining(
    train: tuple[MiningSplit, np.ndarray, np.ndarray],
    test: tuple[MiningSplit, np.ndarray, np.ndarray],
    *,
    k: int = 4,
    candidates: int = 16,
) -> dict:
    """BUCC protocol: tune the margin threshold for F1 on train, report P / R / F1 (percent) on test.

    Each argument is (split, src embeddings [n_src, d], tgt embeddings [n_tgt, d]). Returns {"precision", "recall",
    "f1", "threshold", "n_gold", "n_src", "n_tgt", "train_f1"}; the counts describe the test split.
    """
    train_cands = _mine_split(train, "train", k, candidates)
    threshold = best_threshold(train_cands, train[0].gold)
    train_f1 = mining_prf(train_cands, train[0].gold, threshold)["f1"]
    test_cands = _mine_split(test, "test", k, candidates)
    result = mining_prf(test_cands, test[0].gold, threshold)
    result.update(
        threshold=threshold, n_gold=len(test[0].gold), n_src=len(test[0].src), n_tgt=len(test[0].tgt), train_f1=train_f1
    )
    return result
