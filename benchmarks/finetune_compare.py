"""Every fine-tuning method at an equal budget on the same data, then STS Multi MT test for each result.

    python -m benchmarks.finetune_compare [--budget-minutes 10] [--max-pairs 0] [--extend-vocab 30000]
                                          [--methods mse,ema,soft,hard] [--out results/finetune]
    python -m benchmarks.finetune_compare --quick [--student PATH --teacher PATH]   # 2 steps per method, seconds

Student and teacher are minilm-en (the only offline encoder), so this is the "offline multilingual student" study of
the fine-tuning comparison at whatever budget is given: same data (contamination-filtered Tatoeba-Challenge en-xx,
``--max-pairs`` per pair, 0 = all), same minutes, same vocabulary extension (``--extend-vocab 0`` turns it off). Writes
`<out>/finetune-compare.json`, `.md` and `.html`: test Spearman per pair for the baseline and each method, plus each
method's dev curve (dev Spearman vs training minutes) from its `log.jsonl`. ``--tag`` names rows and files when
several settings are compared (e.g. ``--tag 60min``). ``--quick`` (:data:`QUICK`): every method for 2 steps on 16 en-de
pairs, a 128-piece vocabulary extension, test on en-en and en-de; runs and results in a temporary folder unless
``--runs`` / ``--out`` are given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, TEST_PAIRS, machine, output_dir, spearman_table, test_scores
from mlse.atomic import atomic_write_text
from mlse.encoders import load_encoder
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune

METHODS = {
    "mse": {"method": "mse"},
    "ema": {"method": "ema", "teacher": None},
    "soft": {"method": "soft", "label": "priority"},
    "hard": {"method": "hard", "teacher": None},
}
# --quick: the settings of every run (2 steps of 8 en-de pairs, dev on 32 rows) and the test pairs
QUICK = {
    "config": {"pairs": ["en-de"], "max_steps": 2, "batch_size": 8, "dev_pairs": ["en-de"], "eval_every_steps": 1},
    "max_pairs": 16,
    "extend_vocab": 128,
    "budget_minutes": 2.0,
    "dev_max_pairs": 32,
    "test_pairs": ["en-en", "en-de"],
}


def write_curves_html(curves: dict[str, list], path: Path, budget: float) -> None:
    """Dev Spearman vs minutes, one line per method (a self-contained plotly page)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, points in curves.items():
        fig.add_trace(go.Scatter(x=[m for m, _ in points], y=[s for _, s in points], mode="lines+markers", name=name))
    fig.update_layout(
        title=f"STS Multi MT dev Spearman (mean of dev pairs) vs training minutes, {budget:g}-min budget",
        xaxis_title="minutes",
        yaxis_title="dev Spearman x 100",
    )
    atomic_write_text(path, fig.to_html(include_plotlyjs="cdn", full_html=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.finetune_compare", description=__doc__.split("\n")[0])
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--max-pairs", type=int, default=0, help="per language pair (0: all)")
    parser.add_argument("--extend-vocab", type=int, default=30000, help="0: keep minilm-en's English vocabulary")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tag", default="", help="suffix of row names, run folders and output files")
    parser.add_argument("--runs", default=None, help="default runs/compare (--quick: a temporary folder)")
    parser.add_argument("--out", default=None, help="default results/finetune (--quick: a temporary folder)")
    parser.add_argument("--student", default="minilm-en", help="the student (and the baseline row)")
    parser.add_argument("--teacher", default="minilm-en", help="mse and soft: the frozen teacher")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    quick = QUICK if args.quick else {"config": {}, "dev_max_pairs": 500, "test_pairs": TEST_PAIRS}
    if args.quick:
        args.max_pairs, args.extend_vocab, args.budget_minutes = (
            quick["max_pairs"],
            quick["extend_vocab"],
            quick["budget_minutes"],
        )
    out = output_dir(args.out, args.quick, "results/finetune", "finetune-compare")
    runs = output_dir(args.runs, args.quick, "runs/compare", "finetune-compare-runs")
    suffix = f"-{args.tag}" if args.tag else ""
    stem = f"finetune-compare{suffix}"
    results = {
        "budget_minutes": args.budget_minutes,
        "max_pairs": args.max_pairs or None,
        "quick": args.quick,
        "extend_vocab": args.extend_vocab,
        "lr": args.lr,
        **machine(),
        "scores": {},
        "curves": {},
        "metrics": {},
    }
    test_pairs = quick["test_pairs"]
    results["scores"][f"{args.student} (baseline)"] = test_scores(load_encoder(args.student), test_pairs)
    for name in args.methods.split(","):
        run = runs / f"{name}{suffix}"
        cfg = FinetuneConfig(
            **{"teacher": args.teacher, **METHODS[name]},
            student=args.student,
            budget_minutes=args.budget_minutes,
            max_pairs=args.max_pairs or None,
            extend_vocab=args.extend_vocab,
            lr=args.lr,
            dev_max_pairs=quick["dev_max_pairs"],
            out=str(run),
            **{"eval_every_steps": args.eval_every, **quick["config"]},
        )
        t0 = time.perf_counter()
        metrics = finetune(
            cfg,
            progress=lambda r, n=name: print(
                n, {k: r[k] for k in ("step", "elapsed_s", "loss", "dev_spearman") if k in r}, flush=True
            ),
        )
        results["metrics"][name] = {**metrics, "wall_s": time.perf_counter() - t0}
        log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]
        results["curves"][name] = [(r["elapsed_s"] / 60, r["dev_spearman"]) for r in log]
        results["scores"][f"{name}{suffix}"] = test_scores(load_encoder(str(run / "model"), cache=False), test_pairs)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / f"{stem}.json", json.dumps(results, indent=1, default=str))
        write_curves_html(results["curves"], out / f"{stem}.html", args.budget_minutes)
    table = spearman_table(results["scores"])
    curves = "\n".join(
        f"- {n}: " + ", ".join(f"{m:.1f} min → {s:.1f}" for m, s in c) for n, c in results["curves"].items()
    )
    text = f"{table}\n\nDev Spearman (mean of the dev pairs) vs training minutes:\n{curves}\n"
    atomic_write_text(out / f"{stem}.md", text)
    print(table)
    print(curves)
    if args.quick and args.runs is None:
        shutil.rmtree(runs, ignore_errors=True)  # a quick run's trained models are of no further use


if __name__ == "__main__":
    main()
