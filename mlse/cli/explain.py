"""``python -m mlse explain --model NAME S1 S2``: which word pairs make up a model's cosine for two sentences.

Prints the cosine, how it splits (token pairs + reference terms + residual, see :mod:`mlse.explain.explanation`) and
the top word pairs; ``--align`` adds the contextual word alignment (a different, cheaper view: not an explanation of
the score); ``--json-out FILE`` writes the matrix, the words and every number in one atomic write.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.encoders.identity import BACKENDS, DEFAULT_BACKEND
from mlse.encoders.registry import DEFAULT_MODEL
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
    ex.add_argument(
        "--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help="runtime (only torch can be differentiated)"
    )
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
    ex.add_argument("--top", type=int, default=5, help="word pairs to print (default 5)")
    ex.add_argument("--align", action="store_true", help="also print each word's best contextual match")
    ex.add_argument("--json-out", default=None, help="write the matrix, the words and the numbers to this JSON file")


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def explanation_lines(explanation, top: int) -> list[str]:
    """The printed report of an :class:`mlse.explain.Explanation`."""
    e = explanation
    lines = [
        f"{e.model}: cosine {e.score:.4f}  (layer {e.layer}, {e.steps} {e.rule} steps, {e.seconds:.1f} s)",
        f"  = token pairs {_signed(e.attributed)} + reference terms {_signed(e.reference_terms)} + residual "
        f"{_signed(e.residual)}  (residual {100 * e.relative_residual:.1f}% of cosine - reference terms)",
    ]
    if any(e.special1) or any(e.special2):
        lines.append(
            f"  of the token pairs, {_signed(e.special_terms)} sit in rows or columns of special tokens or the prompt"
        )
    lines += [f"  note: {note}" for note in e.notes]
    pairs = e.top_pairs(top)
    if pairs:
        lines.append(f"top {len(pairs)} word pairs (positive: pushes the cosine up, negative: pulls it down):")
        width = max(len(w1) for w1, _, _ in pairs)
        lines += [f"  {_signed(v)}  {w1.ljust(width)} <-> {w2}" for w1, w2, v in pairs]
    if e.token_terms1 is not None and top:
        lines.append(
            "words carrying the most (all their pairs + their own term against the other sentence's reference):"
        )
        for n, ranked in enumerate(e.top_words(3), 1):
            lines.append(f"  sentence {n}: " + ", ".join(f"{w} {_signed(v)}" for w, v in ranked))
    return lines


def alignment_lines(alignment) -> list[str]:
    lines = ["alignment (contextual token similarity; not an explanation of the score):"]
    width = max((len(w) for w in alignment.words1), default=0)
    for w1, w2, sim in alignment.matches1():
        lines.append(f"  {w1.ljust(width)} -> {w2}  ({sim:.2f})")
    return lines


def cmd_explain(args: argparse.Namespace) -> int:
    from mlse import api
    from mlse.explain import align_tokens, explain_pair

    if args.steps is not None and args.steps < 1:
        raise MlseError(f"--steps must be a positive integer, got {args.steps}")
    if args.top < 0:
        raise MlseError(f"--top must be 0 or more, got {args.top}")
    out = Path(args.json_out) if args.json_out else None
    if out is not None and out.is_dir():
        raise MlseError(f"--json-out {args.json_out}: is a folder, expected a file name such as explanation.json")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    model = api.load_model(args.model, backend=args.backend)
    explanation = explain_pair(
        model, args.sentence1, args.sentence2, steps=args.steps, layer=args.layer, rule=args.rule
    )
    lines = explanation_lines(explanation, args.top)
    payload = explanation.to_dict()
    if args.align:
        alignment = align_tokens(model, args.sentence1, args.sentence2)
        lines += alignment_lines(alignment)
        payload["alignment"] = alignment.to_dict()
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
