"""A fine-tuned model's STS Multi MT test Spearman per pair (en-en and cross-12), and their table, as the student
benchmarks (``finetune_compare``, ``multilingual_student``) report them.
"""

from __future__ import annotations

from mlse.data.pairs import CROSS_12

TEST_PAIRS = ["en-en", *CROSS_12]


def spearman_table(scores: dict[str, dict[str, float]]) -> str:
    """A markdown table: test Spearman per pair for each model, and its average over the cross-lingual pairs."""
    pairs = list(next(iter(scores.values())))
    cross = [p for p in CROSS_12 if p in pairs]
    lines = ["| model | " + " | ".join(pairs) + f" | avg cross-{len(cross)} |", "|---|" + "---:|" * (len(pairs) + 1)]
    for name, row in scores.items():
        avg = sum(row[p] for p in cross) / max(len(cross), 1)
        lines.append(f"| {name} | " + " | ".join(f"{row[p]:.1f}" for p in pairs) + f" | {avg:.1f} |")
    return "\n".join(lines)


def test_scores(model, pairs: list[str] = TEST_PAIRS) -> dict[str, float]:
    """STS Multi MT test Spearman per pair (no bootstrap)."""
    from mlse.evaluation.runners import run_sts

    result = run_sts(model, pairs=pairs, n_boot=0)
    return {p: s["spearman"] for p, s in result.scores.items()}
