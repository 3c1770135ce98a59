"""The reports of the leave-languages-out protocol (:mod:`mlse.experiments.unrated`): ``summary.json`` and
``unrated.md`` from the result files under a folder.

``summary.json``: the shipped and the best recipe's gaps with the paired CI of the reduction, each complete recipe's
mean scores, ``without_vs_shipped`` (each *without* score minus the shipped one's, paired CI: a gap also closes when
the *with* run gets worse) and ``best_raising_without``. ``unrated.md``: an overview and the per-fold, per-pair table.
Incomplete results are listed apart, never compared or averaged in. See docs/results/unrated-languages.md.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.evaluation.sts import percentile_ci95
from mlse.experiments.distillation import unseeded
from mlse.experiments.forgetting import OUTSIDE_FLORES, OUTSIDE_TATOEBA, cell
from mlse.experiments.unrated import _file_name, recipe_side_boots
from mlse.experiments.unrated_heads import parse_head_recipe


def load_results(out: Path) -> list[dict]:
    """Every recipe's result under ``out`` (the summary, the predictions and other studies' files are not results)."""
    found = []
    for path in sorted(out.glob("*.json")):
        if path.name == "summary.json" or path.name.endswith(".predictions.json"):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "folds" in data and "recipe" in data:
            found.append(data)
    return found


def mean_scores(result: dict) -> dict:
    """The mean Spearman x 100 over a result's held-out pairs with and without their rated pairs."""
    rows = [r for f in result["folds"] for r in f["pairs"].values()]
    return {side: round(float(np.mean([r[side] for r in rows])), 2) if rows else None for side in ("with", "without")}


def write_summary(out: Path, shipped_recipe: str) -> dict:
    """``summary.json`` and ``unrated.md`` from the results under ``out`` (see the module docstring). A recipe run
    with several seeds (``NAME~sN``) is compared by its mean gap, its CI from the seeds' averaged bootstrap values."""
    shipped_recipe = unseeded(shipped_recipe)  # compared as a group: "a~s1:200-steps" names the seeds of "a:200-steps"
    results = load_results(out)
    complete = [r for r in results if r.get("complete")]
    groups: dict[str, list[dict]] = {}
    for r in complete:
        groups.setdefault(unseeded(r["recipe"]), []).append(r)
    gaps = {name: float(np.mean([r["mean_gap"] for r in rs])) for name, rs in groups.items()}
    summary: dict = {
        "shipped_recipe": shipped_recipe,
        "shipped_gap": None,
        "best_recipe": None,
        "best_gap": None,
        "gap_reduction_ci": None,
        "without_vs_shipped": {},
        "best_raising_without": None,
        "recipes": {
            r["recipe"]: {"mean_gap": r["mean_gap"], "ci95": r["mean_gap_ci95"], **mean_scores(r)} for r in complete
        },
        "seeds": {name: seed_means(out, rs) for name, rs in groups.items() if len(rs) > 1},
        "incomplete": sorted(r["recipe"] for r in results if not r.get("complete")),
    }
    if gaps:
        best = min(gaps, key=gaps.get)
        summary |= {"best_recipe": best, "best_gap": round(gaps[best], 2)}
    if shipped_recipe in gaps:
        summary["shipped_gap"] = round(gaps[shipped_recipe], 2)
        if summary["best_recipe"] != shipped_recipe:
            summary["gap_reduction_ci"] = _reduction_ci(out, groups[shipped_recipe], groups[summary["best_recipe"]])
        # A gap also closes when *with* gets worse, so every *without* score is compared with the shipped one's too.
        shipped_without = _group_boots(out, groups[shipped_recipe], side="without")
        summary["without_vs_shipped"] = {
            name: {
                "difference": round(_without(rs) - _without(groups[shipped_recipe]), 2),
                "ci95": [round(x, 2) for x in percentile_ci95(_group_boots(out, rs, side="without") - shipped_without)],
            }
            for name, rs in groups.items()
            if name != shipped_recipe
        }
        summary["best_raising_without"] = _best_raising_without(out, groups, gaps, summary)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    text = [overview(results), seeds_table(summary["seeds"]), markdown(results)]
    atomic_write_text(out / "unrated.md", "\n\n".join(t for t in text if t) + "\n")
    return summary


