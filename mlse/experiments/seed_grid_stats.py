"""The seed grid's numbers from its per-pair scores: each variant's Pearson relative to the baseline, its group means
(the pairs Stage 2 trains on, the held-out pairs), and the change over seeds with its seed standard deviation and
verdict (:func:`verdict`: a change is called only beyond twice the seed deviation).

Pure functions on ``{variant: {pair: {"pearson": ..., "spearman": ...}}}`` (per seed for ``seed_scores``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mlse.data.pairs import HELD_OUT_PAIRS, STAGE2_PAIRS

# the groups of pairs a change is summarised over ("all": every pair scored)
GROUPS = {"stage2-train": STAGE2_PAIRS, "held-out": HELD_OUT_PAIRS, "en-en": ["en-en"], "all": None}


def seed_summary(baseline: dict[str, dict], seed_scores: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Per variant and group (trained pairs, held-out pairs, EN-EN alone, every pair): the change of mean Pearson and
    Spearman against the baseline for each seed, their mean, standard deviation and :func:`verdict`."""
    return {variant: group_changes(by_seed, lambda seed: baseline) for variant, by_seed in seed_scores.items()}


def group_changes(by_seed: dict[str, dict], reference_of: Callable[[str], dict]) -> dict[str, dict]:
    """Per group of pairs and metric (``"held-out/pearson"`` ...): each seed's change of the mean score against
    ``reference_of(seed)``, summarised by :func:`summarise`; a group with no pair in common is left out."""
    row: dict[str, dict] = {}
    for group, members in GROUPS.items():
        for metric in ("pearson", "spearman"):
            deltas = []
            for seed, scores in by_seed.items():
                ref = reference_of(seed)
                present = [p for p in (members or scores) if p in scores and p in ref]
                if present:
                    deltas.append(float(np.mean([scores[p][metric] - ref[p][metric] for p in present])))
            if deltas:
                row[f"{group}/{metric}"] = summarise(deltas)
    return row


def summarise(deltas: list[float]) -> dict:
    """Mean and sample standard deviation of per-seed changes, with the verdict on them."""
    mean = float(np.mean(deltas))
    sd = float(np.std(deltas, ddof=1)) if len(deltas) > 1 else float("nan")
    return {"deltas": deltas, "mean": mean, "sd": sd, "verdict": verdict(mean, sd)}


def verdict(mean: float, sd: float) -> str:
    """ "better" / "worse" when the mean change exceeds twice its seed standard deviation, else "within seed noise"
    ("one seed" when there is no deviation to compare with)."""
    if not np.isfinite(sd):
        return "one seed"
    if abs(mean) > 2 * sd:
        return "better" if mean > 0 else "worse"
    return "within seed noise"


def relative_pearson(scores: dict[str, dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Pearson of each variant minus the baseline's, per pair (the seed's figures)."""
    base = scores["baseline"]
    return {v: {p: s[p]["pearson"] - base[p]["pearson"] for p in s} for v, s in scores.items() if v != "baseline"}


def group_means(scores: dict[str, dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Mean Pearson over the Stage-2 training pairs and over the held-out pairs, per variant."""
    out = {}
    for v, s in scores.items():
        row = {}
        for group, members in (("stage2-train", STAGE2_PAIRS), ("held-out", HELD_OUT_PAIRS)):
            present = [p for p in members if p in s]
            row[group] = float(np.mean([s[p]["pearson"] for p in present])) if present else float("nan")
        out[v] = row
    return out
