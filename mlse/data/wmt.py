"""WMT news test sets as plain line-aligned text.

Layout: ``wmt_newstest/{year}/newstest{year}.{l}`` for a multi-way year (2013: cs de en es fr ru), or
``wmt_newstest/{year}/{a}-{b}/newstest{year}.{l}`` for a single pair.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from mlse.data.io import read_aligned
from mlse.data.layout import WMT_DIR
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.data.types import ParallelCorpus
from mlse.errors import DataError


def wmt_sets(data_dir: str | os.PathLike[str] | None = None) -> list[tuple[int, str]]:
    """Available (year, pair) sets, sorted; a multi-way year lists every unordered pair once."""
    root = require_subdir(resolve_data_dir(data_dir), WMT_DIR)
    return sorted((year, pair) for year, pairs in _index(root).items() for pair in pairs)


def load_wmt(year: int, pair: str, data_dir: str | os.PathLike[str] | None = None) -> ParallelCorpus:
    """Load one test set; ``"de-en"`` gives src = German. Either order of a folder's pair works."""
    root = require_subdir(resolve_data_dir(data_dir), WMT_DIR)
    index = _index(root)
    try:
        year_int = int(year)
    except (TypeError, ValueError):
        raise DataError(f"WMT year must be a number, got {year!r}") from None
    parts = pair.strip().lower().split("-")
    folders = index.get(year_int, {})
    if len(parts) == 2:
        a, b = parts
        folder = folders.get(f"{a}-{b}") or folders.get(f"{b}-{a}")
        if folder is not None:
            src_path, tgt_path = folder / f"newstest{year_int}.{a}", folder / f"newstest{year_int}.{b}"
            src, tgt = read_aligned(src_path, tgt_path)
            name = f"{WMT_DIR}/{year_int}/{a}-{b}"
            return ParallelCorpus(src, tgt, src_lang=a, tgt_lang=b, name=name, sources=[src_path, tgt_path])
    available = ", ".join(f"{y} {p}" for y, p in sorted((y, p) for y, ps in index.items() for p in ps))
    raise DataError(f"unknown WMT set {year} {pair!r}; available (either order): {available}")


def _index(root: Path) -> dict[int, dict[str, Path]]:
    """year -> {"a-b": folder holding newstest{year}.a and .b}."""
    out: dict[int, dict[str, Path]] = {}
    for year_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit()):
        year = int(year_dir.name)
        prefix = f"newstest{year}."
        multiway = sorted(p.name[len(prefix) :] for p in year_dir.glob(f"{prefix}*") if p.is_file())
        pairs = {f"{a}-{b}": year_dir for a, b in itertools.combinations(multiway, 2)}
        for sub in year_dir.iterdir():
            langs = sub.name.split("-")
            if sub.is_dir() and len(langs) == 2 and all((sub / f"{prefix}{lang}").is_file() for lang in langs):
                pairs[sub.name] = sub
        if pairs:
            out[year] = pairs
    return out
