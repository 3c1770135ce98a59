"""Fetching the datasets from the Hugging Face hub into the local layout the loaders read.

After :func:`download_from_hub`, the loaders work unchanged with ``data_dir=target_dir``. Each dataset's folder is
filled all or nothing (:func:`mlse.atomic.atomic_dir`), so a failed fetch leaves no half dataset. Parquet needs
``pyarrow``. Repositories (:data:`HUB_DATASETS`): ``PhilipMay/stsb_multi_mt`` (shards concatenated in name order),
``openlanguagedata/flores_plus`` (**gated**: the ``HF_TOKEN`` account must have accepted its terms; ``cmn_*`` written
as ``zho_*``; rows ordered by ``id``) and ``mteb/tatoeba-bitext-mining`` (``sentence1`` the xxx side, ``sentence2``
English; both the jsonl.gz and the older parquet layout). Tested offline in tests/data/test_data_fetch.py.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mlse.atomic import atomic_dir
from mlse.data.layout import FLORES_CODES, FLORES_DIR, FLORES_SUFFIX, STS_DIR, STS_LANGS, STS_SPLITS, TATOEBA_DIR
from mlse.errors import DataError

_TABLE_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")


@dataclass(frozen=True)
class HubDataset:
    """One dataset mlse can fetch (keyed by its ``data fetch --dataset`` name): its hub repository, its folder."""

    label: str  # its name in messages
    repo: str
    folder: str  # the folder under the data directory that the loaders read
    patterns: tuple[str, ...] | None  # allow_patterns of the snapshot (None: the whole repository)


def _flores_patterns() -> tuple[str, ...]:
    # FLORES+ names Chinese cmn_*; both spellings are asked for so that either naming of the files matches.
    codes = dict.fromkeys([*FLORES_CODES, *(c.replace("zho_", "cmn_") for c in FLORES_CODES)])
    return tuple(f"devtest/*{code}*" for code in codes)


HUB_DATASETS: dict[str, HubDataset] = {
    "stsb_multi_mt": HubDataset("STS Multi MT", "PhilipMay/stsb_multi_mt", STS_DIR, ("*.parquet",)),
    "flores200": HubDataset("FLORES+ devtest", "openlanguagedata/flores_plus", FLORES_DIR, _flores_patterns()),
    "tatoeba": HubDataset("Tatoeba (LASER test set)", "mteb/tatoeba-bitext-mining", TATOEBA_DIR, None),
}


def hub_offline() -> bool:
    """True when the user or environment asked for no hub access (``HF_HUB_OFFLINE``, as huggingface_hub reads it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def download_from_hub(dataset: str, target_dir: str | os.PathLike[str], *, token: str | None = None) -> Path:
    """Download ``dataset`` (a key of HUB_DATASETS) and write it under ``target_dir``; return target_dir.

    ``token``: a Hugging Face token; None uses ``HF_TOKEN`` or the stored login (what a gated repository needs)."""
    if dataset not in HUB_DATASETS:
        raise DataError(f"unknown hub dataset {dataset!r}; available: {', '.join(HUB_DATASETS)}")
    spec = HUB_DATASETS[dataset]
    if hub_offline():
        raise DataError(
            f"cannot download {spec.repo}: HF_HUB_OFFLINE is set, the hub is not reachable; pass --data-dir"
        )
    local = _snapshot(spec, token)
    target = Path(target_dir)
    convert = {"stsb_multi_mt": _write_sts, "flores200": _write_flores, "tatoeba": _write_tatoeba}[dataset]
    with atomic_dir(target / spec.folder) as folder:
        if not convert(local, folder):  # raised inside: the empty folder is discarded, an old one stays
            raise DataError(
                f"{spec.repo}: no tables in the expected layout were downloaded (see mlse/data/hub_download.py)"
            )
    return target


def _snapshot(spec: HubDataset, token: str | None) -> Path:
    """The repository's files (those matching its patterns) in the local HF cache; DataError naming the cause."""
    from huggingface_hub import snapshot_download  # lazy: ~0.3 s to import; only a download needs it
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        patterns = list(spec.patterns) if spec.patterns else None
        return Path(snapshot_download(repo_id=spec.repo, repo_type="dataset", allow_patterns=patterns, token=token))
    except GatedRepoError:
        raise DataError(
            f"cannot download {spec.repo}: it is gated; accept its terms at https://huggingface.co/datasets/"
            f"{spec.repo} and give a token of that account as HF_TOKEN (on a Space: a secret named HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise DataError(f"cannot download {spec.repo}: the hub does not show it to this token (HF_TOKEN)") from None
    except Exception as exc:  # noqa: BLE001 - any network failure means the same to the user
        raise DataError(
            f"cannot download {spec.repo}: the hub is not reachable ({type(exc).__name__}); "
            "pass --data-dir with a local copy of the data"
        ) from None


def _read_table(path: Path):  # -> pandas.DataFrame
    import pandas as pd  # lazy: pandas costs ~0.5 s to import; only tables need it

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


def _write_lines(path: Path, lines: list) -> None:
    # A newline inside a sentence would break line alignment; the loaders split on "\n" only.
    path.write_text("".join(str(x).replace("\r", " ").replace("\n", " ") + "\n" for x in lines), encoding="utf-8")


def _write_sts(local: Path, folder: Path) -> int:
    """``stsb-{lang}-{split}.csv`` (no header: sentence1, sentence2, score) per language and split; returns how many."""
    import pandas as pd  # lazy: pandas costs ~0.5 s to import and only a download needs it

    shards: dict[tuple[str, str], list[Path]] = {}
    for table in _tables(local):
        lang = next((part for part in table.relative_to(local).parts[:-1] if part in STS_LANGS), None)
        split = re.search(r"(?<![a-z])(" + "|".join(STS_SPLITS) + r")(?![a-z])", table.name)
        if lang is not None and split is not None:
            shards.setdefault((lang, split.group(1)), []).append(table)
    for (lang, split), tables in sorted(shards.items()):
        df = pd.concat([_read_table(t)[["sentence1", "sentence2", "similarity_score"]] for t in tables])
        df.to_csv(folder / f"stsb-{lang}-{split}.csv", header=False, index=False, lineterminator="\n", encoding="utf-8")
    return len(shards)


def _write_flores(local: Path, folder: Path) -> int:
    """``{code}.devtest`` (one sentence a line, in the dataset's id order) per language; returns the count."""
    written: set[str] = set()
    for table in _tables(local):
        df = _read_table(table)
        if {"iso_639_3", "iso_15924"} <= set(df.columns):
            code = f"{df['iso_639_3'].iloc[0]}_{df['iso_15924'].iloc[0]}"
        else:
            code = table.name.split(".")[0]
        code = code.replace("cmn_", "zho_")  # FLORES+ renamed Chinese to cmn_*
        if code in FLORES_CODES and code not in written and "text" in df.columns:
            if "id" in df.columns:  # line i must be sentence i in every language
                df = df.sort_values("id", kind="stable")
            _write_lines(folder / f"{code}{FLORES_SUFFIX}", df["text"].tolist())
            written.add(code)
    return len(written)


_TATOEBA_PAIR = re.compile(r"(?<![a-z])([a-z]{3})-eng(?![a-z])")


def _write_tatoeba(local: Path, folder: Path) -> int:
    """``tatoeba.{xxx}-eng.{xxx}`` and ``tatoeba.{xxx}-eng.eng`` per language; returns the number of languages."""
    written: set[str] = set()
    for table in _tables(local):
        match = _TATOEBA_PAIR.search(str(table.relative_to(local)))
        if match is None or match.group(1) in written:
            continue
        code = match.group(1)
        df = _read_table(table)
        if {"sentence1", "sentence2"} <= set(df.columns):
            _write_lines(folder / f"tatoeba.{code}-eng.{code}", df["sentence1"].tolist())
            _write_lines(folder / f"tatoeba.{code}-eng.eng", df["sentence2"].tolist())
            written.add(code)
    return len(written)
