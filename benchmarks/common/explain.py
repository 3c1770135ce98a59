"""What the two explain benchmarks (``explain_speed``, ``explain_faithfulness``) share: one reproducible sample of
cross-lingual STS Multi MT test pairs, the language pairs taken in turn, and the convergence target they check.
"""

from __future__ import annotations

import numpy as np

EXPLAIN_LANG_PAIRS = [
    "en-de",
    "de-en",
    "en-fr",
    "en-es",
    "en-ru",
    "en-zh",
    "en-ja",
    "de-fr",
    "fr-es",
    "it-pt",
    "nl-pl",
    "ru-zh",
]
EXPLAIN_TOLERANCE = 0.02  # the convergence target: |residual| <= 2 % of |score - reference terms|


def cross_pairs(n: int, seed: int = 0, data_dir: str | None = None) -> list[tuple[str, str, str]]:
    """``n`` cross-lingual STS Multi MT test pairs (language pair, sentence 1, sentence 2), reproducibly drawn."""
    from mlse.data import load_sts

    rng = np.random.default_rng(seed)
    sets = {p: load_sts(p, "test", data_dir) for p in EXPLAIN_LANG_PAIRS[: max(1, min(n, len(EXPLAIN_LANG_PAIRS)))]}
    rows = rng.permutation(len(next(iter(sets.values())).s1))
    out = []
    for i in range(n):
        pair = list(sets)[i % len(sets)]
        row = int(rows[i % len(rows)])
        out.append((pair, sets[pair].s1[row], sets[pair].s2[row]))
    return out