def _best_raising_without(out: Path, groups: dict, gaps: dict, summary: dict) -> dict | None:
    """The smallest gap among the recipes whose *without* score beats the shipped recipe's (its paired CI above zero):
    a gap closed by what a language with bitext only gains."""
    raising = [name for name, w in summary["without_vs_shipped"].items() if w["ci95"][0] > 0]
    if not raising:
        return None
    best = min(raising, key=gaps.get)
    return {
        "recipe": best,
        "gap": round(gaps[best], 2),
        "gap_reduction_ci": _reduction_ci(out, groups[summary["shipped_recipe"]], groups[best]),
        "share_of_shipped_gap": round(gaps[best] / summary["shipped_gap"], 2) if summary["shipped_gap"] else None,
    }


def _reduction_ci(out: Path, shipped: list[dict], other: list[dict]) -> list[float]:
    """The 95 % CI of the shipped recipe's gap minus another's, on the same test-pair resamples."""
    return [round(x, 2) for x in percentile_ci95(_group_boots(out, shipped) - _group_boots(out, other))]


def seed_means(out: Path, results: list[dict]) -> dict:
    """One recipe over its seeds: each seed's gap, their mean and spread (sample SD), the mean's CI over test-pair
    resamples, and the mean scores with and without."""
    gaps = [r["mean_gap"] for r in results]
    scores = [mean_scores(r) for r in results]
    return {
        "recipes": [r["recipe"] for r in results],
        "gaps": gaps,
        "mean_gap": round(float(np.mean(gaps)), 2),
        "gap_sd": round(float(np.std(gaps, ddof=1)), 2),
        "ci95": [round(x, 2) for x in percentile_ci95(_group_boots(out, results))],
        **{side: round(float(np.mean([s[side] for s in scores])), 2) for side in ("with", "without")},
    }


