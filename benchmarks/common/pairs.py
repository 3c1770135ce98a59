"""The STS Multi MT test pairs the app benchmarks send: taken from a few language pairs in turn
(:func:`test_pairs`), or joined across languages so that no sentence is sent twice (:func:`distinct_pairs`).
"""

from __future__ import annotations

APP_LANG_PAIRS = ("en-de", "en-fr", "en-es", "de-en")


def test_pairs(n: int, data_dir: str | None) -> list[tuple[str, str]]:
    """n distinct (s1, s2) pairs from STS Multi MT test, taken from the pairs in turn."""
    from mlse.data.stsb import load_sts

    sets = [load_sts(p, "test", data_dir) for p in APP_LANG_PAIRS]
    pairs, seen, i = [], set(), 0
    while len(pairs) < n and i < len(sets[0].s1):
        for s in sets:
            pair = (s.s1[i], s.s2[i])
            if pair not in seen and len(pairs) < n:
                seen.add(pair)
                pairs.append(pair)
        i += 1
    return pairs


def distinct_pairs(n: int, data_dir: str | None) -> list[tuple[str, str]]:
    """``n`` STS Multi MT test pairs in which no sentence appears twice, so none is served from the embedding cache.

    Row ``i`` of every language's test file is one pair translated; the pairs here join sentence 1 of one language
    with sentence 2 of another (``en-de``, then ``de-es``, ...: the language offset changes from row to row), each
    text used once. Sending ``en-de``, ``en-fr`` and ``en-es`` of one row instead would repeat its English sentence,
    and 2 in 3 of those would come from the cache."""
    from mlse.data.layout import STS_LANGS
    from mlse.data.stsb import load_sts

    sets = {lang: load_sts(lang, "test", data_dir) for lang in STS_LANGS}
    langs, rows = list(STS_LANGS), min(len(s.s1) for s in sets.values())
    pairs, seen = [], set()
    for i in range(rows):
        shift = 1 + i % (len(langs) - 1)  # never 0: every pair is cross-lingual
        for k, lang in enumerate(langs):
            s1, s2 = sets[lang].s1[i], sets[langs[(k + shift) % len(langs)]].s2[i]
            if s1 not in seen and s2 not in seen and s1 != s2:
                seen.update((s1, s2))
                pairs.append((s1, s2))
                if len(pairs) == n:
                    return pairs
    return pairs


def study_batches(
    n_batches: int,
    batch_size: int,
    seed: int,
    data_dir=None,
    pairs: list[str] | None = None,
    max_pairs: int | None = None,
) -> list[tuple[list[str], list[str]]]:
    """``n_batches`` seeded batches of the study's training pairs (or ``pairs``, ``max_pairs`` each), mixed across
    languages."""
    import numpy as np

    from mlse.data.bitext import load_filtered_bitext, seed_per_pair
    from mlse.experiments.distillation import COMMON

    bitext = load_filtered_bitext(
        pairs or COMMON["pairs"],
        max_pairs=max_pairs or COMMON["max_pairs"],
        sample_seed=seed_per_pair(seed),
        data_dir=data_dir,
        label="study batches",
    )
    order = np.random.default_rng(seed).permutation(len(bitext.src))[: n_batches * batch_size]
    chunks = order.reshape(n_batches, batch_size)
    return [([bitext.src[i] for i in c], [bitext.tgt[i] for i in c]) for c in chunks]
