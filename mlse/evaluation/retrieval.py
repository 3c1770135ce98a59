"""Tatoeba-style retrieval on aligned sentence lists (row i of the source translates row i of the target).

Accuracy (Artetxe & Schwenk 2019, Reimers & Gurevych 2020, Park et al.): percent of queries whose retrieved target,
by cosine or by ratio margin (`mlse.evaluation.margin`), is the gold one.

xSIM (Heffernan et al. 2022; LASER's `source/xsim.py`, margin="ratio"): each x_i's k (=4) cosine nearest targets are
re-ranked by ratio margin (neighbourhood k); error = 100 x (#i whose best is not target i) / n, on indices, xx as
source. It differs from `acc_to_en_margin` only in the shortlist: k candidates vs 16.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mlse.evaluation.index import as_float32_matrix, knn
from mlse.evaluation.margin import margin_both_ways, margin_retrieve, ratio_margin_scores, row_means

# Cosine shortlist that margin retrieval re-ranks.
MARGIN_CANDIDATES = 16


def _aligned(src_emb: np.ndarray, tgt_emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = as_float32_matrix(src_emb, "src_emb")  # [n, d]
    t = as_float32_matrix(tgt_emb, "tgt_emb")  # [n, d]
    if s.shape != t.shape:
        raise ValueError(f"src_emb and tgt_emb must be aligned (same shape), got {s.shape} and {t.shape}")
    if s.shape[0] == 0:
        raise ValueError("empty embeddings: nothing to retrieve")
    return s, t


def retrieval_accuracy(src_emb: np.ndarray, tgt_emb: np.ndarray, *, margin: bool = False, k: int = 4) -> float:
    """Percent of i whose retrieved target (src i queries all targets) is target i.

    margin=True: highest ratio margin (neighbourhood k) among the `MARGIN_CANDIDATES` cosine nearest; else cosine.
    """
    s, t = _aligned(src_emb, tgt_emb)
    ids = margin_retrieve(s, t, k=k, candidates=MARGIN_CANDIDATES)[0] if margin else knn(s, t, 1)[1][:, 0]  # [n]
    return float(100.0 * np.mean(ids == np.arange(s.shape[0])))


def xsim_error(src_emb: np.ndarray, tgt_emb: np.ndarray, k: int = 4) -> float:
    """xSIM error rate in percent (LASER xsim.py, ratio margin): see the module docstring for the definition."""
    s, t = _aligned(src_emb, tgt_emb)
    ids, _ = margin_retrieve(s, t, k=k, candidates=k)  # [n]
    return float(100.0 * np.mean(ids != np.arange(s.shape[0])))


class Neighbours(NamedTuple):
    """Cosine neighbour lists of aligned src / tgt embeddings, searched once for every Tatoeba number and error list.

    ``fwd`` (src->tgt) and ``bwd`` (tgt->src) are (sims [n, c], ids [n, c]) with c = max(k, MARGIN_CANDIDATES).
    ``nearest_fwd`` / ``nearest_bwd`` [n] come from a k=1 search, because faiss breaks exact ties (identical
    embeddings) differently at k=1 than at k=16.
    """

    fwd: tuple[np.ndarray, np.ndarray]
    bwd: tuple[np.ndarray, np.ndarray]
    nearest_fwd: np.ndarray
    nearest_bwd: np.ndarray


def neighbour_lists(src_emb: np.ndarray, tgt_emb: np.ndarray, k: int = 4) -> Neighbours:
    """Four searches per language pair instead of one or two per number (see :class:`Neighbours`)."""
    s, t = _aligned(src_emb, tgt_emb)
    depth = max(k, MARGIN_CANDIDATES)
    return Neighbours(knn(s, t, depth), knn(t, s, depth), knn(s, t, 1)[1][:, 0], knn(t, s, 1)[1][:, 0])


def tatoeba_metrics(
    src_emb: np.ndarray, tgt_emb: np.ndarray, k: int = 4, *, neighbours: Neighbours | None = None
) -> dict:
    """All Tatoeba numbers (percent) for aligned xx (src) and English (tgt) embeddings.

    acc_to_en: xx queries English; acc_from_en: English queries xx; acc_mean: their mean (the figure Park et al.
    report). The `_margin` variants retrieve by ratio margin. xsim_error: LASER's xSIM with xx as source.
    ``neighbours``: :func:`neighbour_lists` of the same embeddings, when the caller has them already.
    """
    s, _ = _aligned(src_emb, tgt_emb)
    nb = neighbours if neighbours is not None else neighbour_lists(src_emb, tgt_emb, k)
    gold = np.arange(s.shape[0])

    def percent(ids: np.ndarray) -> float:
        return float(100.0 * np.mean(ids == gold))

    to_en, from_en = percent(nb.nearest_fwd), percent(nb.nearest_bwd)
    to_en_ids, _, from_en_ids, _ = margin_both_ways(nb.fwd, nb.bwd, k, MARGIN_CANDIDATES)
    xsim_ids = margin_both_ways(nb.fwd, nb.bwd, k, k)[0]  # the shortlist is the k nearest: LASER's xSIM
    to_en_m, from_en_m = percent(to_en_ids), percent(from_en_ids)
    return {
        "acc_to_en": to_en,
        "acc_from_en": from_en,
        "acc_mean": (to_en + from_en) / 2,
        "acc_to_en_margin": to_en_m,
        "acc_from_en_margin": from_en_m,
        "acc_mean_margin": (to_en_m + from_en_m) / 2,
        "xsim_error": float(100.0 * np.mean(xsim_ids != gold)),
    }


def retrieval_errors(
    src_texts: list[str],
    tgt_texts: list[str],
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    *,
    direction: str = "to_en",
    k: int = 4,
    margin: bool = False,
    neighbours: Neighbours | None = None,
) -> list[dict]:
    """One dict per wrongly retrieved query, for the app's error browser.

    direction="to_en": xx queries English; "from_en": the reverse; retrieval as in `retrieval_accuracy`. Each dict:
    index, query, retrieved, gold (texts), sim_retrieved / sim_gold (cosine), margin_retrieved / margin_gold (ratio
    margin), rank_of_gold (1-based under the criterion used; ties favour gold). ``neighbours``: as for
    :func:`tatoeba_metrics`.
    """
    s, t = _aligned(src_emb, tgt_emb)
    if len(src_texts) != s.shape[0] or len(tgt_texts) != t.shape[0]:
        raise ValueError(
            f"texts and embeddings differ in length: {len(src_texts)} / {len(tgt_texts)} texts, {s.shape[0]} rows"
        )
    if direction not in ("to_en", "from_en"):
        raise ValueError(f"direction must be 'to_en' or 'from_en', got {direction!r}")
    nb = neighbours if neighbours is not None else neighbour_lists(s, t, k)
    if direction == "to_en":
        q, b, q_texts, b_texts, q_nn, b_nn, nearest = s, t, src_texts, tgt_texts, nb.fwd, nb.bwd, nb.nearest_fwd
    else:
        q, b, q_texts, b_texts, q_nn, b_nn, nearest = t, s, tgt_texts, src_texts, nb.bwd, nb.fwd, nb.nearest_bwd
    n = q.shape[0]
    ids = margin_both_ways(q_nn, b_nn, k, MARGIN_CANDIDATES)[0] if margin else nearest  # [n]
    wrong = np.flatnonzero(ids != np.arange(n))  # [w]
    if wrong.size == 0:
        return []
    means = row_means(q_nn[0], k), row_means(b_nn[0], k)  # ([n], [n]) ratio-margin neighbourhood terms
    sims = q[wrong] @ b.T  # [w, n] cosines of the wrong queries to every candidate
    margins = ratio_margin_scores(q[wrong], b, k, means=(means[0][wrong], means[1]))  # [w, n]
    crit = margins if margin else sims  # [w, n]
    rows = np.arange(wrong.size)
    gold_crit = crit[rows, wrong]  # [w]
    ranks = 1 + np.sum(crit > gold_crit[:, None], axis=1)  # [w]
    return [
        {
            "index": int(i),
            "query": q_texts[i],
            "retrieved": b_texts[j],
            "gold": b_texts[i],
            "sim_retrieved": float(sims[r, j]),
            "sim_gold": float(sims[r, i]),
            "margin_retrieved": float(margins[r, j]),
            "margin_gold": float(margins[r, i]),
            "rank_of_gold": int(ranks[r]),
        }
        for r, (i, j) in enumerate(zip(wrong, ids[wrong].tolist()))
    ]
