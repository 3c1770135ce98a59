"""The mining task of ``benchmarks.mining_scale``: its pools of sentences (real data or synthetic vectors), the
size-N tasks taken as prefixes of the largest, and their composition.

A helper module of that benchmark (no ``main``), split from it to keep each file short.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from mlse.evaluation.index import l2_normalize
from mlse.evaluation.mining import MiningSplit, build_mining_task

# Share of the leftover Tatoeba pairs that give their source side (the rest give English): English is the scarcer
# side (184k distinct English vs 250k other sentences), so it gets the larger share.
SRC_SHARE = 0.4


# -- the task ---------------------------------------------------------------------------------------------------------


class Pool:
    """Everything the largest task needs, in fixed random orders, so that a task of size N takes prefixes.

    gold: (src item, tgt item) pairs; src_extra / tgt_extra: distractors; items are sentences (real data) or row
    numbers into synthetic matrices. origin: item -> where it came from; gold_lang: language of each gold source.
    """

    def __init__(self, gold, src_extra, tgt_extra, origin, gold_lang, sources=()):
        self.gold, self.src_extra, self.tgt_extra = gold, src_extra, tgt_extra
        self.origin, self.gold_lang, self.sources = origin, gold_lang, list(sources)


def n_gold_for(n: int, gold_fraction: float) -> int:
    return max(1, round(n * gold_fraction))


def take(pool: Pool, n: int, gold_fraction: float, seed: int) -> MiningSplit:
    """The size-N task: the first gold pairs and distractors of the pool, positions shuffled (they carry no signal)."""
    g = n_gold_for(n, gold_fraction)
    if g > len(pool.gold) or n - g > len(pool.src_extra) or n - g > len(pool.tgt_extra):
        raise SystemExit(f"N={n}: the pool has {len(pool.gold)} gold pairs, {len(pool.src_extra)} / "
                         f"{len(pool.tgt_extra)} src / tgt distractors; need {g} and {n - g}")  # fmt: skip
    src = [s for s, _ in pool.gold[:g]] + pool.src_extra[: n - g]
    tgt = [t for _, t in pool.gold[:g]] + pool.tgt_extra[: n - g]
    rng = np.random.default_rng(seed)
    src_perm, tgt_perm = rng.permutation(n), rng.permutation(n)  # new position -> old position
    src_pos, tgt_pos = np.argsort(src_perm), np.argsort(tgt_perm)  # old position -> new position
    gold = {(int(src_pos[i]), int(tgt_pos[i])) for i in range(g)}
    return MiningSplit(src=[src[p] for p in src_perm], tgt=[tgt[p] for p in tgt_perm], gold=gold)


def composition(pool: Pool, task: MiningSplit) -> dict:
    """Gold vs distractor counts per side, distractors by origin, gold by language: what the output must state."""
    gold_src = {task.src[i] for i, _ in task.gold}
    gold_tgt = {task.tgt[j] for _, j in task.gold}
    lang_of = dict(zip((s for s, _ in pool.gold), pool.gold_lang))
    n = len(task.src)
    return {
        "n_per_side": n,
        "gold_pairs": len(task.gold),
        "gold_fraction": len(task.gold) / n,
        "distractor_fraction": 1 - len(task.gold) / n,
        "gold_languages": dict(Counter(lang_of[s] for s in gold_src).most_common()),
        "src_distractors": dict(Counter(pool.origin[s] for s in task.src if s not in gold_src).most_common()),
        "tgt_distractors": dict(Counter(pool.origin[t] for t in task.tgt if t not in gold_tgt).most_common()),
    }


def synthetic_pool(n_max: int, gold_fraction: float, seed: int, d: int = 32) -> tuple[Pool, np.ndarray, np.ndarray]:
    """Clustered unit vectors (topics) as a stand-in for sentence embeddings: gold targets are noisy copies of their
    sources. Returns the pool (items are row numbers) and the src [n_max, d] / tgt [n_max, d] matrices."""
    rng = np.random.default_rng(seed)
    g = n_gold_for(n_max, gold_fraction)
    centres = rng.standard_normal((max(4, n_max // 50), d))

    def clustered(n: int) -> np.ndarray:
        return centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))

    src = clustered(n_max)  # rows [0, g) are gold sources
    tgt = np.concatenate([src[:g] + 0.25 * rng.standard_normal((g, d)), clustered(n_max - g)])
    origin = {("src", i): "synthetic" for i in range(n_max)} | {("tgt", i): "synthetic" for i in range(n_max)}
    pool = Pool(gold=[(("src", i), ("tgt", i)) for i in range(g)],
                src_extra=[("src", i) for i in range(g, n_max)], tgt_extra=[("tgt", i) for i in range(g, n_max)],
                origin=origin, gold_lang=["synthetic"] * g)  # fmt: skip
    return pool, l2_normalize(src), l2_normalize(tgt)


def _tatoeba_links(data_dir: str | None) -> tuple[list, list, dict, list, dict]:
    """(every known X-English link, gold candidates, gold language by sentence, source files, origin by sentence).

    Links: all Tatoeba-Challenge X-eng pairs (every script / dialect label) and the LASER Tatoeba test set (112
    languages) -- every translation that must not cross the pools. Gold candidates: Challenge pairs in each language's
    standard written form (`default_labels`).
    """
    from mlse.data import default_labels, load_parallel, load_tatoeba, parallel_pairs, tatoeba_languages

    links, gold_candidates, sources = [], [], []
    gold_lang: dict[str, str] = {}
    origin: dict[str, str] = {}
    for folder in parallel_pairs(data_dir):
        if "eng" not in folder.split("-"):
            continue  # X-Y pairs without English: their English translations are unknown, so they cannot be checked
        lang = next(c for c in folder.split("-") if c != "eng")
        every = load_parallel(f"{lang}-eng", data_dir)
        links += zip(every.src, every.tgt)
        sources += every.sources
        std = load_parallel(f"{lang}-eng", data_dir, src_labels=default_labels(lang), tgt_labels={"eng"})
        gold_candidates += zip(std.src, std.tgt)
        gold_lang.update((s.strip(), lang) for s in std.src)
        for s, t in zip(every.src, every.tgt):
            origin.setdefault(s.strip(), "tatoeba-challenge")
            origin.setdefault(t.strip(), "tatoeba-challenge")
    for lang in tatoeba_languages(data_dir):
        corpus = load_tatoeba(lang, data_dir)
        links += zip(corpus.src, corpus.tgt)
        sources += corpus.sources
        for s, t in zip(corpus.src, corpus.tgt):
            origin.setdefault(s.strip(), "laser-tatoeba")
            origin.setdefault(t.strip(), "laser-tatoeba")
    return links, gold_candidates, gold_lang, sources, origin


def _monolingual_extras(data_dir: str | None) -> tuple[list[str], list[str], list, dict]:
    """English distractors (STS Multi MT English; first halves of FLORES / WMT English) and other-language ones
    (second halves of FLORES / WMT, one language per line so the source pool holds no cluster of mutual
    translations). Halves keep every FLORES / WMT translation pair out of the pools."""
    from mlse.data import load_flores, load_wmt, read_sts_file, wmt_sets
    from mlse.data.layout import FLORES_DIR, FLORES_SUFFIX
    from mlse.data.paths import resolve_data_dir
    from mlse.data.stsb import sts_file

    eng: list[str] = []
    other: list[str] = []
    sources: list = []
    origin: dict[str, str] = {}

    def add(texts: list[str], to: list[str], label: str) -> None:
        to += texts
        for t in texts:
            origin.setdefault(t.strip(), label)

    for split in ("train", "dev", "test"):
        path = sts_file("en", split, data_dir)
        s1, s2, _ = read_sts_file(path)
        add(list(dict.fromkeys(s1 + s2)), eng, "sts-en")
        sources.append(path)
    flores = load_flores(None, data_dir)
    sources += [resolve_data_dir(data_dir) / FLORES_DIR / f"{code}{FLORES_SUFFIX}" for code in flores]
    multiway = {"flores": (flores.pop("eng_Latn"), list(flores.values()))}
    w13 = [load_wmt(2013, f"{x}-en", data_dir) for x in ("cs", "de", "es", "fr", "ru")]
    multiway["wmt"] = (w13[0].tgt, [c.src for c in w13])
    for corpus in w13:
        sources += corpus.sources
    for label, (english, others) in multiway.items():
        half = len(english) // 2
        add(english[:half], eng, label)
        add([others[r % len(others)][r] for r in range(half, len(english))], other, label)
    for year, pair in wmt_sets(data_dir):
        if year == 2013:
            continue
        corpus = load_wmt(year, pair, data_dir)
        sources += corpus.sources
        half = len(corpus.src) // 2
        first, second = (corpus.tgt, corpus.src) if corpus.tgt_lang == "en" else (corpus.src, corpus.tgt)
        add(first[:half], eng if "en" in (corpus.src_lang, corpus.tgt_lang) else other, "wmt")
        add(second[half:], other, "wmt")
    return eng, other, sources, origin


def real_pool(n_max: int, gold_fraction: float, seed: int, data_dir: str | None) -> Pool:
    """The largest task from the data folder (see the module docstring); smaller tasks take its prefixes."""
    links, gold_candidates, gold_lang, sources, origin = _tatoeba_links(data_dir)
    eng, other, extra_sources, extra_origin = _monolingual_extras(data_dir)
    for text, label in extra_origin.items():
        origin.setdefault(text, label)
    g = n_gold_for(n_max, gold_fraction)
    train, test = build_mining_task(links, n_gold=g, seed=seed, distractors_src=other, distractors_tgt=eng,
                                    gold_candidates=gold_candidates, src_share=SRC_SHARE)  # fmt: skip
    gold = [(sp.src[i], sp.tgt[j]) for sp in (train, test) for i, j in sorted(sp.gold)]
    gold_src, gold_tgt = {s for s, _ in gold}, {t for _, t in gold}
    src_extra = [s for sp in (train, test) for s in sp.src if s not in gold_src]
    tgt_extra = [t for sp in (train, test) for t in sp.tgt if t not in gold_tgt]
    rng = np.random.default_rng(seed + 1)
    gold = [gold[i] for i in rng.permutation(len(gold))]
    src_extra = [src_extra[i] for i in rng.permutation(len(src_extra))]
    tgt_extra = [tgt_extra[i] for i in rng.permutation(len(tgt_extra))]
    return Pool(gold, src_extra, tgt_extra, origin, [gold_lang[s] for s, _ in gold], sources + extra_sources)
