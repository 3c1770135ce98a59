"""Training throughput of one MSE distillation step on minilm-en: fp32 vs bf16, bucketing, vocabulary extension.

    python benchmarks/finetune_speed.py [--steps 12] [--batch-size 64] [--out results/finetune/finetune-speed.json]

Each setting runs ``--steps`` optimiser steps (the first two are warm-up and not timed) of the real training step
(:meth:`mlse.train.loop.TrainingLoop.train_step` with the mse method, both sides through the student) on the
contamination-filtered English-X pairs, with the number of threads torch uses by default. Reports sentences per
second (student forward + backward).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlse.atomic import atomic_write_text  # noqa: E402
from mlse.train.config import FinetuneConfig  # noqa: E402
from mlse.train.finetune_data import prepare_data, teacher_targets  # noqa: E402
from mlse.train.loop import TrainingLoop  # noqa: E402
from mlse.train.methods import build_method  # noqa: E402
from mlse.train.students import extend_vocabulary, load_student, resolve_precision  # noqa: E402

SETTINGS = {
    "fp32, no bucketing, English vocabulary": dict(precision="fp32", bucket_by_length=False, extend_vocab=0),
    "bf16, no bucketing, English vocabulary": dict(precision="bf16", bucket_by_length=False, extend_vocab=0),
    "bf16, bucketing, English vocabulary": dict(precision="bf16", bucket_by_length=True, extend_vocab=0),
    "bf16, bucketing, extended vocabulary (30k)": dict(precision="bf16", bucket_by_length=True, extend_vocab=30000),
}


def measure(settings: dict, steps: int, batch_size: int) -> dict:
    cfg = FinetuneConfig(method="mse", max_pairs=2000, batch_size=batch_size, out="/tmp/mlse-finetune-speed",
                         dev_max_pairs=8, **settings)  # fmt: skip
    data = prepare_data(cfg)
    student = load_student(cfg.student, "cpu", cfg.max_seq_length)
    if cfg.extend_vocab:
        extend_vocabulary(cfg, student, data)
    t_src, t_tgt, _ = teacher_targets(cfg, data, 384, "cpu")
    precision = resolve_precision(cfg.precision, "cpu")
    method = build_method(cfg, student, data, (t_src, t_tgt), "cpu", precision)
    lengths = np.array([max(len(a), len(b)) for a, b in zip(data.src, data.tgt)]) if cfg.bucket_by_length else None
    run = TrainingLoop(cfg, student, method, len(data.src), lengths, evaluate=lambda should_stop: {},
                       save=lambda: None, device="cpu")  # fmt: skip
    run.started = run.clock()
    for _ in range(2):
        run.train_step()
    sentences, t0 = run.sentences, time.perf_counter()
    for _ in range(steps - 2):
        run.train_step()
    seconds = time.perf_counter() - t0
    return {"sentences_per_s": round((run.sentences - sentences) / seconds, 1), "timed_steps": steps - 2,
            "precision": precision}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default="results/finetune/finetune-speed.json")
    args = parser.parse_args()
    results = {}
    for name, settings in SETTINGS.items():
        results[name] = measure(settings, args.steps, args.batch_size)
        print(name, results[name], flush=True)
    atomic_write_text(Path(args.out), json.dumps({"batch_size": args.batch_size, "results": results}, indent=1))


if __name__ == "__main__":
    main()
