"""Retrieval error analysis for the app's Tatoeba view (pure numpy; no gradio, no encoder).

One query's nearest neighbours with ratio margins, and which queries one scorer fixes or breaks relative to another
(from :func:`mlse.evaluation.retrieval.retrieval_errors` dicts).
"""

from __future__ import annotations

import numpy as np

from mlse.evaluation.index import as_float32_matrix, knn
from mlse.evaluation.margin import neighbourhood_means, ratio_margin_scores


def query_neighbours(queries: np.ndarray, base: np.ndarray, index: int, *, k: int = 10, margin_k: int = 4) -> dict:
    """The k cosine nearest neighbours of ``queries[index]`` among ``base``, with ratio margins, and the gold's place.

    queries [n, d] and base [n, d]: aligned, L2-normalised. Returns {"ids" [k], "cosine" [k], "margin" [k],
    "gold_cosine", "gold_margin", "gold_rank_cosine", "gold_rank_margin"} (1-based over all of base; ties favour gold).
    """
    q = as_float32_matrix(queries, "queries")  # [n, d]
    b = as_float32_matrix(base, "base")  # [n, d]
    if q.shape != b.shape:
        raise ValueError(f"queries and base must be aligned (same shape), got {q.shape} and {b.shape}")
    if not 0 <= index < q.shape[0]:
        raise ValueError(f"query index {index} is out of range 0..{q.shape[0] - 1}")
    means = neighbourhood_means(q, b, margin_k)  # ([n], [n])
    sims, ids = knn(q[index : index + 1], b, k)  # [1, k], [1, k]
    cos_all = b @ q[index]  # [n]
    marg_all = ratio_margin_scores(q[index : index + 1], b, margin_k, means=(means[0][index : index + 1], means[1]))[0]
    return {
        "ids": ids[0],
        "cosine": sims[0],
        "margin": marg_all[ids[0]],
        "gold_cosine": float(cos_all[index]),
        "gold_margin": float(marg_all[index]),
        "gold_rank_cosine": int(1 + np.sum(cos_all > cos_all[index])),
        "gold_rank_margin": int(1 + np.sum(marg_all > marg_all[index])),
    }


def compare_errors(errors_a: dict[str, list[dict]], errors_b: dict[str, list[dict]]) -> tuple[list[dict], dict]:
    """Queries that scorer B gets right and A wrong ("fixed by B"), and the reverse ("broken by B").

    errors_a / errors_b: direction -> ``retrieval_errors`` dicts for the same corpus; a query is (direction, index).
    Returns (rows, counts): a row per changed query (change, direction, index, query, gold, retrieved_a,
    retrieved_b); counts: fixed, broken, both_wrong.
    """
    rows: list[dict] = []
    counts = {"fixed": 0, "broken": 0, "both_wrong": 0}
    for direction in sorted(set(errors_a) | set(errors_b)):
        a = {e["index"]: e for e in errors_a.get(direction, [])}
        b = {e["index"]: e for e in errors_b.get(direction, [])}
        counts["both_wrong"] += len(a.keys() & b.keys())
        for change, wrong, other in (("fixed by B", a, b), ("broken by B", b, a)):
            for i in sorted(wrong.keys() - other.keys()):
                e = wrong[i]
                retrieved_a, retrieved_b = (e["retrieved"], e["gold"]) if wrong is a else (e["gold"], e["retrieved"])
                rows.append(
                    {
                        "change": change,
                        "direction": direction,
                        "index": i,
                        "query": e["query"],
                        "gold": e["gold"],
                        "retrieved_a": retrieved_a,
                        "retrieved_b": retrieved_b,
                    }
                )
                counts["fixed" if wrong is a else "broken"] += 1
    return rows, counts
