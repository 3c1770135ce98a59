"""The offline multilingual student: one long fine-tuning run of minilm-en, then STS Multi MT test on 13 pairs.

    python -m benchmarks.multilingual_student --method mse --lr 2e-4 --budget-minutes 60 --extend-vocab 30000 \
        --run runs/minilm-multi-mse60 [--reuse] [--out results/finetune]
    python -m benchmarks.multilingual_student --quick [--student PATH]   # 2 steps on 16 en-de pairs, seconds

Trains (unless ``--reuse`` finds ``<run>/metrics.json``) on every contamination-filtered English-X Tatoeba-Challenge
pair (12 languages, ~143k pairs), teacher = student = minilm-en, dev = 500 rows of STS Multi MT dev in en-en, en-de,
en-fr, en-ru, en-zh every ``--eval-every`` steps (the curve), and evaluates the best checkpoint on STS Multi MT
**test**: EN-EN and the 12 cross-lingual pairs of the fine-tuning comparison.
Rows: the minilm-en baseline, minilm-en with the extended
vocabulary before any training (same data, same initialisation as the run), and the trained student.
Writes ``<out>/multilingual-student-<run name>.json`` and ``.md``. ``--quick`` (:data:`QUICK`): 2 steps on 16 en-de
pairs, a 128-piece vocabulary, dev on 32 en-de rows, test on en-en and en-de; the run and the results go to a temporary
folder unless ``--run`` / ``--out`` are given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, TEST_PAIRS, machine, output_dir, spearman_table, test_scores
from mlse.atomic import atomic_write_text
from mlse.encoders import load_encoder
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune
from mlse.train.finetune_data import prepare_data
from mlse.train.student_model import load_student

DEV_PAIRS = ["en-en", "en-de", "en-fr", "en-ru", "en-zh"]
QUICK = {
    "config": {
        "pairs": ["en-de"],
        "max_pairs": 16,
        "max_steps": 2,
        "batch_size": 8,
        "dev_pairs": ["en-de"],
        "dev_max_pairs": 32,
        "eval_every_steps": 1,
        "budget_minutes": 2.0,
        "extend_vocab": 128,
    },
    "test_pairs": ["en-en", "en-de"],
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.multilingual_student", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--method", default="mse", choices=["mse", "ema", "soft", "hard"])
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--extend-vocab", type=int, default=30000)
    parser.add_argument("--eval-every", type=int, default=150)
    parser.add_argument("--tcm-alpha", type=float, default=0.0)
    parser.add_argument("--run", default=None, help="default runs/minilm-multi-mse60 (--quick: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="evaluate an existing finished run instead of training")
    parser.add_argument("--student", default="minilm-en", help="student, teacher and baseline row")
    parser.add_argument("--out", default=None, help="default results/finetune (--quick: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    quick = QUICK if args.quick else {"config": {}, "test_pairs": TEST_PAIRS}
    run = Path(
        args.run
        or (output_dir(None, True, "", "multilingual-student") / "quick" if args.quick else "runs/minilm-multi-mse60")
    )
    settings = {
        "lr": args.lr,
        "budget_minutes": args.budget_minutes,
        "max_pairs": None,
        "extend_vocab": args.extend_vocab,
        "eval_every_steps": args.eval_every,
        "dev_pairs": DEV_PAIRS,
        "dev_max_pairs": 500,
        **quick["config"],
    }
    cfg = FinetuneConfig(
        method=args.method,
        teacher=None if args.method in ("ema", "hard") else args.student,
        student=args.student,
        tcm_alpha=args.tcm_alpha,
        out=str(run),
        **settings,
    )
    args.extend_vocab, args.budget_minutes = cfg.extend_vocab, cfg.budget_minutes
    test_pairs = quick["test_pairs"]
    if not (args.reuse and (run / "metrics.json").is_file()):
        t0 = time.perf_counter()
        finetune(
            cfg, progress=lambda r: print({k: r.get(k) for k in ("step", "elapsed_s", "dev_spearman")}, flush=True)
        )
        print(f"trained in {time.perf_counter() - t0:.0f} s")
    metrics = json.loads((run / "metrics.json").read_text())
    config = json.loads((run / "finetune_config.json").read_text())
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]

    rows = {f"{args.student} (baseline)": test_scores(load_encoder(args.student), test_pairs)}
    if args.extend_vocab:
        from mlse.train.recipes.vocab import extend_model_vocabulary

        data = prepare_data(cfg)
        student = load_student(args.student, "cpu", cfg.max_seq_length).eval()
        extend_model_vocabulary(
            student, data.tgt, vocab_size=args.extend_vocab, parallel=(data.src, data.tgt), init=cfg.vocab_init
        )
        with tempfile.TemporaryDirectory() as tmp:  # through the registry's own loader, like any model folder
            student.save(tmp, create_model_card=False)
            rows["+ vocabulary extension, untrained"] = test_scores(load_encoder(tmp, cache=False), test_pairs)
    rows[f"{run.name} ({args.method}, {args.budget_minutes:g} min)"] = test_scores(
        load_encoder(str(run / "model"), cache=False), test_pairs
    )
    curve = [
        {
            "minutes": round(r["elapsed_s"] / 60, 2),
            "step": r["step"],
            "dev_mean": r["dev_spearman"],
            **{f"dev_{k}": v for k, v in r["dev"].items()},
        }
        for r in log
    ]
    config_keys = (
        "method",
        "lr",
        "batch_size",
        "budget_minutes",
        "extend_vocab",
        "precision_effective",
        "vocab_extension",
        "max_pairs",
    )
    metric_keys = (
        "steps",
        "epochs",
        "sentences_per_s",
        "best_step",
        "best_dev_spearman",
        "train_s",
        "eval_s",
        "prepare_s",
        "n_pairs",
    )
    result = {
        "run": str(run),
        "config": {k: config.get(k) for k in config_keys},
        "metrics": {k: metrics.get(k) for k in metric_keys},
        "test_spearman": rows,
        "curve": curve,
        "quick": args.quick,
        **machine(),
    }
    out = output_dir(args.out, args.quick, "results/finetune", "multilingual-student")
    out.mkdir(parents=True, exist_ok=True)
    stem = f"multilingual-student-{run.name}"
    atomic_write_text(out / f"{stem}.json", json.dumps(result, indent=1, default=str))
    curve_md = "\n".join(
        f"| {c['minutes']:.1f} | {c['step']} | {c['dev_mean']:.1f} | "
        + " | ".join(f"{c.get('dev_' + p, float('nan')):.1f}" for p in DEV_PAIRS)
        + " |"
        for c in curve
    )
    text = (
        f"{spearman_table(rows)}\n\nDev curve (STS Multi MT dev, 500 rows per pair, Spearman x 100):\n\n"
        f"| minutes | step | mean | "
        + " | ".join(DEV_PAIRS)
        + " |\n|---:|---:|---:|"
        + "---:|" * len(DEV_PAIRS)
        + f"\n{curve_md}\n"
    )
    atomic_write_text(out / f"{stem}.md", text)
    print(text)
    if args.quick and args.run is None:
        shutil.rmtree(run.parent, ignore_errors=True)  # a quick run's trained model is of no further use


if __name__ == "__main__":
    main()
