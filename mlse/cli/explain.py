"""``python -m mlse explain --model NAME S1 S2``: which word pairs make up a model's cosine for two sentences.

Prints the cosine, its split (token pairs + reference terms + residual, :mod:`mlse.explain.explanation`) and the top
word pairs; ``--align`` adds the word alignment (not an explanation of the score); ``--json-out FILE`` writes every
number. ``--drop`` / ``--edit1`` ... score the edited pair (:func:`mlse.explain.what_if`) beside the predicted change.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.cli.args import add_backend_argument
from mlse.encoders.catalogue import DEFAULT_MODEL
from mlse.errors import MlseError


def add_explain_parser(sub) -> None:
    """Register ``explain`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    ex = sub.add_parser(
        "explain",
        help="why this score? token-pair attributions of a model's cosine for two sentences",
        description="Attribute a model's cosine of two sentences to word pairs with integrated "
        "Jacobians (Moeller, Nikolaev & Pado, EMNLP 2023): cosine = sum of the pairs "
        "+ reference terms + residual.",
    )
    ex.add_argument("sentence1")
    ex.add_argument("sentence2")
    ex.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"a torch sentence-transformers model or muse (default {DEFAULT_MODEL})"
    )
    add_backend_argument(ex, help_text="runtime (only torch can be differentiated)")
    ex.add_argument("--steps", type=int, default=None, help="integration points (default 12; muse 64)")
    ex.add_argument(
        "--layer",
        type=int,
        default=None,
        help="attribute to the hidden states after this many layers (0: the word-piece embeddings; "
        "default: half the model's depth)",
    )
    ex.add_argument(
        "--rule",
        choices=["gauss", "midpoint"],
        default=None,
        help="quadrature: Gauss-Legendre (default) or the midpoint Riemann sum (muse's default)",
    )
    ex.add_argument(
        "--precision",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="the derivatives' matrix products (auto: bfloat16 where the CPU computes it natively)",
    )
    ex.add_argument("--top", type=int, default=5, help="word pairs to print (default 5)")
    ex.add_argument("--align", action="store_true", help="also print each word's best contextual match")
    ex.add_argument("--json-out", default=None, help="write the matrix, the words and the numbers to this JSON file")
    what = ex.add_argument_group("what if? (score and explain an edit of the pair)")
    what.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="WORD",
        help="delete WORD from whichever sentence holds it (repeatable; all given words are deleted together)",
    )
    what.add_argument("--drop1", action="append", default=[], metavar="WORD", help="delete WORD from sentence 1 only")
    what.add_argument("--drop2", action="append", default=[], metavar="WORD", help="delete WORD from sentence 2 only")
    what.add_argument("--edit1", default=None, metavar="TEXT", help="score sentence 1 rewritten as TEXT instead")
    what.add_argument("--edit2", default=None, metavar="TEXT", help="score sentence 2 rewritten as TEXT instead")


def explanation_lines(explanation, top: int) -> list[str]:
    """The printed report of an :class:`mlse.explain.Explanation`."""
    e = explanation
    lines = [
        f"{e.model}: cosine {e.score:.4f}  (layer {e.layer}, {e.steps} {e.rule} steps, {e.precision}, "
        f"{e.seconds:.1f} s)",
        f"  = token pairs {e.attributed:+.4f} + reference terms {e.reference_terms:+.4f} + residual "
        f"{e.residual:+.4f}  (residual {100 * e.relative_residual:.1f}% of cosine - reference terms)",
    ]
    if any(e.special1) or any(e.special2):
        lines.append(
            f"  of the token pairs, {e.special_terms:+.4f} sit in rows or columns of special tokens or the prompt"
        )
    lines += [f"  note: {note}" for note in e.notes]
    pairs = e.top_pairs(top)
    if pairs:
        lines.append(f"top {len(pairs)} word pairs (positive: pushes the cosine up, negative: pulls it down):")
        width = max(len(w1) for w1, _, _ in pairs)
        lines += [f"  {v:+.4f}  {w1.ljust(width)} <-> {w2}" for w1, w2, v in pairs]
    if e.token_terms1 is not None and top:
        lines.append(
            "words carrying the most (all their pairs + their own term against the other sentence's reference):"
        )
        for n, ranked in enumerate(e.top_words(3), 1):
            lines.append(f"  sentence {n}: " + ", ".join(f"{w} {v:+.4f}" for w, v in ranked))
    return lines


def _calibrated(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def what_if_lines(change, top: int) -> list[str]:
    """The printed report of a :class:`mlse.explain.WhatIf`: the edited pair, old vs new score, the change and the
    change the explanation predicted, then the edited pair's explanation."""
    w = change
    lines = ["what if?"]
    for n, (before, after) in enumerate(((w.sentence1, w.edited1), (w.sentence2, w.edited2)), 1):
        if after != before:
            lines.append(f"  sentence {n}: {after}")
    lines.append(f"  cosine {w.score:.4f} -> {w.new_score:.4f}  (change {w.delta:+.4f})")
    if w.calibrated_delta is not None:
        before, after = _calibrated(w.calibrated), _calibrated(w.new_calibrated)
        lines.append(f"  0-5    {before} -> {after}  (change {w.calibrated_delta:+.2f})")
    parts = w.predicted_parts
    if parts is None:
        lines.append("  predicted: none (the edit is not a deletion of whole words; the explanation speaks of words)")
    else:
        pairs, own, missed = parts
        lines.append(
            f"  predicted by the explanation: {w.predicted_delta:+.4f} (minus what the dropped words contribute: "
            f"their pairs {pairs:+.4f}, their own terms {own:+.4f}); missed {missed:+.4f}"
        )
        for effect in w.word_effects():
            lines.append(
                f"    sentence {effect['sentence']}: {effect['word']}  total {effect['total']:+.4f} = pairs "
                f"{effect['pairs']:+.4f} + own term {effect['own_term']:+.4f}"
            )
    if w.new_explanation is not None:
        lines.append("the edited pair explained:")
        lines += [f"  {line}" for line in explanation_lines(w.new_explanation, top)]
    return lines


def alignment_lines(alignment) -> list[str]:
    lines = ["alignment (contextual token similarity; not an explanation of the score):"]
    width = max((len(w) for w in alignment.words1), default=0)
    for w1, w2, sim in alignment.matches1():
        lines.append(f"  {w1.ljust(width)} -> {w2}  ({sim:.2f})")
    return lines


def cmd_explain(args: argparse.Namespace) -> int:
    from mlse.explain import align_tokens, explain_pair, what_if
    from mlse.models import load_model

    if args.steps is not None and args.steps < 1:
        raise MlseError(f"--steps must be a positive integer, got {args.steps}")
    if args.top < 0:
        raise MlseError(f"--top must be 0 or more, got {args.top}")
    out = Path(args.json_out) if args.json_out else None
    if out is not None and out.is_dir():
        raise MlseError(f"--json-out {args.json_out}: is a folder, expected a file name such as explanation.json")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    model = load_model(args.model, backend=args.backend)
    setting = {"steps": args.steps, "layer": args.layer, "rule": args.rule, "precision": args.precision}
    explanation = explain_pair(model, args.sentence1, args.sentence2, **setting)
    lines = explanation_lines(explanation, args.top)
    payload = explanation.to_dict()
    if args.align:
        alignment = align_tokens(model, args.sentence1, args.sentence2)
        lines += alignment_lines(alignment)
        payload["alignment"] = alignment.to_dict()
    if args.drop or args.drop1 or args.drop2 or args.edit1 is not None or args.edit2 is not None:
        change = what_if(
            model,
            args.sentence1,
            args.sentence2,
            drop=args.drop,
            drop1=args.drop1,
            drop2=args.drop2,
            edited1=args.edit1,
            edited2=args.edit2,
            explanation=explanation,
        )
        lines += what_if_lines(change, args.top)
        payload["what_if"] = {k: v for k, v in change.to_dict().items() if k != "explanation"}
    print("\n".join(lines))
    if out is not None:
        try:
            atomic_write_text(out, json.dumps(payload, ensure_ascii=False, indent=1) + "\n")
        except OSError as exc:
            raise MlseError(
                f"--json-out {args.json_out}: cannot write it ({exc.strerror or type(exc).__name__})"
            ) from None
        print(f"wrote {out}", file=sys.stderr)
    return 0
