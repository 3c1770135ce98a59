"""The reports of the leave-languages-out protocol (:mod:`mlse.experiments.unrated`): ``summary.json`` and
``unrated.md`` from the result files under a folder.

``summary.json`` names the shipped recipe's gap, the best recipe's (smallest mean gap) and the paired CI of the
reduction (shipped minus best gap, on the same bootstrap resamples), plus every complete recipe's mean score with and
without the held-out languages' rated pairs. ``unrated.md`` has an overview (one row per recipe: with, without, gap,
and the languages outside STS Multi MT where they were scored) and the per-fold, per-pair table. A result marked
incomplete (a run stopped before its end, or folds still missing) is listed apart and never compared or averaged in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.evaluation.sts import percentile_ci95
from mlse.experiments.forgetting import OUTSIDE_FLORES, OUTSIDE_TATOEBA
from mlse.experiments.unrated import _file_name, recipe_gap_boots
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
    return {
        "with": round(float(np.mean([r["with"] for r in rows])), 2) if rows else None,
        "without": round(float(np.mean([r["without"] for r in rows])), 2) if rows else None,
    }


def write_summary(out: Path, shipped_recipe: str) -> dict:
    """``summary.json`` and ``unrated.md`` from the results under ``out`` (see the module docstring)."""
    results = load_results(out)
    complete = [r for r in results if r.get("complete")]
    by_name = {r["recipe"]: r for r in complete}
    summary: dict = {
        "shipped_recipe": shipped_recipe,
        "shipped_gap": None,
        "best_recipe": None,
        "best_gap": None,
        "gap_reduction_ci": None,
        "recipes": {
            r["recipe"]: {"mean_gap": r["mean_gap"], "ci95": r["mean_gap_ci95"], **mean_scores(r)} for r in complete
        },
        "incomplete": sorted(r["recipe"] for r in results if not r.get("complete")),
    }
    if complete:
        best = min(complete, key=lambda r: r["mean_gap"])
        summary |= {"best_recipe": best["recipe"], "best_gap": best["mean_gap"]}
    if shipped_recipe in by_name:
        summary["shipped_gap"] = by_name[shipped_recipe]["mean_gap"]
        if summary["best_recipe"] and summary["best_recipe"] != shipped_recipe:
            shipped_boots = recipe_gap_boots(_predictions(out, shipped_recipe))
            best_boots = recipe_gap_boots(_predictions(out, summary["best_recipe"]))
            summary["gap_reduction_ci"] = [round(x, 2) for x in percentile_ci95(shipped_boots - best_boots)]
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(out / "unrated.md", overview(results) + "\n\n" + markdown(results) + "\n")
    return summary


def _predictions(out: Path, recipe: str) -> dict:
    return json.loads((out / f"{_file_name(recipe)}.predictions.json").read_text(encoding="utf-8"))


def _status(result: dict) -> str:
    if result.get("complete"):
        return ""
    done, total = result.get("folds_done"), result.get("folds_total")
    folds = f"{done} of {total} folds; " if done is not None and total is not None and done < total else ""
    return f" (incomplete: {folds}not compared)"


def _unit(recipe: str) -> str:
    """What a run's ``steps`` count: a head's Stage-2 epochs, a fine-tune's steps."""
    return "epochs" if parse_head_recipe(recipe) is not None else "steps"


def _cell(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"


def overview(results: list[dict]) -> str:
    """One row per recipe: held-out languages, steps, mean with / without / gap [CI] over the held-out pairs, and
    Tatoeba and FLORES-200 en-X retrieval on the languages outside STS Multi MT (``–``: not scored)."""
    tat = [f"Tatoeba {lang}" for lang in OUTSIDE_TATOEBA]
    flo = [f"FLORES en-{code.split('_')[0]}" for code in OUTSIDE_FLORES]
    lines = [
        "| recipe | folds | steps or epochs (with) | with rated pairs | without | gap [95 % CI] | "
        + " | ".join(tat + flo)
        + " |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * (len(tat) + len(flo)),
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
            f"| {r['recipe']}{_status(r)} | {folds} | {counted}"
            f" | {_cell(means['with'])} | {_cell(means['without'])} | {r['mean_gap']:+.1f} [{lo:+.1f}, {hi:+.1f}] | "
            + " | ".join(_cell(v) for v in t + f)
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
