"""Slices of a set of rated pairs: correlations with gold per language pair and per length band.

Pairs are labelled with a slice (:func:`language_pair_labels`, :func:`length_bands`) and scored per slice, Pearson /
Spearman x 100 via :mod:`mlse.evaluation.sts`. A sentence's length is its word count, or its letters and digits for
text written without spaces (:func:`is_spaceless`); a pair's is the mean of its two. Length bands are the terciles
(short <= 1/3 quantile < medium <= 2/3 < long; empty bands dropped). Below :data:`MIN_PAIRS` a slice gets no
correlation, below :data:`MIN_CI_PAIRS` no CI, and its ``note`` says why. See docs/app/gold.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mlse.analysis.sts_errors import bootstrap_pearson_ci
from mlse.evaluation.sts import sts_metrics

LANGUAGE_PAIR = "language pair"
LENGTH = "length"
MIN_PAIRS = 3  # a slice needs this many pairs for a correlation
MIN_CI_PAIRS = 10  # ... and this many for a 95% bootstrap confidence interval
# Languages written without spaces between words: their length is counted in characters.
SPACELESS_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "zho", "jpn", "tha", "lao", "khm", "mya"})
_SPACELESS_SCRIPTS = ("Han", "Kana", "Thai")
# a correlation with gold and its 95% interval (x 100)
CORRELATION_FIELDS = ["n", "pearson", "pearson_lo", "pearson_hi", "spearman", "spearman_lo", "spearman_hi"]
SLICE_COLUMNS = ["slice", "value", "model", *CORRELATION_FIELDS, "note"]


# -- labelling the pairs ----------------------------------------------------------------------------------------------
def language_pair_labels(lang1: Sequence[str], lang2: Sequence[str]) -> np.ndarray:
    """ "en-de" for each pair [n] from the two sentences' language codes (lower-cased, blanks as "und")."""
    if len(lang1) != len(lang2):
        raise ValueError(f"{len(lang1)} first languages but {len(lang2)} second languages")
    codes = ["-".join(str(lang or "").strip().lower() or "und" for lang in pair) for pair in zip(lang1, lang2)]
    return np.array(codes, dtype=object)


def languages_or_detected(sentences: Sequence[str], given: Sequence[str] | None = None) -> tuple[list[str], int]:
    """(a language code per sentence, how many were detected): the ``given`` code where there is one, else
    :func:`mlse.text.language_id.detect_language` of the sentence ("und" when undetermined)."""
    from mlse.text.language_id import detect_language  # lazy: langid loads its model on first use

    codes, detected = [], 0
    for i, text in enumerate(sentences):
        code = str(given[i]).strip() if given is not None and given[i] is not None else ""
        if not code:
            code = detect_language(text)[0]
            detected += 1
        codes.append(code)
    return codes, detected


def is_spaceless(text: str, lang: str | None = None) -> bool:
    """True when ``text`` is written without spaces between words: by its language code when given (not "und"), else
    when most of its letters are Han, kana or Thai."""
    base = str(lang or "").strip().lower().replace("-", "_").split("_")[0]
    if base and base != "und":
        return base in SPACELESS_LANGUAGES
    from mlse.text.language_id import script_counts  # letters per script

    counts = script_counts(text)
    letters = sum(counts.values())
    return letters > 0 and sum(counts.get(s, 0) for s in _SPACELESS_SCRIPTS) * 2 > letters


def text_length(text: str, lang: str | None = None) -> int:
    """Words of ``text``; letters and digits for text written without spaces (see :func:`is_spaceless`)."""
    text = str(text or "")
    if is_spaceless(text, lang):
        return sum(ch.isalnum() for ch in text)
    return len(text.split())


def pair_lengths(
    s1: Sequence[str], s2: Sequence[str], lang1: Sequence[str] | None = None, lang2: Sequence[str] | None = None
) -> np.ndarray:
    """The mean length of each pair's two sentences [n] (:func:`text_length`; languages optional)."""
    l1 = lang1 if lang1 is not None else [None] * len(s1)
    l2 = lang2 if lang2 is not None else [None] * len(s2)
    return np.array(
        [(text_length(a, x) + text_length(b, y)) / 2.0 for a, b, x, y in zip(s1, s2, l1, l2)], dtype=np.float64
    )


