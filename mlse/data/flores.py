"""FLORES-200 devtest: the same 1,012 sentences in every language (multi-way parallel)."""

from __future__ import annotations

import os
from pathlib import Path

from mlse.data.io import read_lines
from mlse.data.layout import FLORES_DIR, FLORES_SUFFIX
from mlse.data.pairs import iso_639_3
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.errors import DataError

# An ISO 639-3 code (after mlse.data.pairs.iso_639_3) -> FLORES's: Modern Standard Arabic "arb", Mandarin "zho".
_FLORES_639_3 = {"ara": "arb", "cmn": "zho"}
# When a bare ISO 639-3 code matches several scripts, this one wins (Chinese: Simplified script).
_PREFERRED = {"arb": "arb_Arab", "zho": "zho_Hans"}


def flores_languages(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Sorted full codes (``eng_Latn``, ``zho_Hans``, ...) that have a ``.devtest`` file."""
    return _codes_in(require_subdir(resolve_data_dir(data_dir), FLORES_DIR))


def load_flores(langs: list[str] | None = None, data_dir: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """Load devtest sentences keyed by full code; every list has the same length (1,012).

    ``langs``: full codes, ISO 639-3 (``"zho"`` means ``zho_Hans``) or 639-1; None: every language found, sorted."""
    folder = require_subdir(resolve_data_dir(data_dir), FLORES_DIR)
    available = _codes_in(folder)
    codes = available if langs is None else list(dict.fromkeys(_resolve(x, available) for x in langs))
    if not codes:
        raise DataError(f"{folder}: no FLORES languages selected or found (*{FLORES_SUFFIX} files)")
    out = {code: read_lines(folder / f"{code}{FLORES_SUFFIX}") for code in codes}
    lengths = {code: len(lines) for code, lines in out.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{c}: {n}" for c, n in lengths.items())
        raise DataError(f"{folder}: FLORES files are not line-aligned ({detail})")
    return out


def flores_files(codes, data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The devtest file of each full code (as :func:`load_flores` returns them): what a record lists as its sources."""
    folder = resolve_data_dir(data_dir) / FLORES_DIR
    return [folder / f"{code}{FLORES_SUFFIX}" for code in codes]


def _codes_in(folder: Path) -> list[str]:
    return sorted(p.name[: -len(FLORES_SUFFIX)] for p in folder.glob(f"*{FLORES_SUFFIX}") if p.is_file())


def _resolve(lang: str, available: list[str]) -> str:
    by_lower = {c.lower(): c for c in available}
    low = lang.strip().lower()
    if low in by_lower:
        return by_lower[low]
    code = iso_639_3(low)
    code = _FLORES_639_3.get(code, code)
    matches = [c for c in available if c.split("_")[0].lower() == code]
    if len(matches) == 1:
        return matches[0]
    if _PREFERRED.get(code) in matches:
        return _PREFERRED[code]
    raise DataError(f"unknown FLORES language {lang!r}; available: {', '.join(available)}")
