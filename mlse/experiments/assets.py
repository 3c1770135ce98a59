"""``python -m mlse reproduce assets``: regenerate every artifact shipped under ``assets/models`` from scratch.

:data:`HEADS`: Stage 1 and Stage 1 + 2 heads on both offline multilingual backbones, trained as the seed grid's first
seed. :data:`STUDENTS`: the distilled student, shipped as its float16 LoRA adapter (a :class:`Soup`'s members stacked
into one). Each is trained into ``<runs>/assets/<name>`` (a finished run is kept), exported, loaded back and
evaluated into its manifest. See docs/models.md.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlse.data.pairs import CROSS_12, HAM_KIM_14, SEED_AND_CROSS_PAIRS
from mlse.data.portable import resolve_record_path
from mlse.encoders.lora_soup import build_lora_soup
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts, run_tatoeba
from mlse.experiments.distillation import parse_recipe, run_recipe
from mlse.experiments.seed_grid import DEFAULT_S1_EPOCHS, STAGE1_VARIANTS, STAGE2_VARIANTS
from mlse.heads.scorer import read_scorer_json
from mlse.models import load_model
from mlse.runs.folders import is_scorer_folder
from mlse.runs.shipped import ShippedArtifact, export, shipped_root, update_scores
from mlse.train.head_training import train_stage1, train_stage2

log = logging.getLogger(__name__)

COMMAND = "python -m mlse reproduce assets"
TATOEBA_LANGS = HAM_KIM_14  # a student's retrieval check: Tatoeba, Ham & Kim's 14 languages
# shipped name -> (backbone, seed-grid variant)
HEADS: dict[str, tuple[str, str]] = {
    "me5-small+s1": ("me5-small", "s1"),
    "me5-small+s1+s2": ("me5-small", "s1+s2"),
    "muse+s1": ("muse", "s1"),
    "muse+s1+s2": ("muse", "s1+s2"),
}


@dataclass(frozen=True)
class Soup:
    """A student made of study recipes: ``base + sum_i weights[i] * (recipe_i - base)``, shipped as one adapter."""

    members: tuple[str, ...]
    weights: tuple[float, ...]

    def __str__(self) -> str:
        return "soup " + " + ".join(f"{w:g} x {m}" for m, w in zip(self.members, self.weights, strict=True))


# shipped name -> student recipe (mlse.experiments.distillation; "+lora" so that it can ship as an adapter) or a soup
# The uniform soup of the study's STS student and its retrieval student, each weight-averaged (SWA) within its run
# (docs/results/distillation.md, "weight soup").
STUDENTS: dict[str, str | Soup] = {
    "me5-small-student": Soup(("ema-frozen-cosent-w0.01-swa+lora@40", "hard-t0.01-cosent-swa+lora"), (0.5, 0.5))
}


def measure(model: str, *, data_dir=None, tatoeba: bool = False) -> dict:
    """The scores a manifest records: STS test Spearman x 100 per pair (17 pairs), cross-12 and en-en; with
    ``tatoeba``, also Tatoeba-14 mean accuracy and xSIM error (%)."""
    encoder = load_model(model)
    result = run_sts(encoder, pairs=SEED_AND_CROSS_PAIRS, data_dir=data_dir, n_boot=0)
    spearman = {pair: round(float(s["spearman"]), 2) for pair, s in result.scores.items()}
    scores = {
        "sts_test_spearman": spearman,
        "cross-12": round(float(np.mean([spearman[p] for p in CROSS_12])), 2),
        "en-en": spearman["en-en"],
    }
    if tatoeba:  # "tatoeba-14" names the study's set; a test may narrow TATOEBA_LANGS
        averages = run_tatoeba(encoder, langs=list(TATOEBA_LANGS), data_dir=data_dir, keep_errors=False).averages["all"]
        scores["tatoeba-14"] = round(float(averages["acc_mean"]), 2)
        scores["xsim-14"] = round(float(averages["xsim_error"]), 2)
    return scores


def reproduce_head(name: str, *, runs: Path, out: Path, data_dir=None) -> ShippedArtifact:
    """Train one shipped scorer as the seed grid's first seed does, export it, measure the exported files."""
    backbone, variant = HEADS[name]
    if variant not in STAGE1_VARIANTS and variant not in STAGE2_VARIANTS:
        raise MlseError(f"unknown seed-grid variant {variant!r} for {name}")
    run = runs / name
    # Stage 2 trains on the grid's plain Stage 1 ("s1"); a finished scorer folder is kept (delete it to train again).
    s1_run, s1_variant = (run, variant) if variant in STAGE1_VARIANTS else (runs / f"{backbone}+s1", "s1")
    if not is_scorer_folder(run) and not is_scorer_folder(s1_run):
        train_stage1(
            backbone, out=s1_run, seed=0, data_dir=data_dir, max_epochs=DEFAULT_S1_EPOCHS, **STAGE1_VARIANTS[s1_variant]
        )
    if variant in STAGE2_VARIANTS and not is_scorer_folder(run):
        train_stage2(s1_run, out=run, seed=0, data_dir=data_dir, **STAGE2_VARIANTS[variant])
    meta = read_scorer_json(run)  # scorer.json as written: backbone identity, training data hashes
    manifest = {
        "title": f"{variant} heads (seed grid, seed 0)",
        "backbone": backbone,
        "backbone_identity": meta["backbone_identity"],
        "command": f"{COMMAND} --only {name}",
        "data": meta.get("data", {}),
        "variant": variant,
        "scores": {},
    }
    item = export("scorer", run, out / "heads" / name, manifest)
    return update_scores(item, measure(str(item.folder), data_dir=data_dir))


