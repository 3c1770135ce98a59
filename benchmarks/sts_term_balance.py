"""How strongly the supervised STS term pulls against a distillation loss: gradient norms at the untouched student.

    python -m benchmarks.sts_term_balance [--model me5-small] [--batches 5]
    python -m benchmarks.sts_term_balance --quick [--model PATH]

Why it exists: the students study adds ``sts_weight`` x a ranking loss (CoSENT or AnglE, :mod:`mlse.train.sts_term`)
to a distillation loss. The two live on very different scales -- an element-mean MSE between unit-length embeddings
is about 1e-4, a CoSENT loss over 32 pairs a few units -- and AdamW only sees their sum, so the weight decides which
of the two the student follows. This script measures, on the study's own batches (64 contamination-filtered en-xx
translation pairs; 32 scored STS Multi MT train pairs in random language pairings), the norm of the gradient each
loss sends into the student's weights, and the ratio of the medians.

Losses: ``ema-frozen`` (MSE(student(tgt), start(src)), Ham & Kim's loss with the frozen start as teacher; before the
first step the student *is* its start), ``hard-t0.01`` / ``hard-t0.02`` (in-batch InfoNCE at e5-like temperatures,
the study's contrastive recipes), ``cosent`` and ``angle``. Writes ``<out>/sts-term-balance.json`` atomically.
``--quick``: one batch of 8 pairs, a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from benchmarks.common import QUICK_HELP, machine, output_dir, study_batches
from mlse.atomic import atomic_write_text
from mlse.data.sts_train import load_sts_train
from mlse.losses.angle import angle_loss
from mlse.losses.contrastive import hard_contrastive_loss
from mlse.losses.cosent import cosent_loss
from mlse.train.student_model import load_student, tokenize

HARD = {"hard-t0.01": 0.01, "hard-t0.02": 0.02}  # the study's contrastive recipes at e5-like temperatures


def gradient_norm(student, loss) -> float:
    student.zero_grad()
    loss.backward()
    return float(torch.sqrt(sum((p.grad.float() ** 2).sum() for p in student.parameters() if p.grad is not None)))


def measure(model: str, n_batches: int, batch_size: int, sts_batch_size: int, seed: int = 0, pairs=None) -> dict:
    torch.manual_seed(seed)
    student = load_student(model, "cpu", 128)

    def embed(texts):
        return student(tokenize(student, texts, "cpu"))["sentence_embedding"]

    rows = load_sts_train()
    rng = np.random.default_rng(seed)
    norms: dict[str, list[float]] = {k: [] for k in ("ema-frozen", *HARD, "cosent", "angle")}
    losses: dict[str, list[float]] = {k: [] for k in norms}
    for src, tgt in study_batches(n_batches, batch_size, seed, pairs=pairs, max_pairs=64 if pairs else None):
        with torch.no_grad():
            start_src = embed(src)  # the frozen start's embeddings of the English side
        loss = torch.nn.functional.mse_loss(embed(tgt), start_src)
        losses["ema-frozen"].append(loss.item())
        norms["ema-frozen"].append(gradient_norm(student, loss))
        for name, temperature in HARD.items():  # in-batch InfoNCE: both sides are the student's
            loss = hard_contrastive_loss(embed(src), embed(tgt), temperature=temperature)
            losses[name].append(loss.item())
            norms[name].append(gradient_norm(student, loss))
        batch = rows.sample(rng, sts_batch_size)
        scores = torch.from_numpy(batch.scores)
        for name, fn in (("cosent", cosent_loss), ("angle", angle_loss)):
            loss = fn(embed(batch.texts1), embed(batch.texts2), scores)
            losses[name].append(loss.item())
            norms[name].append(gradient_norm(student, loss))
    median = {k: float(np.median(v)) for k, v in norms.items()}
    return {
        "model": model,
        "batches": n_batches,
        "translation_pairs_per_batch": batch_size,
        "sts_pairs_per_batch": sts_batch_size,
        "gradient_norm": norms,
        "loss": losses,
        "median_gradient_norm": median,
        "ratio_to_ema_frozen": {k: median[k] / median["ema-frozen"] for k in ("cosent", "angle")},
        "ratio_to_hard": {f"cosent/{h}": median["cosent"] / median[h] for h in HARD},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sts_term_balance", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="me5-small")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--out", default=None, help="result folder (default results/students/sts-term)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    sizes = (8, 8) if args.quick else (64, 32)
    pairs = ["en-de"] if args.quick else None  # quick: 64 en-de pairs, not the study's 5,000 per pair
    measured = measure(args.model, 1 if args.quick else args.batches, *sizes, pairs=pairs)
    result = {**measured, "quick": args.quick, **machine()}
    out = output_dir(args.out, args.quick, "results/students/sts-term", "sts-term-balance")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "sts-term-balance.json", json.dumps(result, indent=1) + "\n")
    ratio = result["ratio_to_ema_frozen"]
    print(
        f"median gradient norm: ema-frozen {result['median_gradient_norm']['ema-frozen']:.3g}, cosent "
        f"{result['median_gradient_norm']['cosent']:.3g} ({ratio['cosent']:.0f}x), angle "
        f"{result['median_gradient_norm']['angle']:.3g} ({ratio['angle']:.0f}x); cosent / hard: "
        + ", ".join(f"{k.split('/')[1]} {v:.2g}x" for k, v in result["ratio_to_hard"].items())
        + f"; wrote {out}/sts-term-balance.json"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
