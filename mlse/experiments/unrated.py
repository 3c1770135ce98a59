"""Languages without rated pairs: how much cross-lingual STS a language loses when it has bitext but no rated pairs.

``python -m mlse experiment unrated``: per fold of STS Multi MT languages, a recipe is trained *with* every language's
rated pairs and *without* the fold's (they leave the STS terms and the dev pick; their bitext stays); the *gap* (with
minus without, Spearman x 100 on cross-lingual test pairs of the fold) gets a paired cluster bootstrap CI over source
rows. Recipes: :func:`parse_protocol_recipe`. Results go to ``<out>/<recipe>.json`` (and ``.predictions.json``),
rewritten after every fold and marked incomplete until the last; rerunning trains only what is missing. See
docs/results/unrated-languages.md.
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
from mlse.data.portable import portable_record
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts
from mlse.evaluation.sts import bootstrap_spearman, percentile_ci95, spearman
from mlse.experiments.distillation import config_changed, parse_recipe, recipe_config
from mlse.experiments.unrated_heads import HEAD_METHOD, HEAD_RECIPES, head_trainer, parse_head_recipe
from mlse.models import load_model
from mlse.runs.folders import read_json_dict
from mlse.stop_signal import StopSignal
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
    others = [p for p in SEED_AND_CROSS_PAIRS if "en" not in p.split("-") and set(p.split("-")) & set(fold)]
    return [f"en-{lang}" for lang in fold] + others


def fold_overrides(fold: Sequence[str]) -> dict:
    """What the *without* run changes in a recipe: no rated pairs of the fold, in training or in the dev pick."""
    return {"sts_langs": fold_sts_langs(fold), "dev_pairs": fold_dev_pairs(fold)}


# ------------------------------------------------------------------------------------------------------ the recipes
def parse_protocol_recipe(name: str) -> tuple[str, dict]:
    """A head recipe (``two-stage``, :data:`~mlse.experiments.unrated_heads.HEAD_RECIPES`) or a distillation-study
    recipe (:func:`mlse.experiments.distillation.parse_recipe`; an unknown name is an MlseError naming it)."""
    head = parse_head_recipe(name)
    if head is not None:
        return head
    try:
        return parse_recipe(name)
    except MlseError as exc:
        raise MlseError(f"{exc}; or a head recipe: {', '.join(HEAD_RECIPES)} (optionally ~sSEED)") from None


def is_head_recipe(recipe: dict) -> bool:
    return recipe.get("method") == HEAD_METHOD


def steps_named(plans: list[tuple[str, dict]], max_steps: int | None) -> list[tuple[str, dict]]:
    """With ``max_steps``, each fine-tuning recipe's result is named ``NAME:N-steps`` (a head trains by epochs)."""
    if not max_steps:
        return plans
    return [(name if is_head_recipe(recipe) else f"{name}:{max_steps}-steps", recipe) for name, recipe in plans]


# -------------------------------------------------------------------------------------------------------- the gaps
def pair_gaps(with_preds: dict, without_preds: dict, gold: dict, pairs: Sequence[str], *, n_boot: int = N_BOOT):
    """Per pair: Spearman x 100 with and without, the gap and its paired CI; plus the mean gap over ``pairs`` with its
    CI and bootstrap values (paired: one resample of source rows serves every pair of the fold)."""
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


def recipe_side_boots(predictions: dict, side: str, n_boot: int = N_BOOT) -> np.ndarray:
    """The mean Spearman x 100 of one side (``with`` or ``without``) over every fold's pairs on each bootstrap
    resample (one seed, so the same resamples for every recipe and side)."""
    boots = [
        bootstrap_spearman(np.asarray(fold[side][pair]), np.asarray(gold, dtype=np.float64), n_boot=n_boot, seed=0)
        for fold in predictions["folds"]
        for pair, gold in fold["gold"].items()
    ]
    return np.nanmean(np.stack(boots), axis=0) if boots else np.array([math.nan])


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
    outside: Callable[[str], dict] | None = None,
) -> dict:
    """Run the protocol for one recipe and write ``<out>/<name>.json`` and ``<name>.predictions.json``.

    ``train(run_name, recipe, overrides) -> {"run": folder, "complete": bool, "steps": n}`` trains (or finds) one run
    (it may also say the ``sts_langs`` and ``dev_pairs`` it used); ``predict(run_folder, pairs) -> {"gold": {pair:
    scores}, "pred": {pair: cosines}}`` scores STS test pairs; ``outside(run_folder)``, when given, scores the run with
    every rated pair on languages outside STS Multi MT. Injected so that tests use a tiny model."""
    say = say or (lambda msg: log.info("%s", msg))
    if not folds:
        raise MlseError(f"{name}: no folds to hold out; give one or more, e.g. de,nl,pl/es,it,ru")
    with_run = train(f"{name}/all", recipe, {})
    result = {"recipe": name, "folds": [], "complete": False, "folds_done": 0, "folds_total": len(folds)}
    result["steps_with"] = with_run.get("steps")
    predictions = {"recipe": name, "folds": []}
    every_pair = sorted({p for fold in folds for p in fold_eval_pairs(fold)})
    with_scored = predict(with_run["run"], every_pair)
    if outside is not None:
        say(f"{name}: languages outside STS Multi MT")
        scores = outside(with_run["run"])  # its model name and identity hold the run's absolute path: not recorded
        result["outside"] = {k: v for k, v in scores.items() if k not in ("model", "identity")}
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
                "sts_langs": list(without_run.get("sts_langs") or fold_sts_langs(fold)),
                "dev_pairs": list(without_run.get("dev_pairs") or fold_dev_pairs(fold)),
                "pairs": table,
                "mean_gap": mean_gap,
                "mean_gap_ci95": ci,
                "complete": complete,
                "runs": {"with": Path(with_run["run"]).name, "without": Path(without_run["run"]).name},
                "steps": {"with": with_run.get("steps"), "without": without_run.get("steps")},
                "cpu_s": without_run.get("cpu_s"),
            }
        )
        predictions["folds"].append(
            {
                "languages": list(fold),
                "gold": _rounded(gold),
                "with": _rounded({p: with_scored["pred"][p] for p in pairs}),
                "without": _rounded(scored["pred"]),
            }
        )
        result["folds_done"] = k
        cpu = [with_run.get("cpu_s"), *(f["cpu_s"] for f in result["folds"])]
        result["cpu_minutes"] = None if None in cpu else round(sum(cpu) / 60, 1)
        result["complete"] = k == len(folds) and all(f["complete"] for f in result["folds"])
        _write(out, name, result, predictions)
    return result


