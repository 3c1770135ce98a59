"""Languages without rated pairs: how much cross-lingual STS a language loses when it has bitext but no rated pairs.

The seed study's premise is that human-rated pairs are scarce outside a few languages. STS Multi MT rates pairs in all
of its ten non-English languages, so the study simulates their absence (``python -m mlse experiment unrated``):

* **Folds.** The non-English languages are split into folds (:data:`DEFAULT_FOLDS`: three folds of three; ``ja``,
  which no test pair uses, stays rated in every fold). For each fold the recipe is trained twice on the same bitext:
  *with* every language's rated pairs (the recipe as the distillation study runs it, once for all folds) and
  *without* the fold's: its languages leave every STS term (``sts_langs``) and the dev pairs that pick the checkpoint
  (:func:`fold_dev_pairs`: en-en and four en-X of languages still rated). Their bitext stays.
* **Evaluation.** Cross-lingual STS Multi MT test pairs that involve a fold language (:func:`fold_eval_pairs`: en-X
  for each of them, and the 17-pair test set's X-Y pairs with one of them), Spearman x 100 for both runs; the *gap*
  is with minus without. Its 95 % CI comes from a paired bootstrap: both runs are scored on the same resamples of the
  test rows, and since row ``i`` is the same sentence pair in every language, one resample of rows serves every pair
  of a fold (a cluster bootstrap over source rows); the mean gap's CI averages over pairs within each resample.
* **Recipes** are the distillation study's (:mod:`mlse.experiments.distillation`, e.g. ``sts-cosent+lora@10``), so a
  recipe means the same here as there; ``--budget-minutes`` overrides each run's budget.

A recipe's results go to ``<out>/<recipe>.json`` (per fold, per pair) with its predictions beside it
(``<recipe>.predictions.json``), ``<out>/unrated.md`` tabulates every recipe, and ``<out>/summary.json`` names the
shipped recipe's gap, the best recipe's gap and the CI of the reduction (:func:`write_summary`). A run that stopped
before its budget (Stop, a crash) is marked incomplete and left out of the tables and the summary, never mixed in.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.data.layout import STS_LANGS
from mlse.data.pairs import SEED_AND_CROSS_PAIRS, STUDY_DEV_PAIRS
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts
from mlse.evaluation.sts import bootstrap_spearman, percentile_ci95, spearman
from mlse.experiments.distillation import config_changed, recipe_config
from mlse.models import load_model
from mlse.train.finetune import finetune

log = logging.getLogger(__name__)

RATED_ALWAYS = ("en",)  # the teacher side of every pair: never held out
DEFAULT_FOLDS: tuple[tuple[str, ...], ...] = (("de", "nl", "pl"), ("es", "it", "ru"), ("fr", "pt", "zh"))
DEV_PREFERENCE = ("de", "fr", "ru", "zh", "es", "it", "nl", "pl", "pt", "ja")  # the study's dev pairs first
N_BOOT = 1000
SHIPPED_RECIPE = "shipped"  # the name under which the shipped soup's recipe is recorded (see the docs page)


# ------------------------------------------------------------------------------------------------------ the folds
def parse_folds(spec: str | Sequence[Sequence[str]] | None) -> list[tuple[str, ...]]:
    """Folds from ``"de,nl,pl/es,it,ru"`` (or lists); None: :data:`DEFAULT_FOLDS`. An unknown or held-always
    language, one named twice, or an empty fold is an MlseError naming it."""
    if spec is None:
        return [tuple(f) for f in DEFAULT_FOLDS]
    raw = [part.split(",") for part in spec.split("/")] if isinstance(spec, str) else [list(f) for f in spec]
    folds, seen = [], set()
    for k, fold in enumerate(raw, 1):
        langs = tuple(lang.strip() for lang in fold if lang.strip())
        if not langs:
            raise MlseError(f"fold {k} is empty; give each fold one or more languages, e.g. de,nl,pl/es,it,ru")
        for lang in langs:
            if lang in RATED_ALWAYS:
                raise MlseError(f"fold {k}: {lang!r} is the teacher side of every pair and cannot be held out")
            if lang not in STS_LANGS:
                known = ", ".join(lang for lang in STS_LANGS if lang not in RATED_ALWAYS)
                raise MlseError(f"fold {k}: unknown language code {lang!r}; STS Multi MT has {known}")
            if lang in seen:
                raise MlseError(f"fold {k}: {lang!r} is already in another fold")
            seen.add(lang)
        folds.append(langs)
    return folds


def fold_sts_langs(fold: Sequence[str]) -> list[str]:
    """The languages whose rated pairs stay in training: every STS Multi MT language but the fold's."""
    return [lang for lang in STS_LANGS if lang not in fold]


def fold_dev_pairs(fold: Sequence[str], n: int = len(STUDY_DEV_PAIRS) - 1) -> list[str]:
    """The dev pairs that pick the checkpoint without the fold: en-en and ``n`` en-X of languages still rated."""
    rated = [lang for lang in DEV_PREFERENCE if lang not in fold]
    return ["en-en", *(f"en-{lang}" for lang in rated[:n])]


