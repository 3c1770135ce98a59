"""Every fine-tuning method at an equal budget on the same data, then STS Multi MT test for each result.

    python benchmarks/finetune_compare.py [--budget-minutes 6] [--max-pairs 2000] [--out results/finetune]

Student and teacher are minilm-en (the only offline encoder), so this is the "offline multilingual student" study of
issue 4 at whatever budget is given. Writes `<out>/finetune-compare.json` and `.md`: test Spearman per pair for the
baseline and each method, plus each method's dev curve (dev Spearman vs training minutes) from its `log.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlse.atomic import atomic_write_text  # noqa: E402
from mlse.encoders import load_encoder  # noqa: E402
from mlse.finetune import FinetuneConfig, finetune  # noqa: E402
from mlse.tasks import CROSS_12, run_sts  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-minutes", type=float, default=6.0)
    parser.add_argument("--max-pairs", type=int, default=2000)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--runs", default="runs/compare")
    parser.add_argument("--out", default="results/finetune")
    args = parser.parse_args()
    out = Path(args.out)
    results = {"budget_minutes": args.budget_minutes, "max_pairs": args.max_pairs, "scores": {}, "curves": {},
               "metrics": {}}  # fmt: skip
    results["scores"]["minilm-en (baseline)"] = test_scores(load_encoder("minilm-en"))
    for name in args.methods.split(","):
        run = Path(args.runs) / name
        cfg = FinetuneConfig(**METHODS[name], budget_minutes=args.budget_minutes, max_pairs=args.max_pairs,
                             eval_every_steps=40, dev_max_pairs=300, out=str(run))  # fmt: skip
        t0 = time.perf_counter()
        metrics = finetune(cfg, progress=lambda r, n=name: print(n, {k: r[k] for k in ("step", "elapsed_s",
                           "loss", "dev_spearman") if k in r}, flush=True))  # fmt: skip
        results["metrics"][name] = {**metrics, "wall_s": time.perf_counter() - t0}
        log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]
        results["curves"][name] = [(r["elapsed_s"] / 60, r["dev_spearman"]) for r in log]
        results["scores"][name] = test_scores(load_encoder(str(run / "model"), cache=False))
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "finetune-compare.json", json.dumps(results, indent=1, default=str))
    table = spearman_table(results["scores"])
    curves = "\n".join(
        f"- {n}: " + ", ".join(f"{m:.1f} min → {s:.1f}" for m, s in c) for n, c in results["curves"].items()
    )
    text = f"{table}\n\nDev Spearman (mean of the dev pairs) vs training minutes:\n{curves}\n"
    atomic_write_text(out / "finetune-compare.md", text)
    print(table)
    print(curves)


if __name__ == "__main__":
    main()
