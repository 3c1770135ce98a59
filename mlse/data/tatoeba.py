"""LASER's Tatoeba similarity-search test set (112 languages, each paired with English).

Evaluation only. The English side differs per language, so scores are not comparable across
languages; see the dataset's README.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mlse.data.io import read_aligned
from mlse.data.layout import TATOEBA_DIR
from mlse.data.pairs import ISO_639_3, iso_639_3
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.data.types import ParallelCorpus
from mlse.errors import DataError

_FILE_RE = re.compile(r"^tatoeba\.([a-z]{3})-eng\.([a-z]{3})$")


def tatoeba_languages(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Sorted ISO 639-3 codes that have both a ``.xxx`` and a ``.eng`` file (112 in LASER v1)."""
    return _languages_in(require_subdir(resolve_data_dir(data_dir), TATOEBA_DIR))


def resolve_tatoeba_lang(lang: str, data_dir: str | os.PathLike[str] | None = None) -> str:
    """Map ``"de"``/``"deu"``/``"DEU"`` to the code used in the file names, or raise DataError."""
    return _resolve(lang, tatoeba_languages(data_dir))


def load_tatoeba(lang: str, data_dir: str | os.PathLike[str] | None = None) -> ParallelCorpus:
    """Load one language's test pairs: src = that language, tgt = English (``tgt_lang="eng"``)."""
    folder = require_subdir(resolve_data_dir(data_dir), TATOEBA_DIR)
    code = _resolve(lang, _languages_in(folder))
    src_path = folder / f"tatoeba.{code}-eng.{code}"
    tgt_path = folder / f"tatoeba.{code}-eng.eng"
    src, tgt = read_aligned(src_path, tgt_path)
    return ParallelCorpus(
        src=src, tgt=tgt, src_lang=code, tgt_lang="eng", name=f"{TATOEBA_DIR}/{code}-eng", sources=[src_path, tgt_path]
    )


def _languages_in(folder: Path) -> list[str]:
    names = {p.name for p in folder.iterdir()}
    matches = filter(None, map(_FILE_RE.match, names))
    return sorted({m[1] for m in matches if m[1] == m[2] and f"tatoeba.{m[1]}-eng.eng" in names})


def _laser_code(lang: str) -> str:
    code = iso_639_3(lang)
    # "zho" is how the Tatoeba-Challenge bitext names Chinese; LASER's test set calls it "cmn" (Mandarin).
    return "cmn" if code == "zho" else code


def _resolve(lang: str, available: list[str]) -> str:
    code = _laser_code(lang)
    if code == "eng":
        raise DataError(
            "English is the pivot side of every Tatoeba test pair, not a test language; "
            f"choose one of: {', '.join(available)}"
        )
    if code not in available:
        aliases = ", ".join(f"{k}={_laser_code(k)}" for k in ISO_639_3 if k != "en")
        raise DataError(f"unknown Tatoeba language {lang!r}; available: {', '.join(available)} (aliases: {aliases})")
    return code
