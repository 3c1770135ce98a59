"""Evaluation runners: bind an encoder, a dataset and the metrics into one :class:`~mlse.runs.results.EvalResult`.

Each runner encodes every text it needs in one call, then computes predictions, then metrics: the metric functions
(:mod:`mlse.evaluation.sts`, :mod:`.retrieval`, :mod:`.mining`) never see an encoder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from mlse.data.flores import flores_files, load_flores
from mlse.data.pairs import CROSS_12, HELD_OUT_PAIRS, STAGE2_PAIRS
from mlse.data.portable import data_hashes
from mlse.data.stsb import load_sts
from mlse.data.tatoeba import load_tatoeba
from mlse.data.tsv import load_scored_tsv
from mlse.data.types import ParallelCorpus, ScoredPairs
from mlse.data.wmt import load_wmt, wmt_sets
from mlse.encoders.protocol import cosine_predictions
from mlse.errors import DataError, MlseError
from mlse.evaluation.mining import build_mining_task, evaluate_mining
from mlse.evaluation.mining_pool import disjoint_halves
from mlse.evaluation.retrieval import Neighbours, neighbour_lists, retrieval_errors, tatoeba_metrics
from mlse.evaluation.sts import average_scores, sts_metrics
from mlse.runs.results import EvalResult
from mlse.stop_signal import StopSignal, encode_in_chunks

log = logging.getLogger(__name__)
DIRECTIONS = ("to_en", "from_en")


def _encoder_stats(encoder, before: dict[str, int] | None = None) -> dict[str, int]:
    """The encoder's counters, minus those read at ``before`` (stats are cumulative over the encoder's life)."""
    now = dict(getattr(encoder, "stats", {}))
    return {k: v - (before or {}).get(k, 0) for k, v in now.items()}


def encode_lookup(
    encoder, texts: Sequence[str], batch_size: int = 64, stop: StopSignal | None = None
) -> dict[str, np.ndarray]:
    """Encode the unique texts once; return a text -> row lookup.
    ``stop``: as for :func:`mlse.stop_signal.encode_in_chunks`."""
    unique = list(dict.fromkeys(texts))
    emb = encode_in_chunks(encoder, unique, stop=stop, batch_size=batch_size)  # [n_unique, d]
    return {t: emb[i] for i, t in enumerate(unique)}


def _stack(lookup: dict[str, np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """The embeddings of ``texts`` from an :func:`encode_lookup` lookup, as rows: [n, d]."""
    return np.stack([lookup[t] for t in texts])


def sts_groups(pairs: Sequence[str]) -> dict[str, list[str]]:
    """Named groups averaged in STS results (only pairs that were evaluated are used)."""
    mono = [p.partition("-")[0] == p.partition("-")[2] for p in pairs]  # "en-en": one language
    groups = {
        "all": list(pairs),
        "monolingual": [p for p, same in zip(pairs, mono) if same],
        "cross-lingual": [p for p, same in zip(pairs, mono) if not same],
    }
    # The papers' named groups are reported only when complete: a partial average under their name would mislead.
    named = {"stage2-train": STAGE2_PAIRS, "held-out": HELD_OUT_PAIRS, "cross-12": CROSS_12}
    groups.update({name: members for name, members in named.items() if set(members) <= set(pairs)})
    return groups


def predict_sts(encoder, datasets: dict[str, ScoredPairs], *, batch_size: int = 64) -> dict[str, np.ndarray]:
    """Cosine similarity per pair of each dataset (the predictions, kept apart from the metrics)."""
    texts = [t for ds in datasets.values() for t in (*ds.s1, *ds.s2)]
    lookup = encode_lookup(encoder, texts, batch_size)
    out = {}
    for key, ds in datasets.items():
        e1, e2 = (_stack(lookup, s) if len(ds) else np.zeros((0, 1), np.float32) for s in (ds.s1, ds.s2))  # [n, d]
        out[key] = cosine_predictions(e1, e2)  # [n]
    return out


def run_sts(
    encoder,
    *,
    pairs: Sequence[str] = (),
    pairs_files: Sequence[str | Path] = (),
    split: str = "test",
    data_dir: str | Path | None = None,
    batch_size: int = 64,
    n_boot: int = 1000,
) -> EvalResult:
    """STS Multi MT pairs (``"en-de"``) and/or user TSV files, Pearson/Spearman x 100 with a bootstrap CI."""
    stats_before = _encoder_stats(encoder)
    datasets = {_pair_key(pair): load_sts(pair, split, data_dir) for pair in pairs}
    sts_keys = list(datasets)
    for f in pairs_files:
        key = Path(f).stem
        if key in datasets:
            raise DataError(f"{f}: its name {key!r} is already used by another STS dataset; rename the file")
        datasets[key] = load_scored_tsv(f)
    if not datasets:
        raise DataError("no STS data selected: give --pairs (e.g. en-de) or --pairs-file")
    preds = predict_sts(encoder, datasets, batch_size=batch_size)
    scores = {k: sts_metrics(preds[k], datasets[k].scores, n_boot=n_boot) for k in datasets}
    # Groups are over STS Multi MT pairs only: a user file is not a language pair.
    averages = average_scores(scores, {g: m for g, m in sts_groups(sts_keys).items() if m})
    return EvalResult(
        task="sts",
        split=split if pairs else "file",
        scores=scores,
        averages=averages,
        config={
            "pairs": list(pairs),
            "pairs_files": [str(f) for f in pairs_files],
            "n_boot": n_boot,
            "similarity": "cosine",
        },
        **_provenance(encoder, stats_before, (ds.sources for ds in datasets.values()), data_dir),
        extras={"predictions": preds, "datasets": datasets},
    )


def _pair_key(pair: str) -> str:
    a, sep, b = pair.strip().lower().partition("-")
    return f"{a}-{b}" if sep else f"{a}-{a}"


def _provenance(encoder, stats_before: dict[str, int], sources, data_dir) -> dict:
    """The fields every runner's result has: the encoder's name and identity, the data files (``sources``: groups of
    paths) as {portable path (:mod:`mlse.data.portable`): sha256}, and what it encoded since ``stats_before``."""
    return {
        "model": encoder.name,
        "model_identity": encoder.identity,
        "data": data_hashes((p for group in sources for p in group), data_dir),
        "encode_stats": _encoder_stats(encoder, stats_before),
    }


def run_tatoeba(
    encoder,
    *,
    langs: Sequence[str],
    data_dir: str | Path | None = None,
    batch_size: int = 64,
    k: int = 4,
    keep_errors: bool = True,
) -> EvalResult:
    """LASER Tatoeba: accuracy both ways (cosine and ratio margin), xSIM error; error lists kept in ``extras``."""
    stats_before = _encoder_stats(encoder)
    corpora = {c.src_lang: c for c in (load_tatoeba(lang, data_dir) for lang in langs)}
    lookup = encode_lookup(encoder, [t for c in corpora.values() for t in (*c.src, *c.tgt)], batch_size)
    scores, errors = {}, {}
    for lang, corpus in corpora.items():
        scored = TatoebaLanguage.score(corpus, lookup, k)
        scores[lang] = scored.metrics
        if keep_errors:
            errors[lang] = scored.errors("cosine")
    averages = {}
    if scores:
        keys = next(iter(scores.values())).keys()
        averages["all"] = {key: float(np.mean([s[key] for s in scores.values()])) for key in keys}
        averages["all"]["n_langs"] = len(scores)
    return EvalResult(
        task="tatoeba",
        split="test",
        scores=scores,
        averages=averages,
        config={"langs": list(corpora), "k": k, "similarity": "cosine", "margin": "ratio"},
        **_provenance(encoder, stats_before, (c.sources for c in corpora.values()), data_dir),
        extras={"errors": errors, "corpora": corpora},
    )


@dataclass
class TatoebaLanguage:
    """One LASER Tatoeba language under one encoder: texts, embeddings, metrics, and error lists on demand.

    ``src`` is the xx side, ``tgt`` English (row i translates row i); one neighbour search serves every number.
    """

    lang: str
    src: list[str]  # [n]
    tgt: list[str]  # [n]
    src_emb: np.ndarray  # [n, d] L2-normalised
    tgt_emb: np.ndarray  # [n, d] L2-normalised
    k: int
    neighbours: Neighbours
    metrics: dict
    sources: list = field(default_factory=list)
    _errors: dict = field(default_factory=dict, repr=False)

    @classmethod
    def score(cls, corpus: ParallelCorpus, lookup: dict[str, np.ndarray], k: int = 4) -> TatoebaLanguage:
        """Metrics of ``corpus`` from embeddings looked up by text (see :func:`encode_lookup`)."""
        src, tgt = _stack(lookup, corpus.src), _stack(lookup, corpus.tgt)  # [n, d] each
        neighbours = neighbour_lists(src, tgt, k)
        metrics = tatoeba_metrics(src, tgt, k=k, neighbours=neighbours)
        return cls(corpus.src_lang, corpus.src, corpus.tgt, src, tgt, k, neighbours, metrics, list(corpus.sources))

    @classmethod
    def encoded(cls, encoder, corpus: ParallelCorpus, k: int = 4, batch_size: int = 64) -> TatoebaLanguage:
        """``corpus`` encoded with ``encoder`` (each text once) and scored."""
        return cls.score(corpus, encode_lookup(encoder, [*corpus.src, *corpus.tgt], batch_size), k)

    def errors(self, criterion: str = "cosine") -> dict[str, list[dict]]:
        """direction -> :func:`~mlse.evaluation.retrieval.retrieval_errors` dicts, retrieving by cosine or by ratio
        margin (``criterion="margin"``); computed once per criterion."""
        if criterion not in ("cosine", "margin"):
            raise MlseError(f"unknown retrieval criterion {criterion!r}; choose one of: cosine, margin")
        if criterion not in self._errors:
            self._errors[criterion] = {
                d: retrieval_errors(
                    self.src,
                    self.tgt,
                    self.src_emb,
                    self.tgt_emb,
                    direction=d,
                    k=self.k,
                    margin=criterion == "margin",
                    neighbours=self.neighbours,
                )
                for d in DIRECTIONS
            }
        return self._errors[criterion]


def tatoeba_language(
    encoder, lang: str, *, data_dir: str | Path | None = None, k: int = 4, batch_size: int = 64, memo=None
) -> TatoebaLanguage:
    """One Tatoeba language scored with ``encoder`` (the app's Tatoeba tab). ``memo``: a :class:`mlse.memo.BytesMemo`
    keyed by the encoder's identity and the data file."""
    corpus = load_tatoeba(lang, data_dir)  # DataError for an unknown language or a missing data dir
    compute = partial(TatoebaLanguage.encoded, encoder, corpus, k, batch_size)
    if memo is None:
        return compute()
    return memo.get_or_compute((encoder.identity, corpus.src_lang, str(corpus.sources[0]), k), compute)


def sts_pair_predictions(
    encoder, pair: str, split: str = "test", *, data_dir: str | Path | None = None, batch_size: int = 64, memo=None
) -> tuple[ScoredPairs, np.ndarray]:
    """(the STS Multi MT pair, its cosine predictions [n]) for ``encoder`` (the app's predicted-vs-gold tab).
    ``memo``: as for :func:`tatoeba_language`."""
    ds = load_sts(pair, split, data_dir)  # DataError: unknown pair / split, missing data directory

    def compute() -> np.ndarray:
        return predict_sts(encoder, {ds.name: ds}, batch_size=batch_size)[ds.name]

    if memo is None:
        return ds, compute()
    return ds, memo.get_or_compute((encoder.identity, ds.name, tuple(str(p) for p in ds.sources)), compute)


# -- the BUCC-like mining task -------------------------------------------------------------------------------------

_PREFERRED_WMT = (2019, 2020, 2018, 2013)


def mining_sources(pair: str, data_dir: str | Path | None = None) -> tuple[ParallelCorpus, list[str], list[str], list]:
    """Parallel data whose pairs are hidden as gold, plus unrelated sentences used as distractors.

    Gold: the pair's newest WMT news test (:data:`_PREFERRED_WMT`). Distractors: source side of one half and target
    side of the other half of FLORES-200 devtest and of WMT 2013 (unless gold). See docs/data.md.
    Returns (gold corpus, src distractors, tgt distractors, source files).
    """
    src_lang, _, tgt_lang = pair.lower().partition("-")
    available = {(year, frozenset(p.split("-"))) for year, p in wmt_sets(data_dir)}
    gold_year = next((y for y in _PREFERRED_WMT if (y, frozenset((src_lang, tgt_lang))) in available), None)
    if gold_year is None:
        pairs = sorted({"-".join(sorted(p)) for _, p in available})
        raise DataError(f"no WMT news test for mining pair {pair!r}; available: {', '.join(pairs)}")
    gold = load_wmt(gold_year, f"{src_lang}-{tgt_lang}", data_dir)
    extra_src: list[str] = []
    extra_tgt: list[str] = []
    sources = list(gold.sources)
    halves = []
    try:
        flores = load_flores([src_lang, tgt_lang], data_dir)
        halves.append((*flores.values(), flores_files(flores, data_dir)))
    except DataError as exc:  # a WMT language FLORES does not hold: mine without those distractors
        log.info("mining %s: no FLORES distractors (%s)", pair, exc)
    if gold_year != 2013 and (2013, frozenset((src_lang, tgt_lang))) in available:
        w13 = load_wmt(2013, f"{src_lang}-{tgt_lang}", data_dir)
        halves.append((w13.src, w13.tgt, w13.sources))
    for src_side, tgt_side, files in halves:
        first, second = disjoint_halves(src_side, tgt_side)
        extra_src += first
        extra_tgt += second
        sources += files
    return gold, extra_src, extra_tgt, sources


def run_mining(
    encoder,
    *,
    pair: str = "de-en",
    data_dir: str | Path | None = None,
    n_gold: int = 600,
    seed: int = 0,
    k: int = 4,
    batch_size: int = 64,
) -> EvalResult:
    """Margin-based bitext mining on the BUCC-like task: threshold chosen on train, P/R/F1 on test."""
    if isinstance(n_gold, bool) or not isinstance(n_gold, (int, np.integer)) or n_gold < 2:
        raise MlseError(f"--n-gold must be an integer >= 2 (one gold pair per split at least), got {n_gold!r}")
    stats_before = _encoder_stats(encoder)
    gold, extra_src, extra_tgt, sources = mining_sources(pair, data_dir)
    if n_gold > len(gold) // 2:
        raise DataError(
            f"--n-gold {n_gold} is too large for {gold.name} ({len(gold)} pairs); use at most {len(gold) // 2}"
        )
    train, test = build_mining_task(
        list(zip(gold.src, gold.tgt)), n_gold=n_gold, seed=seed, distractors_src=extra_src, distractors_tgt=extra_tgt
    )
    lookup = encode_lookup(encoder, [*train.src, *train.tgt, *test.src, *test.tgt], batch_size)
    metrics = evaluate_mining(*((sp, _stack(lookup, sp.src), _stack(lookup, sp.tgt)) for sp in (train, test)), k=k)
    key = _pair_key(pair)
    return EvalResult(
        task="mining",
        split="test",
        scores={key: metrics},
        config={
            "pair": key,
            "n_gold": n_gold,
            "seed": seed,
            "k": k,
            "margin": "ratio",
            "retrieval": "max-score 1:1",
            "gold_source": gold.name,
            "distractors": ["FLORES-200 devtest halves", "WMT 2013 halves (if not gold)"],
        },
        **_provenance(encoder, stats_before, [sources], data_dir),
        extras={"train": train, "test": test},
    )
