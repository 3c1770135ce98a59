"""The two-stage meaning head of Tiyajamorn et al. under the leave-languages-out protocol
(:mod:`mlse.experiments.unrated`).

Both heads sit on the frozen ``me5-small`` student. Stage 1 trains on every language's bitext (one Stage 1 serves
every run); Stage 2 and its early stopping see only the pairs still rated (:func:`stage2_pairs`). A ``partial``
scorer is fitted again on the next call.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.data.layout import STS_LANGS
from mlse.data.pairs import ENGLISH_PAIRS
from mlse.encoders.progress import ProgressLog
from mlse.experiments.distillation import COMMON, split_seed
from mlse.runs.folders import SCORER_FILE, read_json_dict
from mlse.stop_signal import StopSignal

log = logging.getLogger(__name__)

HEAD_METHOD = "two-stage"
# name -> the Stage-2 head's options (the Stage-1 head keeps its own defaults)
HEAD_RECIPES: dict[str, dict] = {
    "two-stage": dict(method=HEAD_METHOD, conv=False, nonlinearity="identity"),
    "two-stage-conv": dict(method=HEAD_METHOD, conv=True, nonlinearity="identity"),
}


def parse_head_recipe(name: str) -> tuple[str, dict] | None:
    """``"two-stage"`` or ``"two-stage~s1"`` -> (name, recipe); None for a name that is not a head recipe."""
    base = name.partition("~s")[0]  # not unseeded(): "two-stage~sx" is a head recipe with a bad seed, named so
    if base not in HEAD_RECIPES:
        return None
    return name, {**HEAD_RECIPES[base], "seed": split_seed(name, "head recipe")[1] or 0}


def stage2_pairs(sts_langs: Sequence[str]) -> list[str]:
    """The rated pairs Stage 2 trains and stops on: en-en, then en-X for every rated language X."""
    return ["en-en", *(f"en-{lang}" for lang in STS_LANGS if lang != "en" and lang in sts_langs)]


def scorer_complete(folder: Path) -> bool:
    """Whether a scorer run was saved and not stopped in training (no ``partial`` in its manifest)."""
    manifest = read_json_dict(folder / SCORER_FILE)  # {} when missing or unreadable: not complete
    return bool(manifest) and not manifest.get("partial")


def _trained(folder: Path, stage: str) -> dict:
    manifest = read_json_dict(folder / SCORER_FILE)
    return (manifest.get("training") or {}).get(stage) or {}


def stage_signal(stop: StopSignal | None, what: str, say: Callable[[str], None]) -> StopSignal:
    """The protocol's Stop (its button and condition) for one stage, which also reports each encoding the stage does
    (``what: encoding: ...``, a line every few seconds). No budget: a head's fit is short."""
    logs: dict[int, ProgressLog] = {}

    def report(done: int, total: int, _rate, cached: int) -> None:
        if done == 0 or total not in logs:
            logs[total] = ProgressLog(f"{what}: encoding", total, unit="texts", say=say)
        logs[total].update(done, encoded=done - cached)
        if done >= total:
            logs.pop(total).close()

    return StopSignal(
        stop.event if stop else None, also=stop.also if stop else None, preparation_s=math.inf, on_encoding=report
    )


def head_trainer(
    runs: Path,
    *,
    data_dir=None,
    say: Callable[[str], None] | None = None,
    student: str = COMMON["student"],
    pairs: Sequence[str] = ENGLISH_PAIRS,
    max_pairs: int | None = COMMON["max_pairs"],
    langs: Sequence[str] = STS_LANGS,
    stop: StopSignal | None = None,
    **_ignored,
):
    """``train`` for :func:`mlse.experiments.unrated.run_unrated` of a head recipe, into ``runs/<run name>``.

    ``runs/<recipe>/stage1`` is fitted once and reused; each run's Stage 2 trains on the rated pairs its
    ``overrides["sts_langs"]`` leaves of ``langs``; a complete run on the same pairs and seed is reused. ``_ignored``:
    fine-tuning settings that do not apply to heads."""
    from mlse.train.head_training import train_stage1, train_stage2  # lazy: the heads import torch

    say = say or (lambda msg: log.info("%s", msg))

    def train(run_name: str, recipe: dict, overrides: dict) -> dict:
        seed = int(recipe.get("seed", 0))
        recipe_dir = runs / run_name.rsplit("/", 1)[0]
        stage1 = recipe_dir / "stage1"
        s1 = _trained(stage1, "stage1")
        if not scorer_complete(stage1) or s1.get("seed") != seed or s1.get("max_pairs") != max_pairs:
            say(f"{run_name}: Stage 1 on {student}, bitext of {len(pairs)} pairs ({max_pairs} each)")
            train_stage1(
                student,
                out=stage1,
                pairs=list(pairs),
                max_pairs=max_pairs,
                data_dir=data_dir,
                seed=seed,
                probe=False,
                stop=stage_signal(stop, f"{run_name}: Stage 1", say),
            )
        rated = stage2_pairs([lang for lang in overrides.get("sts_langs", langs) if lang in langs])
        out = runs / run_name
        s2 = _trained(out, "stage2")
        same = s2.get("pairs") == rated and s2.get("seed") == seed and s2.get("conv") == recipe.get("conv")
        if not scorer_complete(out) or not same:
            say(f"{run_name}: Stage 2 on rated pairs {', '.join(rated)}")
            train_stage2(
                stage1,
                out=out,
                conv=bool(recipe.get("conv")),
                nonlinearity=recipe.get("nonlinearity", "identity"),
                pairs=rated,
                data_dir=data_dir,
                seed=seed,
                stop=stage_signal(stop, f"{run_name}: Stage 2", say),
            )
        learnt = [lang for lang in STS_LANGS if f"en-{lang}" in rated]
        manifest = read_json_dict(out / SCORER_FILE)
        if manifest and manifest.get("rated_languages") != learnt:  # what the app's rated / unrated split reads
            manifest["rated_languages"] = learnt
            atomic_write_text(out / SCORER_FILE, json.dumps(manifest, indent=2, default=str))
        return {
            "run": str(out),
            "complete": scorer_complete(out),
            "steps": (manifest.get("metrics") or {}).get("stage2_epochs"),
            "dev_pairs": rated,
            "sts_langs": learnt,
        }

    return train
