"""Every fine-tuning method at an equal budget on the same data, then STS Multi MT test for each result.

    python benchmarks/finetune_compare.py [--budget-minutes 10] [--max-pairs 0] [--extend-vocab 30000]
                                          [--methods mse,ema,soft,hard] [--out results/finetune]

Student and teacher are minilm-en (the only offline encoder), so this is the "offline multilingual student" study of
issue 4 at whatever budget is given: same data (contamination-filtered Tatoeba-Challenge en-xx, ``--max-pairs`` per
pair, 0 = all), same minutes, same vocabulary extension (``--extend-vocab 0`` turns it off). Writes
`<out>/finetune-compare.json`, `.md` and `.html`: test Spearman per pair for the baseline and each method, plus each
method's dev curve (dev Spearman vs training minutes) from its `log.jsonl`. ``--tag`` names rows and files when
several settings are compared (e.g. ``--tag 60min``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlse.atomic import atomic_write_text  # noqa: E402
from mlse.data.pairs import CROSS_12  # noqa: E402
from mlse.encoders import load_encoder  # noqa: E402
from mlse.evaluation.runners import run_sts  # noqa: E402
from mlse.train.config import FinetuneConfig  # noqa: E402
from mlse.train.finetune import finetune  # noqa: E402

METHODS = {
    "mse": {"method": "mse"},
    "ema": {"method": "ema", "teacher": None},
    "soft": {"method": "soft", "label": "priority"},
    "hard": {"method": "hard", "teacher": None},
}
TEST_PAIRS = ["en-en", *CROSS_12]


def spearman_table(scores: dict[str, dict[str, float]]) -> str:
    lines = ["| model | " + " | ".join(TEST_PAIRS) + " | avg cross-12 |", "|---|" + "---:|" * (len(TEST_PAIRS) + 1)]
    for name, row in scores.items():
        avg = sum(row[p] for p in CROSS_12) / len(CROSS_12)
        lines.append(f"| {name} | " + " | ".join(f"{row[p]:.1f}" for p in TEST_PAIRS) + f" | {avg:.1f} |")
    return "\n".join(lines)


def test_scores(model) -> dict[str, float]:
    result = run_sts(model, pairs=TEST_PAIRS, n_boot=0)
    return {p: s["spearman"] for p, s in result.scores.items()}


def write_curves_html(curves: dict[str, list], path: Path, budget: float) -> None:
    """Dev Spearman vs minutes, one line per method (a self-contained plotly page)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, points in curves.items():
        fig.add_trace(go.Scatter(x=[m for m, _ in points], y=[s for _, s in points], mode="lines+markers", name=name))
    fig.update_layout(title=f"STS Multi MT dev Spearman (mean of dev pairs) vs training minutes, {budget:g}-min budget",
                      xaxis_title="minutes", yaxis_title="dev Spearman x 100")  # fmt: skip
    atomic_write_text(path, fig.to_html(include_plotlyjs="cdn", full_html=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--max-pairs", type=int, default=0, help="per language pair (0: all)")
    parser.add_argument("--extend-vocab", type=int, default=30000, help="0: keep minilm-en's English vocabulary")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tag", default="", help="suffix of row names, run folders and output files")
    parser.add_argument("--runs", default="runs/compare")
    parser.add_argument("--out", default="results/finetune")
    args = parser.parse_args()
    out = Path(args.out)
    suffix = f"-{args.tag}" if args.tag else ""
    stem = f"finetune-compare{suffix}"
    results = {"budget_minutes": args.budget_minutes, "max_pairs": args.max_pairs or None,
               "extend_vocab": args.extend_vocab, "lr": args.lr, "scores": {}, "curves": {}, "metrics": {}}  # fmt: skip
    results["scores"]["minilm-en (baseline)"] = test_scores(load_encoder("minilm-en"))
    for name in args.methods.split(","):
        run = Path(args.runs) / f"{name}{suffix}"
        cfg = FinetuneConfig(**METHODS[name], budget_minutes=args.budget_minutes, max_pairs=args.max_pairs or None,
                             extend_vocab=args.extend_vocab, lr=args.lr, eval_every_steps=args.eval_every,
                             dev_max_pairs=500, out=str(run))  # fmt: skip
        t0 = time.perf_counter()
        metrics = finetune(cfg, progress=lambda r, n=name: print(n, {k: r[k] for k in ("step", "elapsed_s",
                           "loss", "dev_spearman") if k in r}, flush=True))  # fmt: skip
        results["metrics"][name] = {**metrics, "wall_s": time.perf_counter() - t0}
        log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]
        results["curves"][name] = [(r["elapsed_s"] / 60, r["dev_spearman"]) for r in log]
        results["scores"][f"{name}{suffix}"] = test_scores(load_encoder(str(run / "model"), cache=False))
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


if __name__ == "__main__":
    main()