def reproduce_student(
    name: str, *, runs: Path, out: Path, data_dir=None, progress: Callable[[str], None] | None = None
) -> ShippedArtifact:
    """Train the student's recipe(s), export its LoRA adapter (a soup's members stacked into one), measure the student
    rebuilt from the exported adapter."""
    from mlse.calibration.backbone import fit_calibration, save_calibration
    from mlse.encoders.load import load_encoder

    spec = STUDENTS[name]
    members = spec.members if isinstance(spec, Soup) else (spec,)
    trained = [_train_recipe(recipe, runs=runs, data_dir=data_dir, progress=progress) for recipe in members]
    backbones = {config["student"] for _, config in trained}
    if len(backbones) != 1:
        raise MlseError(f"{name}: the soup's members start from different backbones {sorted(backbones)}")
    backbone = backbones.pop()
    if isinstance(spec, Soup):
        adapter = build_lora_soup(
            [run / "adapter" for run, _ in trained], spec.weights, runs / name / "adapter", names=list(spec.members)
        )
    else:
        adapter = trained[0][0] / "adapter"
    data = {k: v for _, config in trained for k, v in config.get("data_files", {}).items()}
    manifest = {
        "title": f"student {spec} (LoRA adapter)",
        "backbone": backbone,
        "backbone_identity": load_encoder(backbone, cache=False).identity,
        "command": f"{COMMAND} --only {name}",
        "data": data,
        "recipe": str(spec),
        **({"soup": {"members": list(spec.members), "weights": list(spec.weights)}} if isinstance(spec, Soup) else {}),
        "scores": {},
    }
    item = export("lora-student", adapter, out / "students" / name, manifest)
    with _shipped_from(out):  # measure the adapter just exported, also when --out is not the shipped folder
        item = update_scores(item, measure(item.name, data_dir=data_dir, tatoeba=True))
        calibration, report = fit_calibration(load_model(item.name), data_dir=data_dir, max_rows=750)
    save_calibration(calibration, report, out / "calibration", command=f"{COMMAND} --only {name}")
    return item


def _train_recipe(spec: str, *, runs: Path, data_dir=None, progress=None) -> tuple[Path, dict]:
    """Train one LoRA recipe of the study (a finished one is reused); its run folder and ``finetune_config.json``."""
    recipe_name, recipe = parse_recipe(spec)
    if not recipe.get("lora_r"):
        raise MlseError(f"recipe {recipe_name!r} is not a LoRA recipe; only adapters ship")
    result = run_recipe(recipe_name, recipe, runs=runs, out=runs / "results", data_dir=data_dir, progress=progress)
    run = resolve_record_path(result["run"])  # a result file names it portably
    if run is None or not (run / "finetune_config.json").is_file():  # trained elsewhere: this command's own folder
        run = runs / recipe_name
    return run, json.loads((run / "finetune_config.json").read_text())


@contextmanager
def _shipped_from(root: Path):
    """Resolve ``shipped/NAME`` from ``root`` for the duration (a student is loaded by that name: its merged folder
    and its calibration are keyed by it)."""
    before = os.environ.get("MLSE_ASSETS")
    os.environ["MLSE_ASSETS"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MLSE_ASSETS", None)
        else:
            os.environ["MLSE_ASSETS"] = before


def reproduce_assets(
    *,
    only: list[str] | None = None,
    out: Path | None = None,
    runs: Path,
    data_dir=None,
    progress: Callable[[str], None] | None = None,
) -> list[ShippedArtifact]:
    """Regenerate the named artifacts (default: every one) into ``out`` (default: the shipped folder)."""
    say = progress or (lambda msg: log.info("%s", msg))
    out = out or shipped_root()
    names = only or [*HEADS, *STUDENTS]
    unknown = [n for n in names if n not in HEADS and n not in STUDENTS]
    if unknown:
        raise MlseError(f"unknown shipped artifact(s) {', '.join(unknown)}; expected {', '.join([*HEADS, *STUDENTS])}")
    done = []
    for name in names:
        say(f"{name}: training and exporting")
        if name in HEADS:
            item = reproduce_head(name, runs=runs, out=out, data_dir=data_dir)
        else:
            item = reproduce_student(name, runs=runs, out=out, data_dir=data_dir, progress=say)
        say(f"{name}: STS test cross-12 {item.manifest['scores']['cross-12']:.2f} -> {item.folder}")
        done.append(item)
    return done