def fold_eval_pairs(fold: Sequence[str]) -> list[str]:
    """Cross-lingual test pairs involving the fold: en-X for each fold language, then the test set's X-Y pairs with
    one of them."""
    english = [f"en-{lang}" for lang in fold]
    others = [
        p for p in SEED_AND_CROSS_PAIRS if "en" not in p.split("-") and any(lang in p.split("-") for lang in fold)
    ]
    return english + [p for p in others if p not in english]


def fold_overrides(fold: Sequence[str]) -> dict:
    """What the *without* run changes in a recipe: no rated pairs of the fold, in training or in the dev pick."""
    return {"sts_langs": fold_sts_langs(fold), "dev_pairs": fold_dev_pairs(fold)}


# -------------------------------------------------------------------------------------------------------- the gaps
def pair_gaps(with_preds: dict, without_preds: dict, gold: dict, pairs: Sequence[str], *, n_boot: int = N_BOOT):
    """Per pair: Spearman x 100 with and without, the gap and its paired CI; plus the mean gap over ``pairs`` with its
    CI and the mean gap's bootstrap values (to compare recipes on the same resamples)."""
    table, boots = {}, []
    for pair in pairs:
        g = np.asarray(gold[pair], dtype=np.float64)
        a, b = np.asarray(with_preds[pair]), np.asarray(without_preds[pair])
        diff = bootstrap_spearman(a, g, n_boot=n_boot, seed=0) - bootstrap_spearman(b, g, n_boot=n_boot, seed=0)
        with_s, without_s = 100.0 * spearman(a, g), 100.0 * spearman(b, g)
        table[pair] = {
            "with": round(with_s, 2),
            "without": round(without_s, 2),
            "gap": round(with_s - without_s, 2),
            "ci95": [round(x, 2) for x in percentile_ci95(diff)],
        }
        boots.append(diff)
    mean_boots = np.nanmean(np.stack(boots), axis=0) if boots else np.array([math.nan])
    mean_gap = float(np.mean([row["gap"] for row in table.values()])) if table else math.nan
    return table, round(mean_gap, 2), [round(x, 2) for x in percentile_ci95(mean_boots)], mean_boots


def recipe_gap_boots(predictions: dict, n_boot: int = N_BOOT) -> np.ndarray:
    """The mean gap over every fold's pairs on each bootstrap resample (same seed: comparable across recipes)."""
    boots = []
    for fold in predictions["folds"]:
        pairs = list(fold["gold"])
        _, _, _, b = pair_gaps(fold["with"], fold["without"], fold["gold"], pairs, n_boot=n_boot)
        boots.append((b, len(pairs)))
    total = sum(n for _, n in boots)
    return sum(b * n for b, n in boots) / total


# ------------------------------------------------------------------------------------------------------- a recipe
def run_unrated(
    name: str,
    recipe: dict,
    *,
    folds: Sequence[Sequence[str]],
    train: Callable[[str, dict, dict], dict],
    predict: Callable[[str, list[str]], dict],
    out: Path,
    say: Callable[[str], None] | None = None,
) -> dict:
    """Run the protocol for one recipe and write ``<out>/<name>.json`` and ``<name>.predictions.json``.

    ``train(run_name, recipe, overrides) -> {"run": folder, "complete": bool}`` trains (or finds) one run;
    ``predict(run_folder, pairs) -> {"gold": {pair: scores}, "pred": {pair: cosines}}`` scores STS test pairs. Both
    are injected so the protocol is tested on a tiny model and the CLI passes the real training and evaluation.
    """
    say = say or (lambda msg: log.info("%s", msg))
    with_run = train(f"{name}/all", recipe, {})
    result = {"recipe": name, "folds": [], "complete": bool(with_run["complete"])}
    predictions = {"recipe": name, "folds": []}
    every_pair = sorted({p for fold in folds for p in fold_eval_pairs(fold)})
    with_scored = predict(with_run["run"], every_pair)
    for k, fold in enumerate(folds, 1):
        pairs = fold_eval_pairs(fold)
        say(f"{name}: fold {k} ({', '.join(fold)}): training without their rated pairs")
        without_run = train(f"{name}/without-{'-'.join(fold)}", recipe, fold_overrides(fold))
        scored = predict(without_run["run"], pairs)
        gold = {p: with_scored["gold"][p] for p in pairs}
        table, mean_gap, ci, _ = pair_gaps(with_scored["pred"], scored["pred"], gold, pairs)
        complete = bool(with_run["complete"] and without_run["complete"])
        result["folds"].append(
            {
                "languages": list(fold),
                "sts_langs": fold_sts_langs(fold),
                "dev_pairs": fold_dev_pairs(fold),
                "pairs": table,
                "mean_gap": mean_gap,
                "mean_gap_ci95": ci,
                "complete": complete,
                "runs": {"with": Path(with_run["run"]).name, "without": Path(without_run["run"]).name},
                "steps": {"with": with_run.get("steps"), "without": without_run.get("steps")},
            }
        )
        result["complete"] = result["complete"] and complete
        predictions["folds"].append(
            {
                "languages": list(fold),
                "gold": _rounded(gold),
                "with": _rounded({p: with_scored["pred"][p] for p in pairs}),
                "without": _rounded(scored["pred"]),
            }
        )
    boots = recipe_gap_boots(predictions)
    result["mean_gap"] = round(float(np.mean([r["gap"] for f in result["folds"] for r in f["pairs"].values()])), 2)
    result["mean_gap_ci95"] = [round(x, 2) for x in percentile_ci95(boots)]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{_file_name(name)}.predictions.json", json.dumps(predictions) + "\n")
    atomic_write_text(out / f"{_file_name(name)}.json", json.dumps(result, indent=1) + "\n")
    return result


