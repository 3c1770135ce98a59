"""The one loader of training bitext: Tatoeba-Challenge pairs, contamination-filtered, each pair capped by a seeded
sample. Stage 1 (:func:`mlse.train.head_training.stage1_data`) and fine-tuning
(:func:`mlse.train.finetune_data.prepare_data`) both read their translation pairs through :func:`load_filtered_bitext`.

Per pair: :func:`mlse.data.parallel.default_labels` on each side, minus pairs with a side in an evaluation set
(:func:`mlse.data.contamination.filter_contaminated`), then at most ``max_pairs`` drawn without replacement by
``numpy.random.default_rng(sample_seed(i)).choice``, in file order (capped *after* filtering). Without a
Tatoeba-Challenge folder the shipped sample is read (:mod:`mlse.data.bitext_sample`). The seed scheme is the caller's
(:func:`same_seed`: Stage 1, :func:`seed_per_pair`: fine-tuning); changing either changes what re-runs train on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mlse.data.bitext_sample import load_sample_pair, training_bitext_source
from mlse.data.contamination import evaluation_sentences, filter_contaminated
from mlse.data.parallel import default_labels, load_parallel, seeded_subset
from mlse.data.portable import data_hashes
from mlse.stop_signal import StopSignal, check

log = logging.getLogger(__name__)

SampleSeed = Callable[[int], object]  # pair index -> a seed numpy.random.default_rng accepts


def same_seed(seed: int) -> SampleSeed:
    """Every pair sampled with ``default_rng(seed)`` (Stage 1)."""
    return lambda _i: seed


def seed_per_pair(seed: int) -> SampleSeed:
    """Pair ``i`` sampled with ``default_rng([seed, i])`` (fine-tuning)."""
    return lambda i: [seed, i]


@dataclass
class Bitext:
    """Translation pairs of several language pairs, concatenated in the order of the pairs; ``src[i]`` <-> ``tgt[i]``.

    ``info``: ``{"pairs": {pair: {"available", "contaminated_dropped", "used"}}, "data": {file: sha256}, "source": where
    the pairs came from (the data directory, or the shipped sample: :mod:`mlse.data.bitext_sample`)}``."""

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    src_lang: list[str] = field(default_factory=list)  # [n] the language of each src sentence
    tgt_lang: list[str] = field(default_factory=list)  # [n]
    info: dict = field(default_factory=lambda: {"pairs": {}, "data": {}})


def load_filtered_bitext(
    pairs: Sequence[str],
    *,
    max_pairs: int | None,
    sample_seed: SampleSeed,
    data_dir: str | os.PathLike[str] | None = None,
    stop: StopSignal | None = None,
    label: str = "bitext",
) -> Bitext:
    """Contamination-filtered pairs of every ``"a-b"`` in ``pairs`` (Tatoeba-Challenge folder names, oriented as
    given), each capped at ``max_pairs`` (None: all) by a seeded sample; see the module docstring.

    ``stop``: asked before reading the evaluation sentences and each pair. ``label`` starts each pair's log line."""
    check(stop, "loading the evaluation sentences (contamination filter)")
    banned = evaluation_sentences(data_dir)
    source = training_bitext_source(data_dir)
    if source.shipped:
        log.warning("%s: the data directory has no Tatoeba-Challenge bitext; training on %s", label, source.describe())
    out = Bitext()
    out.info["source"] = source.describe()
    for i, pair in enumerate(pairs):
        check(stop, f"loading parallel data ({pair})")
        a, _, b = pair.partition("-")
        if source.shipped:  # already filtered when it was built; filtered again below, as the full files are
            corpus = load_sample_pair(pair, source.path)
        else:
            corpus = load_parallel(pair, data_dir, src_labels=default_labels(a), tgt_labels=default_labels(b))
        clean, dropped = filter_contaminated(corpus, banned)
        keep = seeded_subset(len(clean), max_pairs, sample_seed(i))
        out.src += [clean.src[j] for j in keep]
        out.tgt += [clean.tgt[j] for j in keep]
        out.src_lang += [a] * len(keep)
        out.tgt_lang += [b] * len(keep)
        out.info["pairs"][pair] = {"available": len(corpus), "contaminated_dropped": dropped, "used": len(keep)}
        out.info["data"].update(data_hashes(corpus.sources, data_dir))
        log.info("%s %s: %d pairs, %d dropped as contaminated, %d used", label, pair, len(corpus), dropped, len(keep))
    return out
