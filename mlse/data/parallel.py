"""Tatoeba-Challenge (v2021-08-07) bitext, used as *training* data.

Each folder (``deu-eng``, ...) has two line-aligned text files and a ``.labels`` file per side giving each line's
language/script: mostly the folder's code, but ``ara`` mixes MSA with dialects and romanisations, and ``zho`` Mandarin
with Cantonese, Wu, Classical Chinese and romanised lines. :func:`default_labels` picks the standard written language,
e.g. ``load_parallel("en-zh", tgt_labels=default_labels("zh"))``. These files overlap with the LASER Tatoeba *test*
set: filter them with :mod:`mlse.data.contamination` before training a model you will evaluate there.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mlse.data.io import read_aligned
from mlse.data.layout import PARALLEL_DIR
from mlse.data.pairs import iso_639_3
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.data.types import ParallelCorpus
from mlse.errors import DataError

FILE_PREFIX = "tatoeba-test-v2021-08-07"

# Label sets for the "standard" written form where a side mixes varieties.
_DEFAULT_LABELS: dict[str, frozenset[str]] = {"zho": frozenset({"cmn_Hans", "cmn_Hant"}), "ara": frozenset({"ara"})}


def default_labels(lang: str) -> set[str]:
    """Labels of the standard written language for a Tatoeba-Challenge side.

    ``zho`` -> ``{"cmn_Hans", "cmn_Hant"}`` (Mandarin in Han script), ``ara`` -> ``{"ara"}`` (MSA), anything else
    -> ``{code}`` (drops e.g. the single ``rus_Latn`` line). Accepts ISO 639-1 codes."""
    code = iso_639_3(lang)
    return set(_DEFAULT_LABELS.get(code, frozenset({code})))


def parallel_pairs(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Sorted folder names such as ``"deu-eng"`` (the language order is the folder's, not a direction)."""
    return _pairs_in(require_subdir(resolve_data_dir(data_dir), PARALLEL_DIR))


def load_parallel(
    pair: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    src_labels: set[str] | None = None,
    tgt_labels: set[str] | None = None,
    max_pairs: int | None = None,
    seed: int = 0,
) -> ParallelCorpus:
    """Load a Tatoeba-Challenge pair; the *first* language of ``pair`` is returned as src.

    ``pair``: a folder name in either order (``"deu-eng"``, ``"eng-deu"``) or ISO 639-1 (``"de-en"``).
    ``src_labels``/``tgt_labels`` (returned sides; None keeps all): a line is kept only if each side's label is in its
    set. Empty sides are dropped; ``max_pairs`` keeps a :func:`seeded_subset`. DataError if nothing is left."""
    root = require_subdir(resolve_data_dir(data_dir), PARALLEL_DIR)
    src_code, tgt_code, folder = _find_folder(pair, root, _pairs_in(root))
    paths = [folder / f"{FILE_PREFIX}.{code}{ext}" for ext in ("", ".labels") for code in (src_code, tgt_code)]
    src_path, tgt_path, src_lab_path, tgt_lab_path = paths
    src, tgt = read_aligned(src_path, tgt_path)
    src_lab, tgt_lab = read_aligned(src_lab_path, tgt_lab_path)
    if len(src_lab) != len(src):
        raise DataError(
            f"labels do not match text: {src_lab_path} has {len(src_lab)} lines, {src_path} has {len(src)} lines"
        )

    keep = [
        i
        for i in range(len(src))
        if (src_labels is None or src_lab[i].strip() in src_labels)
        and (tgt_labels is None or tgt_lab[i].strip() in tgt_labels)
        and src[i].strip()
        and tgt[i].strip()
    ]
    if not keep:
        raise DataError(
            f"{folder}: no pairs left after filtering; labels present: "
            f"{src_code}: {', '.join(sorted(set(src_lab)))}; {tgt_code}: {', '.join(sorted(set(tgt_lab)))}"
        )
    if max_pairs is not None and max_pairs < 1:
        raise DataError(f"max_pairs must be a positive number, got {max_pairs}")
    keep = [keep[j] for j in seeded_subset(len(keep), max_pairs, seed)]

    return ParallelCorpus(
        src=[src[i] for i in keep],
        tgt=[tgt[i] for i in keep],
        src_lang=src_code,
        tgt_lang=tgt_code,
        name=f"tatoeba_challenge_v2021-08-07/{src_code}-{tgt_code}",
        sources=paths,
    )


def seeded_subset(n: int, size: int | None, seed) -> np.ndarray:
    """The indices ``0 .. n-1``, or when ``size`` is below ``n`` a sample of ``size`` of them drawn without replacement
    by ``numpy.random.default_rng(seed).choice``, sorted (a sample of a file keeps the file's order)."""
    if size is None or n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def _pairs_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and len(p.name.split("-")) == 2)


def _find_folder(pair: str, root: Path, available: list[str]) -> tuple[str, str, Path]:
    parts = pair.strip().split("-")
    if len(parts) == 2:
        a, b = iso_639_3(parts[0]), iso_639_3(parts[1])
        for name in (f"{a}-{b}", f"{b}-{a}"):
            if name in available:
                return a, b, root / name
    raise DataError(
        f"unknown Tatoeba-Challenge pair {pair!r}; available (either order, ISO 639-1 accepted): {', '.join(available)}"
    )
