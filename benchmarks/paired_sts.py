"""One model against another on STS Multi MT test, pair by pair, with paired bootstrap CIs of the difference.

    python -m benchmarks.paired_sts --a runs/students/ema-frozen-cosent+lora --b muse [--name NAME]
    python -m benchmarks.paired_sts --quick --a PATH --b PATH

Why it exists: "the student is ahead of mUSE" needs more than two numbers per pair. Each model's Spearman CI comes
from its own resamples, and two overlapping CIs say little about the difference when both models find the same
pairs hard. Here every resample of a pair's rows scores both models (:func:`mlse.evaluation.sts.
paired_spearman_difference`), so the interval is that of A - B. Predictions come from the embedding cache when the
models were evaluated before. Pairs: en-en and the cross-12 (:data:`mlse.data.pairs.CROSS_12`).

Writes ``<out>/paired-<name>.json`` and ``.md`` atomically (default out ``results/students/sts-term``); the table
marks a pair where A is ahead by >= 2 points (the issue's target) and where the CI excludes 0. ``--quick``: en-de
only, 50 resamples, a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text
from mlse.data.pairs import CROSS_12
from mlse.data.portable import portable_record, portable_text
from mlse.evaluation.runners import sts_pair_predictions
from mlse.evaluation.sts import paired_spearman_difference
from mlse.models import load_model

TARGET_LEAD = 2.0  # points of Spearman x 100 ahead of the other model on every cross-lingual pair (issue 30)


def compare(a: str, b: str, pairs: list[str], n_boot: int, data_dir=None) -> list[dict]:
    models = {"a": load_model(a), "b": load_model(b)}
    rows = []
    for pair in pairs:
        ds, pred_a = sts_pair_predictions(models["a"], pair, "test", data_dir=data_dir)
        _, pred_b = sts_pair_predictions(models["b"], pair, "test", data_dir=data_dir)
        rows.append(
            {"pair": pair, "n": len(ds), **paired_spearman_difference(pred_a, pred_b, ds.scores, n_boot=n_boot)}
        )
    return rows


def markdown(a: str, b: str, rows: list[dict]) -> str:
    lines = [
        f"| pair | {a} | {b} | A - B | 95 % CI (paired) | A ahead by >= {TARGET_LEAD:g} | CI excludes 0 |",
        "|---|---:|---:|---:|---|:---:|:---:|",
    ]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"| {r['pair']} | {r['a']:.1f} | {r['b']:.1f} | {r['difference']:+.1f} | [{lo:+.1f}, {hi:+.1f}] | "
            f"{'yes' if r['difference'] >= TARGET_LEAD else 'no'} | {'yes' if lo > 0 or hi < 0 else 'no'} |"
        )
    cross = [r for r in rows if r["pair"] in CROSS_12]
    if cross:
        ahead = sum(r["difference"] >= TARGET_LEAD for r in cross)
        sure = sum(r["ci95"][0] > 0 for r in cross)
        lines += [
            "",
            f"Cross-lingual pairs: A ahead by >= {TARGET_LEAD:g} on {ahead} of {len(cross)}; A ahead with a CI above 0 "
            f"on {sure} of {len(cross)}.",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.paired_sts", description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="model A (a name, a folder, a run)")
    parser.add_argument("--b", default="muse", help="model B (default muse)")
    parser.add_argument("--name", default=None, help="result file name (default: A's last path part vs B)")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--out", default=None, help="result folder (default results/students/sts-term)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    pairs = ["en-de"] if args.quick else ["en-en", *CROSS_12]
    rows = compare(args.a, args.b, pairs, 50 if args.quick else args.boot)
    name = args.name or f"{Path(args.a).name}-vs-{Path(args.b).name}"
    a, b = portable_text(args.a), portable_text(args.b)  # a model folder named by its portable form in the files
    table = markdown(a, b, rows)
    out = output_dir(args.out, args.quick, "results/students/sts-term", "paired-sts")
    out.mkdir(parents=True, exist_ok=True)
    command = f"python -m benchmarks.paired_sts --a {a} --b {b}"
    record = portable_record({"a": a, "b": b, "command": command, "quick": args.quick, "rows": rows, **machine()})
    atomic_write_text(out / f"paired-{name}.json", json.dumps(record, indent=1) + "\n")
    atomic_write_text(out / f"paired-{name}.md", f"`{command}` (STS Multi MT test, Spearman x 100)\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
