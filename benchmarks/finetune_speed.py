"""Training throughput of one MSE distillation step on minilm-en: fp32 vs bf16, bucketing, vocabulary extension.

    python -m benchmarks.finetune_speed [--steps 12] [--batch-size 64] [--out results/finetune/finetune-speed.json]
    python -m benchmarks.finetune_speed --quick [--student PATH]   # 3 steps of 8 pairs per setting, seconds

Each setting runs ``--steps`` optimiser steps (the first two are warm-up and not timed) of the real training step
(:meth:`mlse.train.loop.TrainingLoop.train_step` with the mse method, both sides through the student) on the
contamination-filtered English-X pairs, with the number of threads torch uses by default. Reports sentences per
second (student forward + backward). ``--quick`` (:data:`QUICK`): every setting for 3 steps (1 timed) of 8 pairs, a
128-piece vocabulary extension, written to a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text
from mlse.train.config import FinetuneConfig
from mlse.train.device import resolve_precision
from mlse.train.finetune_data import prepare_data, teacher_targets
from mlse.train.loop import TrainingLoop
from mlse.train.methods import build_method
from mlse.train.student_model import extend_vocabulary, load_student, student_dim

SETTINGS = {
    "fp32, no bucketing, English vocabulary": dict(precision="fp32", bucket_by_length=False, extend_vocab=0),
    "bf16, no bucketing, English vocabulary": dict(precision="bf16", bucket_by_length=False, extend_vocab=0),
    "bf16, bucketing, English vocabulary": dict(precision="bf16", bucket_by_length=True, extend_vocab=0),
    "bf16, bucketing, extended vocabulary (30k)": dict(precision="bf16", bucket_by_length=True, extend_vocab=30000),
}
QUICK = {"steps": 3, "batch_size": 8, "max_pairs": 32, "extend_vocab": 128}


def measure(
    settings: dict,
    steps: int,
    batch_size: int,
    student: str = "minilm-en",
    max_pairs: int = 2000,
    extend_vocab: int | None = None,
) -> dict:
    """``extend_vocab``: the size of the extension in the settings that extend (None: the setting's own)."""
    if extend_vocab is not None and settings["extend_vocab"]:
        settings = {**settings, "extend_vocab": extend_vocab}
    cfg = FinetuneConfig(
        method="mse",
        max_pairs=max_pairs,
        batch_size=batch_size,
        out="/tmp/mlse-finetune-speed",
        dev_max_pairs=8,
        student=student,
        teacher=student,
        **settings,
    )
    data = prepare_data(cfg)
    model = load_student(cfg.student, "cpu", cfg.max_seq_length)
    if cfg.extend_vocab:
        extend_vocabulary(cfg, model, data)
    t_src, t_tgt, _ = teacher_targets(cfg, data, student_dim(model), "cpu")
    precision = resolve_precision(cfg.precision, "cpu")
    method = build_method(cfg, model, data, (t_src, t_tgt), "cpu", precision)
    lengths = np.array([max(len(a), len(b)) for a, b in zip(data.src, data.tgt)]) if cfg.bucket_by_length else None
    run = TrainingLoop(
        cfg, model, method, len(data.src), lengths, evaluate=lambda stop: {}, save=lambda: None, device="cpu"
    )
    run.started = run.clock()
    for _ in range(2):
        run.train_step()
    sentences, t0 = run.sentences, time.perf_counter()
    for _ in range(steps - 2):
        run.train_step()
    seconds = time.perf_counter() - t0
    return {
        "sentences_per_s": round((run.sentences - sentences) / seconds, 1),
        "timed_steps": steps - 2,
        "precision": precision,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.finetune_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--student", default="minilm-en", help="student and teacher of the mse step")
    parser.add_argument(
        "--out", default=None, help="default results/finetune/finetune-speed.json (--quick: a temporary folder)"
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    quick = QUICK if args.quick else {"max_pairs": 2000, "extend_vocab": None}
    if args.quick:
        args.steps, args.batch_size = QUICK["steps"], QUICK["batch_size"]
    out = output_file(args.out, args.quick, "results/finetune/finetune-speed.json")
    results = {}
    for name, settings in SETTINGS.items():
        results[name] = measure(
            settings, args.steps, args.batch_size, args.student, quick["max_pairs"], quick["extend_vocab"]
        )
        print(name, results[name], flush=True)
    result = {
        "batch_size": args.batch_size,
        "student": args.student,
        "quick": args.quick,
        **machine(),
        "results": results,
    }
    atomic_write_text(out, json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