def length_bands(lengths: np.ndarray, unit: str = "words") -> tuple[np.ndarray, list[str]]:
    """(label of each pair [n], the labels in order short -> long): terciles of ``lengths``.

    Labels carry the band's range, e.g. "short (≤ 8 words)", "medium (8.5–15 words)", "long (≥ 15.5 words)".
    """
    x = np.asarray(lengths, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError("lengths must be a 1-D array of finite numbers")
    if x.size == 0:
        return np.array([], dtype=object), []
    cut1, cut2 = np.quantile(x, [1 / 3, 2 / 3])
    band = np.where(x <= cut1, 0, np.where(x <= cut2, 1, 2))  # [n]
    labels = np.empty(x.size, dtype=object)
    order = []
    for b, name in enumerate(("short", "medium", "long")):
        members = x[band == b]
        if members.size == 0:
            continue
        lo, hi = members.min(), members.max()
        span = (f"≤ {hi:g}", f"{lo:g}–{hi:g}" if lo != hi else f"{lo:g}", f"≥ {lo:g}")[b]
        label = f"{name} ({span} {unit})"
        labels[band == b] = label
        order.append(label)
    return labels, order


# -- metrics per slice ------------------------------------------------------------------------------------------------
def slice_metrics(
    pred: np.ndarray,
    gold: np.ndarray,
    labels: np.ndarray,
    *,
    order: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """One dict per slice: value, n, pearson, pearson_lo, pearson_hi, spearman, spearman_lo, spearman_hi, note.

    Correlations x 100; CIs are 95% percentile bootstrap over the slice's pairs (``n_boot`` resamples). ``order``: the
    slices to report (default: every label, most pairs first, then by name).
    """
    p = np.asarray(pred, dtype=np.float64)
    g = np.asarray(gold, dtype=np.float64)
    lab = np.asarray(labels, dtype=object)
    if not (p.ndim == g.ndim == lab.ndim == 1 and p.shape == g.shape == lab.shape):
        raise ValueError(f"pred, gold and labels must be 1-D of one length, got {p.shape}, {g.shape}, {lab.shape}")
    if order is None:
        values, counts = np.unique(lab.astype(str), return_counts=True)
        order = [str(v) for _, v in sorted(zip(-counts, values))]
    return [_one_slice(str(value), p[lab == value], g[lab == value], n_boot, seed) for value in order]


def _one_slice(value: str, p: np.ndarray, g: np.ndarray, n_boot: int, seed: int) -> dict:
    n = int(p.size)
    row = {"value": value, "n": n, **dict.fromkeys(CORRELATION_FIELDS[1:], math.nan), "note": ""}
    if n < MIN_PAIRS:
        row["note"] = f"fewer than {MIN_PAIRS} pairs: no correlation"
        return row
    boots = n_boot if n >= MIN_CI_PAIRS else 0
    m = sts_metrics(p, g, n_boot=boots, seed=seed)
    row.update(pearson=m["pearson"], spearman=m["spearman"])
    if math.isnan(m["pearson"]):
        row["note"] = "constant gold or predictions in this slice: no correlation"
        return row
    if boots:
        row["spearman_lo"], row["spearman_hi"] = m["spearman_ci95"]
        row["pearson_lo"], row["pearson_hi"] = bootstrap_pearson_ci(p, g, n_boot=boots, seed=seed)
    elif n < MIN_CI_PAIRS:
        row["note"] = f"fewer than {MIN_CI_PAIRS} pairs: no CI"
    return row


def slice_rows(
    preds: dict[str, np.ndarray],
    gold: np.ndarray,
    slices: dict[str, tuple[np.ndarray, Sequence[str]]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """Rows of the slices table (:data:`SLICE_COLUMNS`): for each slice kind, each of its values, each model.

    ``preds``: model -> predictions [n]; ``slices``: kind (e.g. :data:`LANGUAGE_PAIR`) -> (label per pair [n],
    the values in display order, or None for most pairs first).
    """
    rows = []
    for kind, (labels, order) in slices.items():
        per_model = {
            name: slice_metrics(pred, gold, labels, order=order, n_boot=n_boot, seed=seed)
            for name, pred in preds.items()
        }
        for per_value in zip(*per_model.values()):  # one slice value: its row of each model
            rows += [{"slice": kind, "model": name, **found} for name, found in zip(per_model, per_value)]
    return [{c: row[c] for c in SLICE_COLUMNS} for row in rows]
