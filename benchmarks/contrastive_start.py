"""Where contrastive fine-tuning of ``me5-small`` starts: student and teacher batch geometry at temperature T.

    python -m benchmarks.contrastive_start [--batches 8] [--batch-size 64] [--temperatures 0.1,0.05,0.02,0.01]
    python -m benchmarks.contrastive_start --quick [--student PATH --priority-teacher PATH --average-teacher PATH]

Why it exists: in the distillation study (``python -m mlse experiment students``) the soft and hard contrastive
recipes start from a student whose dev score they first *lower*. This script measures, before any training step,
what the loss asks of the student on the study's own training batches (the same contamination-filtered en-xx pairs,
``max_pairs`` per pair, shuffled across languages as the trainer does):

- **cosines**: mean cosine of a translation pair (src_i, tgt_i) and of a non-matching pair (src_i, tgt_j, i != j),
  per model (the student ``me5-small``, the teachers ``muse`` and ``minilm-en``).
- **per temperature T**: the mass the labels put on the translation (hard: 1; soft priority from ``minilm-en``; soft
  average from ``muse``), the probability the untouched student already gives it (mean of the row softmax of
  cos(src_i, tgt_j) / T at j = i), and the loss at the start minus its minimum (the labels' entropy), i.e. the
  KL divergence the first steps have to remove. The loss functions are :mod:`mlse.losses`' own.

Prints one Markdown table and writes ``<out>/contrastive-start.json`` atomically. ``--quick``: one batch of 8 en-de
pairs, two temperatures, ``minilm-en`` in every role unless a role's model is given, a temporary folder unless
``--out`` is given.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from benchmarks.common import QUICK_HELP, machine, output_dir, study_batches
from mlse.atomic import atomic_write_text
from mlse.experiments.distillation import COMMON
from mlse.losses.soft_contrastive import soft_contrastive_loss, soft_labels
from mlse.models import load_model

MODELS = {"student": "me5-small", "priority teacher": "minilm-en", "average teacher": "muse"}


def entropy(labels: torch.Tensor) -> float:
    """Mean row entropy of a row-stochastic matrix: the soft cross-entropy's minimum."""
    return float(-(labels * labels.clamp_min(1e-12).log()).sum(-1).mean())


# label name -> (teacher role in MODELS, soft-label mode); None: hard labels, no teacher
LABELS: dict[str, tuple[str, str] | None] = {
    "hard": None,
    "soft priority (minilm-en)": ("priority teacher", "priority"),
    "soft average (muse)": ("average teacher", "average"),
}


def batch_labels(label: str, emb: dict, i: int, temperature: float) -> torch.Tensor:
    """The [B, B] targets of batch ``i`` for one of :data:`LABELS`, as the study's losses build them."""
    if LABELS[label] is None:
        return torch.eye(len(emb["student"][i][0]))
    role, mode = LABELS[label]
    src, tgt = emb[role][i]
    return soft_labels(src, tgt if mode == "average" else None, mode=mode, temperature=temperature)


def measure(data, temperatures: list[float], models: dict[str, str] = MODELS) -> dict:
    """``models``: role -> model name, the roles of :data:`MODELS`."""
    emb = {}
    for role, name in models.items():
        model = load_model(name)
        emb[role] = [(torch.from_numpy(model.encode(s)), torch.from_numpy(model.encode(t))) for s, t in data]
    out = {"cosines": {}, "temperatures": {}}
    for role, name in models.items():
        trans, other = [], []
        for s, t in emb[role]:
            cos = s @ t.T  # [B, B], rows normalised
            off = ~torch.eye(len(cos), dtype=torch.bool)
            trans.append(float(cos.diagonal().mean()))
            other.append(float(cos[off].mean()))
        out["cosines"][name] = {"translation": float(np.mean(trans)), "non_matching": float(np.mean(other))}
    for temp in temperatures:
        rows = {}
        for label in LABELS:
            mass, kl = [], []
            for i, (s, t) in enumerate(emb["student"]):
                y = batch_labels(label, emb, i, temp)
                mass.append(float(y.diagonal().mean()))
                kl.append(float(soft_contrastive_loss(s, t, y, temperature=temp)) - entropy(y))
            rows[label] = {"label_mass_on_translation": float(np.mean(mass)), "start_kl": float(np.mean(kl))}
        student_p = [float(torch.softmax(s @ t.T / temp, dim=-1).diagonal().mean()) for s, t in emb["student"]]
        out["temperatures"][str(temp)] = {"student_p_translation": float(np.mean(student_p)), "labels": rows}
    return out


def table(result: dict) -> str:
    lines = ["| model | cos(translation) | cos(non-matching) |", "|---|---:|---:|"]
    lines += [f"| {m} | {c['translation']:.3f} | {c['non_matching']:.3f} |" for m, c in result["cosines"].items()]
    labels = list(next(iter(result["temperatures"].values()))["labels"])
    lines += [
        "",
        "| T | student p(translation) | " + " | ".join(f"{lab}: label mass / start KL" for lab in labels) + " |",
        "|---:|---:|" + "---:|" * len(labels),
    ]
    for temp, r in result["temperatures"].items():
        cells = [
            f"{r['labels'][lab]['label_mass_on_translation']:.3f} / {r['labels'][lab]['start_kl']:.2f}"
            for lab in labels
        ]
        lines.append(f"| {temp} | {r['student_p_translation']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.contrastive_start", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=COMMON["batch_size"])
    parser.add_argument("--temperatures", default="0.1,0.05,0.02,0.01")
    parser.add_argument("--seed", type=int, default=COMMON["seed"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="default results/contrastive-start (--quick: a temporary folder)")
    for role, name in MODELS.items():
        parser.add_argument(f"--{role.replace(' ', '-')}", default=None, help=f"default {name} (--quick: minilm-en)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.batch_size, args.temperatures = 1, 8, "0.1,0.02"
    models = {
        role: getattr(args, role.replace(" ", "_")) or ("minilm-en" if args.quick else name)
        for role, name in MODELS.items()
    }
    temps = [float(t) for t in args.temperatures.split(",")]
    quick = (["en-de"], 64) if args.quick else ()
    data = study_batches(args.batches, args.batch_size, args.seed, args.data_dir, *quick)
    result = {
        "batches": args.batches,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "quick": args.quick,
        "models": models,
        **machine(),
        **measure(data, temps, models),
    }
    out = output_dir(args.out, args.quick, "results/contrastive-start", "contrastive-start")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "contrastive-start.json", json.dumps(result, indent=1) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
