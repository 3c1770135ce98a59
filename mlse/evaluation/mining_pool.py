"""Distractor pools for bitext mining: sentences with no translation on the other side, and the large mining pool.

One rule (:func:`disjoint_halves`): a parallel corpus gives distractors to both sides only by halves, so no
translation pair lands across the pools. :func:`data_pool` builds the pool of the mining-at-scale benchmark: gold
from Tatoeba-Challenge X-English (standard written forms); distractors from every other known Tatoeba link (one side
each, :data:`SRC_SHARE` source), STS Multi MT English and FLORES-200 / WMT halves, checked by
:func:`mlse.evaluation.mining.build_mining_task`. A task of size N (:func:`pool_task`) takes prefixes of the pool's
fixed orders, so smaller tasks' embeddings come from the cache. See docs/speed.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from mlse.errors import DataError
from mlse.evaluation.mining import MiningSplit, build_mining_task, shuffled_split

# Share of leftover Tatoeba pairs that give their source side; English, the scarcer side, gets the rest.
SRC_SHARE = 0.4


def disjoint_halves(first: Sequence, second: Sequence) -> tuple[list, list]:
    """(the first half of ``first``, the second half of ``second``): from two aligned sides (row i of one translates
    row i of the other), distractors for two pools between which no translation pair survives."""
    half = len(first) // 2
    return list(first[:half]), list(second[half:])


class MiningPool:
    """Everything the largest task needs, in fixed random orders, so that a task of size N takes prefixes.

    gold: (src item, tgt item) pairs; src_extra / tgt_extra: distractors; items are sentences (real data) or anything
    hashable standing for one (a benchmark's row numbers into synthetic matrices). origin: item -> where it came from;
    gold_lang: the language of each gold source; sources: the data files read.
    """

    def __init__(self, gold, src_extra, tgt_extra, origin, gold_lang, sources=()):
        self.gold, self.src_extra, self.tgt_extra = gold, src_extra, tgt_extra
        self.origin, self.gold_lang, self.sources = origin, gold_lang, list(sources)


def gold_count(n: int, gold_fraction: float) -> int:
    """Gold pairs in a task of ``n`` sentences per side (at least one)."""
    return max(1, round(n * gold_fraction))


def pool_task(pool: MiningPool, n: int, gold_fraction: float, seed: int) -> MiningSplit:
    """The size-N task: the first gold pairs and distractors of the pool, positions shuffled (they carry no signal)."""
    g = gold_count(n, gold_fraction)
    if g > len(pool.gold) or n - g > len(pool.src_extra) or n - g > len(pool.tgt_extra):
        raise DataError(
            f"N={n}: the pool has {len(pool.gold)} gold pairs, {len(pool.src_extra)} / "
            f"{len(pool.tgt_extra)} src / tgt distractors; need {g} and {n - g}"
        )
    return shuffled_split(pool.gold[:g], pool.src_extra[: n - g], pool.tgt_extra[: n - g], np.random.default_rng(seed))


def pool_composition(pool: MiningPool, task: MiningSplit) -> dict:
    """Gold vs distractor counts per side, distractors by origin, gold by language: what a report must state."""
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


def pool_from(
    links,
    gold_candidates,
    gold_lang: dict,
    other: list,
    english: list,
    origin: dict,
    n_max: int,
    gold_fraction: float,
    seed: int,
    sources=(),
) -> MiningPool:
    """The pool for tasks up to ``n_max`` per side from known translations and monolingual distractors.

    ``links``: every known (X, English) translation (none may cross the pools); ``gold_candidates``: links gold may
    be drawn from; ``other`` / ``english``: source / English distractors; ``origin``: sentence -> where it came from.
    """
    g = gold_count(n_max, gold_fraction)
    train, test = build_mining_task(
        links,
        n_gold=g,
        seed=seed,
        distractors_src=other,
        distractors_tgt=english,
        gold_candidates=gold_candidates,
        src_share=SRC_SHARE,
    )
    gold = [(sp.src[i], sp.tgt[j]) for sp in (train, test) for i, j in sorted(sp.gold)]
    gold_src, gold_tgt = {s for s, _ in gold}, {t for _, t in gold}
    src_extra = [s for sp in (train, test) for s in sp.src if s not in gold_src]
    tgt_extra = [t for sp in (train, test) for t in sp.tgt if t not in gold_tgt]
    rng = np.random.default_rng(seed + 1)
    gold = [gold[i] for i in rng.permutation(len(gold))]
    src_extra = [src_extra[i] for i in rng.permutation(len(src_extra))]
    tgt_extra = [tgt_extra[i] for i in rng.permutation(len(tgt_extra))]
    return MiningPool(gold, src_extra, tgt_extra, origin, [gold_lang[s] for s, _ in gold], sources)


def data_pool(n_max: int, gold_fraction: float, seed: int, data_dir=None) -> MiningPool:
    """The pool of the largest task from the data folder (see the module docstring); smaller tasks take prefixes."""
    links, gold_candidates, gold_lang, sources, origin = _tatoeba_links(data_dir)
    english, other, extra_sources, extra_origin = _monolingual_extras(data_dir)
    origin = extra_origin | origin  # a sentence Tatoeba links keeps its Tatoeba origin
    return pool_from(
        links, gold_candidates, gold_lang, other, english, origin, n_max, gold_fraction, seed, sources + extra_sources
    )


def _tatoeba_links(data_dir) -> tuple[list, list, dict, list, dict]:
    """(every known X-English link, gold candidates, gold language by sentence, source files, origin by sentence).

    Links: all Tatoeba-Challenge X-eng pairs and the LASER Tatoeba test set. Gold candidates: Challenge pairs in
    each language's standard written form (`default_labels`).
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
        for text in (*every.src, *every.tgt):
            origin.setdefault(text.strip(), "tatoeba-challenge")
    for lang in tatoeba_languages(data_dir):
        corpus = load_tatoeba(lang, data_dir)
        links += zip(corpus.src, corpus.tgt)
        sources += corpus.sources
        for text in (*corpus.src, *corpus.tgt):
            origin.setdefault(text.strip(), "laser-tatoeba")
    return links, gold_candidates, gold_lang, sources, origin


def _monolingual_extras(data_dir) -> tuple[list[str], list[str], list, dict]:
    """English distractors (STS Multi MT English; first halves of FLORES / WMT English) and other-language ones
    (second halves, one language per row so the source pool holds no cluster of mutual translations)."""
    from mlse.data import load_flores, load_wmt, read_sts_file, wmt_sets
    from mlse.data.flores import flores_files
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
    sources += flores_files(flores, data_dir)
    multiway = {"flores": (flores.pop("eng_Latn"), list(flores.values()))}
    w13 = [load_wmt(2013, f"{x}-en", data_dir) for x in ("cs", "de", "es", "fr", "ru")]
    multiway["wmt"] = (w13[0].tgt, [c.src for c in w13])
    for corpus in w13:
        sources += corpus.sources
    for label, (english, others) in multiway.items():
        # the rows of the second half go round the other languages: one language a row
        round_robin = [others[r % len(others)][r] for r in range(len(english))]
        first, second = disjoint_halves(english, round_robin)
        add(first, eng, label)
        add(second, other, label)
    for year, pair in wmt_sets(data_dir):
        if year == 2013:
            continue
        corpus = load_wmt(year, pair, data_dir)
        sources += corpus.sources
        en_side, xx_side = (corpus.tgt, corpus.src) if corpus.tgt_lang == "en" else (corpus.src, corpus.tgt)
        first, second = disjoint_halves(en_side, xx_side)
        add(first, eng if "en" in (corpus.src_lang, corpus.tgt_lang) else other, "wmt")
        add(second, other, "wmt")
    return eng, other, sources, origin
