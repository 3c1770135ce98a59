"""``python -m mlse experiment seed-grid|students|unrated``: the reproducible experiment recipes.

See :mod:`mlse.experiments.seed_grid`, :mod:`~mlse.experiments.distillation` (students) and
:mod:`~mlse.experiments.unrated` (leave-languages-out). Each writes its reports under ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.cli.args import add_backend_argument, csv_list
from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.experiments.distillation import RECIPES, parse_recipe, run_recipe, seeded, write_report
from mlse.experiments.forgetting import outside_scores
from mlse.experiments.seed_grid import markdown_table, rewrite_reports, run_seed_grid
from mlse.experiments.unrated import (
    SHIPPED_RECIPE,
    parse_folds,
    parse_protocol_recipe,
    protocol_trainer,
    run_unrated,
    steps_named,
    study_predictor,
)
from mlse.experiments.unrated_report import write_summary
from mlse.runs.folders import safe_name
from mlse.train.config import MAX_PAIRS


def add_experiment_parser(sub) -> None:
    """Register ``experiment`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    ex = sub.add_parser("experiment", help="reproducible experiment recipes")
    ex.add_argument("recipe", choices=["seed-grid", "students", "unrated"])
    ex.add_argument("--backbone", default="minilm-en")
    add_backend_argument(ex, "the backbone")
    ex.add_argument("--max-pairs", type=int, default=MAX_PAIRS, help="Stage-1 pairs per language pair (0: all)")
    ex.add_argument("--out", default=None, help="results folder (default: results/seed-grid/<backbone>)")
    ex.add_argument("--s1-max-epochs", type=int, default=None, help="Stage 1 epochs in the grid (default 50)")
    ex.add_argument(
        "--recipes",
        type=csv_list,
        default=None,
        help="students: recipes to run (default all); NAME+lora trains LoRA adapters, NAME@60 a 60-minute budget",
    )
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument(
        "--seeds",
        type=csv_list,
        default=None,
        help="train once per seed, e.g. 0,1,2 (seed-grid: the main variants, the prelayer and the probe on the "
        "first seed only; students: each recipe, seed N as NAME~sN; default: --seed alone)",
    )
    ex.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the reports under --out from the results already there (seed-grid.json, or the "
        "students' per-recipe JSON) without training anything",
    )
    ex.add_argument(
        "--folds",
        default=None,
        help="unrated: languages held out together, folds separated by /, e.g. de,nl,pl/es,it,ru/fr,pt,zh (the "
        "default)",
    )
    ex.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="unrated and students: each run's CPU budget (default: the recipe's)",
    )
    ex.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="unrated and students: train every run for exactly N steps (results named RECIPE:N-steps); a CPU-time "
        "budget gives runs beside other work, or on a slower CPU, fewer steps",
    )
    ex.add_argument(
        "--shipped-recipe",
        default=SHIPPED_RECIPE,
        help="unrated: the recipe whose gap the summary compares the best one with",
    )
    ex.add_argument(
        "--headline",
        default=None,
        help="unrated: also write the summary here, naming --out as its study (the study's headline, e.g. "
        "results/unrated/summary.json)",
    )
    ex.add_argument(
        "--no-outside",
        action="store_true",
        help="unrated: skip Tatoeba ara/tur/ukr and FLORES en-X retrieval of each recipe's run with every rated pair",
    )
    ex.add_argument("--data-dir", default=None)


def cmd_experiment(args: argparse.Namespace) -> int:
    if args.recipe == "students":
        return _students(args)
    if args.recipe == "unrated":
        return _unrated(args)
    tag = "" if args.backend == "torch" else f"-{args.backend}"
    out = args.out or Path("results") / "seed-grid" / f"{safe_name(args.backbone)}{tag}"
    if args.report_only:
        try:
            results = rewrite_reports(out)
        except FileNotFoundError as err:
            raise MlseError(str(err)) from None
    else:
        results = run_seed_grid(
            args.backbone,
            out=out,
            max_pairs=args.max_pairs or None,
            data_dir=args.data_dir,
            seed=args.seed,
            seeds=_int_list(args.seeds, "--seeds"),
            stage1_config={"max_epochs": args.s1_max_epochs} if args.s1_max_epochs else None,
            backend=args.backend,
            progress=lambda msg: print(msg, flush=True),
        )
    print(markdown_table(results))
    print(f"{'re' if args.report_only else ''}wrote {out}/seed-grid.json, seed-grid.md, seed-grid.html")
    return 0


def _int_list(values: list[str] | None, flag: str) -> list[int] | None:
    if not values:
        return None
    try:
        return [int(v) for v in values]
    except ValueError:
        raise MlseError(f"{flag} takes whole numbers separated by commas, got {','.join(values)!r}") from None


def _students(args: argparse.Namespace) -> int:
    out = Path(args.out or Path("results") / "students")
    seeds = _int_list(args.seeds, "--seeds") or ([args.seed] if args.seed else None)
    names = args.recipes or list(RECIPES)
    if seeds:  # else each name keeps its own ~sN (or COMMON's seed 0)
        names = [seeded(name, seed) for name in names for seed in seeds]
    plans = [parse_recipe(name) for name in names]  # unknown names are refused before anything runs
    if not args.report_only:
        for name, recipe in steps_named(plans, args.max_steps):
            run_recipe(
                name,
                recipe,
                runs=runs_dir() / "students",
                out=out,
                data_dir=args.data_dir,
                progress=lambda msg: print(msg, flush=True),
                **_run_settings(args),
            )
    print(write_report(out, baselines={m: Path("results/baseline") / m for m in ("me5-small", "muse", "minilm-en")}))
    print(f"wrote {out}/students.md, students.html")
    return 0


STEPS_GUARD_MINUTES = 120.0  # with --max-steps: the budget that only stops a runaway run


def _run_settings(args: argparse.Namespace) -> dict:
    """``--budget-minutes`` / ``--max-steps`` as settings of every run: with ``--max-steps`` each run takes exactly N
    steps (on any CPU, beside any other work) and the budget only guards against a runaway run."""
    if args.max_steps:
        return {"max_steps": args.max_steps, "budget_minutes": args.budget_minutes or STEPS_GUARD_MINUTES}
    return {"budget_minutes": args.budget_minutes} if args.budget_minutes else {}


def _unrated(args: argparse.Namespace) -> int:
    out = Path(args.out or Path("results") / "unrated")
    folds = parse_folds(args.folds)  # an unknown language or an empty fold is refused before anything runs
    plans = [parse_protocol_recipe(name) for name in (args.recipes or [])]  # an unknown name is refused first
    if not plans and not args.report_only:
        raise MlseError("unrated: name the recipes to run with --recipes, e.g. sts-cosent+lora@10")
    plans = steps_named(plans, args.max_steps)
    say = lambda msg: print(msg, flush=True)  # noqa: E731
    outside = None if args.no_outside else (lambda run: outside_scores(run, data_dir=args.data_dir))
    if not args.report_only:
        train = protocol_trainer(runs_dir() / "unrated", data_dir=args.data_dir, say=say, **_run_settings(args))
        for name, recipe in plans:
            result = run_unrated(
                name,
                recipe,
                folds=folds,
                train=train,
                predict=study_predictor(args.data_dir),
                out=out,
                say=say,
                outside=outside,
            )
            state = "" if result["complete"] else " (incomplete: a run stopped early; not compared)"
            print(f"{name}: mean gap {result['mean_gap']:+.1f} {result['mean_gap_ci95']}{state}")
    summary = write_summary(out, args.shipped_recipe)
    headline = ("shipped_gap", "best_recipe", "best_gap", "gap_reduction_ci", "best_raising_without")
    print(json.dumps({k: summary[k] for k in headline}))
    print(f"wrote {out}/summary.json, unrated.md")
    if args.headline:
        atomic_write_text(Path(args.headline), json.dumps({"study": out.as_posix(), **summary}, indent=1) + "\n")
        print(f"wrote {args.headline}")
    return 0
