"""Fetching the datasets from the Hugging Face hub into the local layout the loaders read.

UNTESTED OFFLINE: the machines this project was built on cannot reach the hub, so the conversions
below follow the repositories' documented file layouts but have never run end to end. After a
successful call, ``load_sts``/``load_flores``/``load_tatoeba`` work unchanged with
``data_dir=target_dir``. Reading parquet needs ``pyarrow``.

Repositories (dataset repos):

* ``stsb_multi_mt`` -> ``PhilipMay/stsb_multi_mt``: ``{lang}/{split}-*.parquet`` with columns
  ``sentence1, sentence2, similarity_score``.
* ``flores200`` -> ``openlanguagedata/flores_plus`` (gated: accept its terms and log in first):
  ``devtest/*.parquet`` with ``iso_639_3, iso_15924, text``; Chinese is ``cmn_*`` there and is
  written as ``zho_*`` like the original FLORES-200 files. Only the 15 languages of the local copy.
* ``tatoeba`` -> ``mteb/tatoeba-bitext-mining``: one table per ``{xxx}-eng`` config with
  ``sentence1`` (the xxx side) and ``sentence2`` (English).
"""

from __future__ import annotations

import os
from pathlib import Path

from mlse.errors import DataError

HUB_REPOS: dict[str, str] = {
    "stsb_multi_mt": "PhilipMay/stsb_multi_mt",
    "flores200": "openlanguagedata/flores_plus",
    "tatoeba": "mteb/tatoeba-bitext-mining",
}
_ALLOW = {"stsb_multi_mt": ["*.parquet"], "flores200": ["devtest/*"], "tatoeba": None}
FLORES_CODES = (
    "arb_Arab", "ces_Latn", "deu_Latn", "eng_Latn", "fra_Latn", "ita_Latn", "nld_Latn", "pol_Latn",
    "por_Latn", "rus_Cyrl", "spa_Latn", "tur_Latn", "ukr_Cyrl", "zho_Hans", "zho_Hant",
)  # fmt: skip
_TABLE_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")


def download_from_hub(dataset: str, target_dir: str | os.PathLike[str]) -> Path:
    """Download ``dataset`` (a key of HUB_REPOS) and write it under ``target_dir``; return target_dir."""
    if dataset not in HUB_REPOS:
        raise DataError(f"unknown hub dataset {dataset!r}; available: {', '.join(HUB_REPOS)}")
    repo = HUB_REPOS[dataset]
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise DataError(f"cannot download {repo}: HF_HUB_OFFLINE is set, the hub is not reachable; pass --data-dir")
    try:
        from huggingface_hub import snapshot_download

        local = Path(snapshot_download(repo_id=repo, repo_type="dataset", allow_patterns=_ALLOW[dataset]))
    except Exception as exc:  # noqa: BLE001 - any hub, network or auth failure means the same to the user
        raise DataError(
            f"cannot download {repo}: the hub is not reachable ({type(exc).__name__}); "
            "pass --data-dir with a local copy of the data"
        ) from None
    target = Path(target_dir)
    {"stsb_multi_mt": _write_sts, "flores200": _write_flores, "tatoeba": _write_tatoeba}[dataset](local, target)
    return target


def _read_table(path: Path):  # -> pandas.DataFrame
    import pandas as pd

    try:
        if path.name.endswith(".parquet"):
            return pd.read_parquet(path)
        return pd.read_json(path, lines=".jsonl" in path.name)
    except ImportError as exc:
        raise DataError(f"{path}: reading it needs an extra package ({exc}); pip install pyarrow") from None
    except ValueError as exc:
        raise DataError(f"{path}: cannot read downloaded table ({exc})") from None


def _tables(local: Path) -> list[Path]:
    return sorted(p for p in local.rglob("*") if p.is_file() and p.name.endswith(_TABLE_SUFFIXES))


def _write_lines(path: Path, lines: list[str]) -> None:
    # A newline inside a sentence would break line alignment; the loaders split on "\n" only.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(str(x).replace("\r", " ").replace("\n", " ") + "\n" for x in lines), encoding="utf-8")


def _write_sts(local: Path, target: Path) -> None:
    from mlse.data.stsb import STS_DIR, STS_LANGS, STS_SPLITS

    written = 0
    for table in _tables(local):
        lang = table.parent.name
        split = next((s for s in STS_SPLITS if s in table.name), None)
        if lang not in STS_LANGS or split is None:
            continue
        df = _read_table(table)[["sentence1", "sentence2", "similarity_score"]]
        out = target / STS_DIR / f"stsb-{lang}-{split}.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out, header=False, index=False, lineterminator="\n", encoding="utf-8")
        written += 1
    if not written:
        raise DataError(f"{local}: no STS Multi MT tables in the expected layout ({{lang}}/{{split}}-*.parquet)")


def _write_flores(local: Path, target: Path) -> None:
    from mlse.data.flores import FLORES_DIR, SUFFIX

    written = 0
    for table in _tables(local):
        df = _read_table(table)
        if {"iso_639_3", "iso_15924"} <= set(df.columns):
            code = f"{df['iso_639_3'].iloc[0]}_{df['iso_15924'].iloc[0]}"
        else:
            code = table.name.split(".")[0]
        code = code.replace("cmn_", "zho_")  # FLORES+ renamed Chinese to cmn_*
        if code in FLORES_CODES and "text" in df.columns:
            _write_lines(target / FLORES_DIR / f"{code}{SUFFIX}", df["text"].tolist())
            written += 1
    if not written:
        raise DataError(f"{local}: no FLORES+ devtest tables in the expected layout (devtest/*.parquet)")


def _write_tatoeba(local: Path, target: Path) -> None:
    from mlse.data.tatoeba import TATOEBA_DIR

    written = 0
    for table in _tables(local):
        config = next((part for part in table.relative_to(local).parts if part.endswith("-eng")), None)
        if config is None:
            config = next((part for part in table.name.split(".") if part.endswith("-eng")), None)
        if config is None or len(config) != 7:
            continue
        code = config[:3]
        df = _read_table(table)
        if {"sentence1", "sentence2"} <= set(df.columns):
            _write_lines(target / TATOEBA_DIR / f"tatoeba.{code}-eng.{code}", df["sentence1"].tolist())
            _write_lines(target / TATOEBA_DIR / f"tatoeba.{code}-eng.eng", df["sentence2"].tolist())
            written += 1
    if not written:
        raise DataError(f"{local}: no Tatoeba tables in the expected layout ({{xxx}}-eng with sentence1/sentence2)")
