"""A fine-tune on a CUDA GPU in each precision: that it runs (auto, fp32, bf16, fp16 with loss scaling) and how fast.

    python -m benchmarks.finetune_gpu --student PATH [--data-dir DIR] [--steps 60] [--batch-size 64]
                                      [--out results/finetune/finetune-gpu.json] [--quick]

Each precision runs :func:`mlse.train.finetune.finetune` end to end (method ``mse``, the student as its own frozen
teacher, the app's four English-X pairs at 2,000 pairs each, ``--steps`` optimiser steps, dev scored at the start and
the end on 100 rows per dev pair) on ``cuda``, and records what the run wrote: the precision it resolved, whether it
scaled the loss, the training data it read (a data directory with no ``parallel/`` folder gives the shipped sample,
as on a Space), sentences per second of training (student forward + backward), the seconds of preparation. Each run
is done twice and the second one timed: the first steps of every new batch shape in a dtype pick kernels, which took
2-10x longer in a first pass on an H200. Then the ``ema`` and ``soft`` methods run a few steps under fp16, whose
teacher paths differ. Refuses to run without CUDA (``--quick`` runs two steps on 32 pairs per language pair on the
CPU in fp32, to prove the script works).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text
from mlse.train.config import DEFAULT_TEACHER
from mlse.train.finetune import finetune

PRECISIONS = ("fp32", "bf16", "fp16", "auto")  # auto last: on a GPU with native bf16 it repeats bf16
KEEP = (
    "precision",
    "grad_scaler",
    "grad_scale",
    "device",
    "sentences_per_s",
    "steps",
    "train_s",
    "prepare_s",
    "training_data",
    "best_dev_spearman",
    "stop_reason",
)


def run(
    student: str,
    method: str,
    precision: str,
    steps: int,
    batch_size: int,
    data_dir: str | None,
    device: str,
    max_pairs: int = 2000,
) -> dict:
    from mlse.train.config import finetune_config

    out = tempfile.mkdtemp(prefix=f"mlse-gpu-{method}-{precision}-")
    cfg = finetune_config(
        method=method,
        student=student,
        teacher=student if method in ("mse", "soft") else None,
        pairs=["en-de", "en-fr", "en-ru", "en-zh"],
        max_pairs=max_pairs,
        batch_size=batch_size,
        max_steps=steps,
        eval_every_steps=10_000,
        dev_max_pairs=100,
        precision=precision,
        device=device,
        data_dir=data_dir,
        out=out,
        budget_minutes=30,
    )
    started = time.perf_counter()
    metrics = finetune(cfg)
    record = {k: metrics.get(k) for k in KEEP} | {"wall_s": round(time.perf_counter() - started, 2)}
    record["finetune_config"] = {
        k: v
        for k, v in json.loads((Path(out) / "finetune_config.json").read_text()).items()
        if k in ("precision_effective", "grad_scaler", "gpu", "native_bf16")
    }
    return record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.finetune_gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--student", default=DEFAULT_TEACHER, help="a sentence-transformers folder or model name")
    parser.add_argument("--student-note", default="", help="what the student is (recorded)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args()
    import torch

    if not args.quick and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here (use --quick to check the script on the CPU)")
    device = "cpu" if args.quick else "cuda"
    steps = 2 if args.quick else args.steps
    runs = {}
    plan = [("mse", p) for p in (("fp32",) if args.quick else PRECISIONS)]
    plan += [] if args.quick else [("ema", "fp16"), ("soft", "fp16")]
    for method, precision in plan:
        if not args.quick:  # each new batch shape is slow the first time in a dtype (kernel selection): the same run
            run(
                args.student,
                method,
                precision,
                steps if method == "mse" else 10,
                args.batch_size,
                args.data_dir,
                device,
            )  # once untimed, so that the timed run sees only shapes seen before
        runs[f"{method} {precision}"] = run(
            args.student,
            method,
            precision,
            steps if method == "mse" else 10,
            args.batch_size,
            args.data_dir,
            device,
            32 if args.quick else 2000,
        )
        print(f"{method} {precision}: {runs[f'{method} {precision}']}", flush=True)
    result = {
        "command": " ".join(["python -m benchmarks.finetune_gpu", *sys.argv[1:]]),
        "student": args.student,
        "student_note": args.student_note,
        "batch_size": args.batch_size,
        "machine": machine()
        | {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__},
        "runs": runs,
    }
    out = output_file(args.out, args.quick, "results/finetune/finetune-gpu.json")
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