def _write(out: Path, name: str, result: dict, predictions: dict) -> None:
    """Both files of a recipe, the mean gap over the folds so far (the predictions first: a result names them)."""
    boots = recipe_side_boots(predictions, "with") - recipe_side_boots(predictions, "without")  # the same resamples
    result["mean_gap"] = round(float(np.mean([r["gap"] for f in result["folds"] for r in f["pairs"].values()])), 2)
    result["mean_gap_ci95"] = [round(x, 2) for x in percentile_ci95(boots)]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{_file_name(name)}.predictions.json", json.dumps(predictions) + "\n")
    atomic_write_text(out / f"{_file_name(name)}.json", json.dumps(portable_record(result), indent=1) + "\n")


def _rounded(values: dict) -> dict:
    return {p: [round(float(x), 5) for x in v] for p, v in values.items()}


def _file_name(recipe: str) -> str:
    return recipe.replace("/", "_").replace("@", "_at_")


def study_trainer(
    runs: Path, *, data_dir=None, say: Callable[[str], None] | None = None, stop: StopSignal | None = None, **settings
):
    """``train`` for :func:`run_unrated`: the distillation study's training of a recipe (``settings`` override it,
    e.g. ``budget_minutes``), into ``runs/<run name>``. A finished run with the same settings is reused; a ``partial``
    one is trained again. ``stop`` (one signal for every run) ends a run after its step, keeping its best checkpoint."""
    say = say or (lambda msg: log.info("%s", msg))

    def train(run_name: str, recipe: dict, overrides: dict) -> dict:
        config = recipe_config(run_name, recipe, runs, data_dir=data_dir, **{**settings, **overrides})
        run = Path(config.out)
        if not run_complete(run) or config_changed(run, config):
            say(f"{run_name}: training {config.method} for {config.budget_minutes:g} CPU-minutes")
            finetune(
                config, progress=lambda r: say(f"{run_name}: step {r['step']} dev {r['dev_spearman']:.2f}"), signal=stop
            )
        return {
            "run": str(run),
            "complete": run_complete(run),
            "steps": run_steps(run),
            "cpu_s": run_cpu_s(run),
            "sts_langs": list(config.sts_langs),
            "dev_pairs": list(config.dev_pairs),
        }

    return train


def protocol_trainer(runs: Path, *, data_dir=None, say=None, stop: StopSignal | None = None, **settings):
    """``train`` for :func:`run_unrated` of any protocol recipe: a head recipe through
    :func:`mlse.experiments.unrated_heads.head_trainer`, every other through :func:`study_trainer`."""
    finetuned = study_trainer(runs, data_dir=data_dir, say=say, stop=stop, **settings)
    heads = head_trainer(runs, data_dir=data_dir, say=say, stop=stop)

    def train(run_name: str, recipe: dict, overrides: dict) -> dict:
        return (heads if is_head_recipe(recipe) else finetuned)(run_name, recipe, overrides)

    return train


def run_steps(run: Path) -> int | None:
    """How many optimiser steps a finished run took (None: no metrics)."""
    steps = read_json_dict(run / "metrics.json").get("steps")
    return steps if isinstance(steps, int) else None


def run_cpu_s(run: Path) -> float | None:
    """A run's CPU seconds: its preparation's and its training's with the dev evaluations (None: not recorded, or
    timed by the wall clock)."""
    metrics = read_json_dict(run / "metrics.json")
    if metrics.get("budget_clock") != "cpu" or metrics.get("prepare_cpu_s") is None:
        return None
    return float(metrics["prepare_cpu_s"]) + float(metrics["elapsed_s"])


def run_complete(run: Path) -> bool:
    """Whether a fine-tune ran to its end: metrics written, not stopped early (Stop, a crash: ``partial``)."""
    metrics = read_json_dict(run / "metrics.json")
    return bool(metrics) and not metrics.get("partial")


def study_predictor(data_dir=None):
    """``predict`` for :func:`run_unrated`: the best checkpoint's cosines on STS Multi MT test pairs, with gold (a head
    recipe's run: its Stage-2 embeddings')."""

    def predict(run: str, pairs: list[str]) -> dict:
        scored = run_sts(load_model(run), pairs=pairs, data_dir=data_dir, n_boot=0)
        preds, datasets = scored.extras["predictions"], scored.extras["datasets"]
        return {"pred": {p: preds[p] for p in pairs}, "gold": {p: datasets[p].scores for p in pairs}}

    return predict