def seeds_table(seeds: dict) -> str:
    """Recipes run with several seeds: with, without, each seed's gap, the mean gap [CI] and the seeds' SD."""
    if not seeds:
        return ""
    lines = [
        "| recipe (mean over seeds) | seeds | with rated pairs | without | gap per seed | mean gap [95 % CI] | SD |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for name, s in sorted(seeds.items(), key=lambda kv: kv[1]["mean_gap"]):
        lo, hi = s["ci95"]
        per_seed = " / ".join(f"{g:+.1f}" for g in s["gaps"])
        lines.append(
            f"| {name} | {len(s['gaps'])} | {s['with']:.1f} | {s['without']:.1f} | {per_seed} | "
            f"{s['mean_gap']:+.1f} [{lo:+.1f}, {hi:+.1f}] | {s['gap_sd']:.1f} |"
        )
    return "\n".join(lines)


def _group_boots(out: Path, results: list[dict], side: str = "gap") -> np.ndarray:
    """The bootstrap values of a recipe's mean gap (``side="gap"``: with minus without) or of one side's mean score,
    averaged over its seeds."""
    sides = ("with", "without") if side == "gap" else (side,)
    per_run = [[_side_boots(out / f"{_file_name(r['recipe'])}.predictions.json", s) for s in sides] for r in results]
    return np.mean([b[0] - b[1] if side == "gap" else b[0] for b in per_run], axis=0)


def _side_boots(path: Path, side: str) -> np.ndarray:
    """One run's bootstrap values of ``side`` (:func:`mlse.experiments.unrated.recipe_side_boots`), computed once per
    version of its predictions file (a summary asks several times)."""
    return _side_boots_of(path, path.stat().st_mtime_ns, side)


@lru_cache(maxsize=256)
def _side_boots_of(path: Path, version: int, side: str) -> np.ndarray:
    boots = recipe_side_boots(json.loads(path.read_text(encoding="utf-8")), side)
    boots.flags.writeable = False  # shared by every caller
    return boots


def _without(results: list[dict]) -> float:
    """A recipe's mean ``without`` score over its seeds."""
    return float(np.mean([mean_scores(r)["without"] for r in results]))


def _status(result: dict) -> str:
    if result.get("complete"):
        return ""
    done, total = result.get("folds_done"), result.get("folds_total")
    folds = f"{done} of {total} folds; " if done is not None and total is not None and done < total else ""
    return f" (incomplete: {folds}not compared)"


def _unit(recipe: str) -> str:
    """What a run's ``steps`` count: a head's Stage-2 epochs, a fine-tune's steps."""
    return "epochs" if parse_head_recipe(recipe) is not None else "steps"


def overview(results: list[dict]) -> str:
    """One row per recipe: held-out languages, steps, the runs' CPU minutes (preparation, training and dev
    evaluations), mean with / without / gap [CI], and retrieval outside STS Multi MT (``–``: not recorded or scored)."""
    tat = [f"Tatoeba {lang}" for lang in OUTSIDE_TATOEBA]
    flo = [f"FLORES en-{code.split('_')[0]}" for code in OUTSIDE_FLORES]
    lines = [
        "| recipe | folds | steps or epochs (with) | CPU-min | with rated pairs | without | gap [95 % CI] | "
        + " | ".join(tat + flo)
        + " |",
        "|---|---|---:|---:|---:|---:|---:|" + "---:|" * (len(tat) + len(flo)),
    ]
    for r in sorted(results, key=lambda r: (not r.get("complete"), r.get("mean_gap", math.inf))):
        means = mean_scores(r)
        lo, hi = r["mean_gap_ci95"]
        outside = r.get("outside") or {}
        t = [(outside.get("tatoeba") or {}).get(lang, {}).get("acc_mean") for lang in OUTSIDE_TATOEBA]
        f = [(outside.get("flores") or {}).get(code, {}).get("acc_mean") for code in OUTSIDE_FLORES]
        folds = " / ".join(",".join(fold["languages"]) for fold in r["folds"])
        steps = r.get("steps_with")
        if steps is None and r["folds"]:  # a result written before the run's steps were recorded at the top
            steps = (r["folds"][0].get("steps") or {}).get("with")
        counted = "–" if steps is None else f"{steps} {_unit(r['recipe'])}"
        lines.append(
            f"| {r['recipe']}{_status(r)} | {folds} | {counted} | {cell(r.get('cpu_minutes'))}"
            f" | {cell(means['with'])} | {cell(means['without'])} | {r['mean_gap']:+.1f} [{lo:+.1f}, {hi:+.1f}] | "
            + " | ".join(cell(v) for v in t + f)
            + " |"
        )
    return "\n".join(lines)


def markdown(results: list[dict]) -> str:
    """One row per recipe and fold pair: with, without, gap [CI]; incomplete runs marked, never averaged in."""
    lines = ["| recipe | fold | pair | with rated pairs | without | gap [95 % CI] |", "|---|---|---|---:|---:|---:|"]
    for r in sorted(results, key=lambda r: (not r.get("complete"), r.get("mean_gap", math.inf))):
        mark = _status(r)
        for fold in r["folds"]:
            steps = fold.get("steps") or {}
            langs = ",".join(fold["languages"])
            if steps.get("with") is not None and steps.get("without") is not None:
                langs += f" ({steps['with']} / {steps['without']} {_unit(r['recipe'])})"
            for pair, row in fold["pairs"].items():
                lo, hi = row["ci95"]
                lines.append(
                    f"| {r['recipe']}{mark} | {langs} | {pair} | {row['with']:.1f} | {row['without']:.1f} | "
                    f"{row['gap']:+.1f} [{lo:+.1f}, {hi:+.1f}] |"
                )
        lo, hi = r["mean_gap_ci95"]
        lines.append(
            f"| **{r['recipe']}**{mark} | all | **mean** | | | **{r['mean_gap']:+.1f}** [{lo:+.1f}, {hi:+.1f}] |"
        )
    return "\n".join(lines)