def _rounded(values: dict) -> dict:
    return {p: [round(float(x), 5) for x in v] for p, v in values.items()}


def _file_name(recipe: str) -> str:
    return recipe.replace("/", "_").replace("@", "_at_")


def study_trainer(runs: Path, *, data_dir=None, say: Callable[[str], None] | None = None, **settings):
    """``train`` for :func:`run_unrated`: the distillation study's training of a recipe (``settings`` override it,
    e.g. ``budget_minutes``), into ``runs/<run name>``; a finished run with the same settings is reused."""
    say = say or (lambda msg: log.info("%s", msg))

    def train(run_name: str, recipe: dict, overrides: dict) -> dict:
        config = recipe_config(run_name, recipe, runs, data_dir=data_dir, **{**settings, **overrides})
        run = Path(config.out)
        if not (run / "metrics.json").is_file() or config_changed(run, config):
            say(f"{run_name}: training {config.method} for {config.budget_minutes:g} CPU-minutes")
            finetune(config, progress=lambda r: say(f"{run_name}: step {r['step']} dev {r['dev_spearman']:.2f}"))
        return {"run": str(run), "complete": run_complete(run), "steps": run_steps(run)}

    return train


def run_steps(run: Path) -> int | None:
    """How many optimiser steps a finished run took (None: no metrics)."""
    try:
        steps = json.loads((run / "metrics.json").read_text(encoding="utf-8")).get("steps")
    except (OSError, ValueError, AttributeError):
        return None
    return steps if isinstance(steps, int) else None


def run_complete(run: Path) -> bool:
    """Whether a fine-tune ran to its end: metrics written, not stopped early (Stop, a crash: ``partial``)."""
    try:
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(metrics, dict) and not metrics.get("partial")


def study_predictor(data_dir=None):
    """``predict`` for :func:`run_unrated`: the best checkpoint's cosines on STS Multi MT test pairs, with gold."""

    def predict(run: str, pairs: list[str]) -> dict:
        scored = run_sts(load_model(run), pairs=pairs, data_dir=data_dir, n_boot=0)
        preds, datasets = scored.extras["predictions"], scored.extras["datasets"]
        return {"pred": {p: preds[p] for p in pairs}, "gold": {p: datasets[p].scores for p in pairs}}

    return predict


# ------------------------------------------------------------------------------------------------------- summaries
def load_results(out: Path) -> list[dict]:
    """Every recipe's result under ``out`` (the summary and the predictions are not results)."""
    found = []
    for path in sorted(out.glob("*.json")):
        if path.name == "summary.json" or path.name.endswith(".predictions.json"):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "folds" in data:
            found.append(data)
    return found


def write_summary(out: Path, shipped_recipe: str) -> dict:
    """``summary.json`` and ``unrated.md`` from the complete results under ``out``: the shipped recipe's gap, the best
    recipe's (smallest mean gap), and the paired CI of the reduction (shipped minus best gap, same resamples).
    Incomplete results are listed apart and never compared."""
    results = load_results(out)
    complete = [r for r in results if r.get("complete")]
    by_name = {r["recipe"]: r for r in complete}
    summary: dict = {
        "shipped_recipe": shipped_recipe,
        "shipped_gap": None,
        "best_recipe": None,
        "best_gap": None,
        "gap_reduction_ci": None,
        "recipes": {r["recipe"]: {"mean_gap": r["mean_gap"], "ci95": r["mean_gap_ci95"]} for r in complete},
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
    atomic_write_text(out / "unrated.md", markdown(results) + "\n")
    return summary


def _predictions(out: Path, recipe: str) -> dict:
    return json.loads((out / f"{_file_name(recipe)}.predictions.json").read_text(encoding="utf-8"))


def markdown(results: list[dict]) -> str:
    """One row per recipe and fold pair: with, without, gap [CI]; incomplete runs marked, never averaged in."""
    lines = ["| recipe | fold | pair | with rated pairs | without | gap [95 % CI] |", "|---|---|---|---:|---:|---:|"]
    for r in sorted(results, key=lambda r: (not r.get("complete"), r.get("mean_gap", math.inf))):
        mark = "" if r.get("complete") else " (incomplete: not compared)"
        for fold in r["folds"]:
            steps = fold.get("steps") or {}
            langs = ",".join(fold["languages"])
            if steps.get("with") is not None and steps.get("without") is not None:
                langs += f" ({steps['with']} / {steps['without']} steps)"
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
