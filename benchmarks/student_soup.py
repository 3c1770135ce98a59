"""Two students in one: a weight soup of the STS student and the retrieval student, evaluated as the study evaluates.

    python -m benchmarks.student_soup --members runs/students/A,runs/students/B --weights 0.5,0.5 [--name NAME]
    python -m benchmarks.student_soup --quick --base TINY --members TINY,TINY --weights 0.5,0.5

Why: the scored pairs raise STS and lower retrieval the longer they pull (``ema-frozen-cosent-w0.01+lora@60``: cross-12
77.4, Tatoeba-14 91.2), while the contrastive recipes keep retrieval (``hard-t0.01-cosent+lora``: 75.1, 92.9). Both are
``me5-small`` plus a task vector, so ``base + sum_i w_i (student_i - base)`` (:mod:`mlse.encoders.weight_soup`)
asks whether one model keeps both. Members: run folders of the study (their merged ``model``) or any
sentence-transformers folder fine-tuned from ``--base`` (default ``me5-small``).

The soup is written to ``<runs>/soups/<name>`` and evaluated like a student (STS Multi MT test, 17 pairs with CIs;
Tatoeba-14 both ways, margin, xSIM): ``<out>/<name>.json`` in the study's record format, so ``python -m mlse experiment
students --report-only --out <out>`` tables it beside the students (default out ``results/students/soups``). The record
also holds the soup's STS Multi MT **dev** Spearman (the study's dev pairs, full split, ``dev``), so that soups are
chosen between on dev, never on test. Its CPU cost is the members' training (a soup trains nothing). ``--quick``:
en-de and one Tatoeba language, temporary folders unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text
from mlse.data.pairs import STUDY_DEV_PAIRS
from mlse.data.portable import portable_record
from mlse.dirs import runs_dir
from mlse.encoders.catalogue import materialise, resolve_model
from mlse.encoders.weight_soup import build_soup
from mlse.errors import MlseError
from mlse.experiments.distillation import evaluate_student


def model_folder(name: str) -> Path:
    """A study run folder -> its merged ``model``; any other name -> its local sentence-transformers folder."""
    path = Path(name)
    if (path / "model" / "modules.json").is_file():
        return path / "model"
    return materialise(resolve_model(name))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.student_soup", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="me5-small", help="the model every member was fine-tuned from")
    parser.add_argument("--members", required=True, help="comma-separated run folders or model folders")
    parser.add_argument(
        "--weights", required=True, help="comma-separated, one per member (e.g. 0.5,0.5 or 1/3,1/3,1/3)"
    )
    parser.add_argument("--name", default=None, help="soup name (default: members and weights)")
    parser.add_argument("--out", default=None, help="result folder (default results/students/soups)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    members = [m.strip() for m in args.members.split(",") if m.strip()]
    try:
        weights = [float(Fraction(w.strip())) for w in args.weights.split(",")]  # 0.5 or 1/3
    except (ValueError, ZeroDivisionError):
        raise SystemExit(f"--weights takes numbers separated by commas, got {args.weights!r}") from None
    if len(weights) != len(members):
        raise SystemExit(f"--weights: {len(weights)} weights for {len(members)} members")
    name = args.name or "soup-" + "-".join(f"{Path(m).name}x{w:g}" for m, w in zip(members, weights, strict=True))
    out = output_dir(args.out, args.quick, "results/students/soups", "student-soup")
    runs = Path(tempfile.mkdtemp(prefix="mlse-soup-")) if args.quick else runs_dir() / "soups"
    t0 = time.perf_counter()
    try:
        folder = build_soup(model_folder(args.base), [model_folder(m) for m in members], weights, runs / name)
    except MlseError as exc:
        raise SystemExit(f"error: {exc}") from None
    built_s = time.perf_counter() - t0
    quick = (
        {"pairs": ["en-de"], "langs": ["deu"], "dev_pairs": ["en-de"]} if args.quick else {"dev_pairs": STUDY_DEV_PAIRS}
    )
    record = {
        "recipe": name,
        "soup": {"base": args.base, "members": members, "weights": weights, "build_s": round(built_s, 1)},
        "command": f"python -m benchmarks.student_soup --members {','.join(members)} --weights {args.weights}",
        "quick": args.quick,
        # model, identity, sts, tatoeba and dev, from one load of the soup
        **evaluate_student(str(folder), data_dir=args.data_dir, **quick),
        **machine(),
    }
    if args.quick:
        shutil.rmtree(runs, ignore_errors=True)  # a quick soup is not kept
    out.mkdir(parents=True, exist_ok=True)
    record = portable_record(json.loads(json.dumps(record, default=str)), args.data_dir)  # no absolute path
    atomic_write_text(out / f"{name}.json", json.dumps(record, indent=1) + "\n")
    spearman = {p: s["spearman"] for p, s in record["sts"]["scores"].items()}
    tatoeba = record["tatoeba"]["averages"]["all"]
    print(
        f"{name}: Spearman {spearman}; Tatoeba {tatoeba['acc_mean']:.1f}, xSIM {tatoeba['xsim_error']:.1f}; "
        f"dev mean {record['dev']['mean']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
