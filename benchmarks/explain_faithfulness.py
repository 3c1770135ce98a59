"""Faithfulness of token-pair attributions: deleting the top attributed pairs' words vs random pairs' words.

    OMP_NUM_THREADS=2 python -m benchmarks.explain_faithfulness [--models me5-small,minilm-en] [--pairs 200]
        [--draws 5] [--out results/explain] [--quick]

For each model and each of ``--pairs`` cross-lingual STS Multi MT test pairs (the sample of
``benchmarks/explain_speed.py``), one explanation with the default settings, then for k = 1, 2, 3
(:mod:`mlse.explain.perturb`): the words of the k word pairs with the largest positive attribution are removed and
the pair scored again; likewise for ``--draws`` random draws of k word pairs (the same draws for both rankings).
Pairs are ranked by their cell ``A_ij`` (the issue's test) and, second, by the total attribution of their two words
in the exact decomposition (``rank="words"`` in :mod:`mlse.explain.perturb`). Two removals: ``delete`` (the words cut
from the text, the pair re-encoded by the model: the issue's test) and ``reference`` (the words' tokens given the
reference's representation at the explained layer: the counterfactual the attribution itself is about). Reported per
model, removal and k: the mean score drop for the top pairs' words and for random pairs' words (mean over the
draws), the share of pairs where the top pairs' drop is larger (the issue's target: >= 80 %), the mean number of
words removed, and the convergence of the explanations themselves (share with |residual| <= 2 % of |score -
reference terms|).

Deleting words changes the sentence's length and grammar as well as its content, for the random words too; the
comparison is between two deletions of the same size, not an absolute measure. ``--quick`` (what the test runs):
3 pairs, 2 draws. Writes ``<out>/faithfulness.json`` and ``.md`` atomically and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.common import EXPLAIN_LANG_PAIRS, EXPLAIN_TOLERANCE, cpu_name, cross_pairs, isa_flags
from mlse.atomic import atomic_write_text

KS = (1, 2, 3)
HOWS = ("delete", "reference")
RANKS = ("cell", "words")


def measure_model(name: str, args) -> dict:
    import torch

    from mlse.explain import explain_pair
    from mlse.explain.perturb import perturb
    from mlse.models import load_model

    torch.set_num_threads(args.threads)
    model = load_model(name)
    rows = {(how, rank, k): [] for how in HOWS for rank in RANKS for k in KS}
    residuals, seconds = [], []
    started = time.perf_counter()
    for n, (_, s1, s2) in enumerate(cross_pairs(args.pairs, data_dir=args.data_dir), 1):
        e = explain_pair(model, s1, s2)
        residuals.append(e.relative_residual)
        seconds.append(e.seconds)
        for how, rank, k in rows:  # the same random draws for every ranking: one generator per (pair, how, k)
            draw_rng = np.random.default_rng([args.seed, n, HOWS.index(how), k])
            rows[how, rank, k].append(perturb(model, e, k, draws=args.draws, rng=draw_rng, how=how, rank=rank))
        if n % 25 == 0:
            print(f"{name}: {n} pairs, {time.perf_counter() - started:.0f} s", flush=True)
    per_k = []
    for (how, rank, k), got in rows.items():
        per_k.append(
            {
                "how": how,
                "rank": rank,
                "k": k,
                "pairs": len(got),
                "top_drop": float(np.mean([p.top_drop for p in got])),
                "random_drop": float(np.mean([p.random_drop for p in got])),
                "top_wins": float(np.mean([p.top_wins for p in got])),
                "top_beats_every_draw": float(np.mean([p.top_drop > max(p.random_drops) for p in got])),
                "top_words": float(np.mean([p.top_words for p in got])),
                "random_words": float(np.mean([p.random_words for p in got])),
            }
        )
    return {
        "model": name,
        "layer": e.layer,
        "steps": e.steps,
        "rule": e.rule,
        "pairs": len(residuals),
        "within_2pct": float(np.mean(np.asarray(residuals) <= EXPLAIN_TOLERANCE)),
        "median_rel_residual": float(np.median(residuals)),
        "median_explain_s": float(np.median(seconds)),
        "per_k": per_k,
        "total_s": round(time.perf_counter() - started, 1),
    }


def markdown(results: dict) -> str:
    lines = [
        f"# Faithfulness of token-pair attributions ({results['created']})",
        "",
        f"{results['pairs']} cross-lingual STS Multi MT test pairs per model "
        f"({', '.join(EXPLAIN_LANG_PAIRS)}), the "
        "default explanation settings; the words of the k most positive word pairs deleted vs the words of k "
        f"random word pairs ({results['draws']} draws, mean). Score = the model's cosine. CPU "
        f"{results['cpu']}.",
        "",
        "| model | layer | steps | removal | pairs ranked by | k | top-k drop | random drop | top-k drops more | "
        "top-k beats every draw | words removed (top / random) | residual within 2 % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["models"]:
        for p in r["per_k"]:
            lines.append(
                f"| {r['model']} | {r['layer']} | {r['steps']} | {p['how']} | {p['rank']} | {p['k']} | "
                f"{p['top_drop']:+.4f} | {p['random_drop']:+.4f} | {p['top_wins']:.0%} | "
                f"{p['top_beats_every_draw']:.0%} | "
                f"{p['top_words']:.1f} / {p['random_words']:.1f} | {r['within_2pct']:.0%} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.explain_faithfulness", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--models", default="me5-small,minilm-en")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--draws", type=int, default=5, help="random draws of k pairs per sentence pair")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="results/explain")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="3 pairs, 2 draws: seconds (the test runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.draws = 3, 2
    started = time.perf_counter()
    results = {
        "benchmark": "explain-faithfulness",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "threads": args.threads,
        "pairs": args.pairs,
        "draws": args.draws,
        "load_start": list(os.getloadavg()),
        "quick": args.quick,
        "models": [],
    }
    for name in args.models.split(","):
        results["models"].append(measure_model(name, args))
        print(markdown(results), flush=True)
    results["load_end"] = list(os.getloadavg())
    results["total_s"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    atomic_write_text(out / "faithfulness.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    text = markdown(results)
    atomic_write_text(out / "faithfulness.md", text)
    print(f"wrote {out / 'faithfulness.json'} and .md ({results['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
