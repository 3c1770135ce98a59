"""The shipped training bitext: a small contamination-filtered sample of the Tatoeba-Challenge pairs, for a deployment
whose data directory has no ``parallel/`` folder (a Hugging Face Space: the bitext has no hub source mlse reads).

:func:`build_sample` (``python -m mlse data sample-bitext``) filters each Tatoeba-Challenge folder as training does
(:func:`~mlse.data.parallel.default_labels`, :func:`~mlse.data.contamination.filter_contaminated`), keeps a seeded
sample of at most ``per_pair`` pairs in file order, and writes all or nothing: ``{folder}.tsv.gz`` (gzip without
timestamp: a rebuild is byte-identical), ``MANIFEST.json`` (hashes, counts) and ``README.md`` (CC BY 2.0 FR).
:func:`mlse.data.bitext.load_filtered_bitext` filters it again at load time.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import textwrap
import zlib
from dataclasses import dataclass
from pathlib import Path

from mlse.atomic import atomic_dir
from mlse.data.contamination import evaluation_sentences, filter_contaminated
from mlse.data.hashing import file_sha256
from mlse.data.layout import PARALLEL_DIR, STS_LANGS
from mlse.data.pairs import iso_639_3
from mlse.data.parallel import default_labels, load_parallel, parallel_pairs, seeded_subset
from mlse.data.paths import find_data_dir, resolve_data_dir
from mlse.data.stsb import sts_file
from mlse.data.tatoeba import load_tatoeba, tatoeba_languages
from mlse.data.types import ParallelCorpus
from mlse.dirs import assets_dir
from mlse.errors import DataError

log = logging.getLogger(__name__)

SAMPLE_PER_PAIR = 2000  # = mlse.train.config.MAX_PAIRS: a default run on the sample uses as many pairs as on the full
SUFFIX = ".tsv.gz"
MANIFEST = "MANIFEST.json"
LICENCE = "CC BY 2.0 FR"
ATTRIBUTION = (
    "Sentences and translations from Tatoeba (https://tatoeba.org), contributed by the Tatoeba community and licensed "
    "under CC BY 2.0 FR (https://creativecommons.org/licenses/by/2.0/fr/), as released in the Tatoeba Translation "
    "Challenge v2021-08-07 by J. Tiedemann (https://github.com/Helsinki-NLP/Tatoeba-Challenge). This sample is a "
    "selection of those pairs (a seeded subset; pairs that occur in evaluation sets removed); no sentence was changed."
)


def sample_dir() -> Path:
    """The shipped sample: ``assets/data/finetune-bitext`` of the repository."""
    return assets_dir() / "data" / "finetune-bitext"


# ---------------------------------------------------------------------------------------------- where bitext comes from
@dataclass(frozen=True)
class BitextSource:
    """Where training bitext is read: ``kind`` is ``"data directory"`` or ``"shipped sample"``."""

    kind: str
    path: Path

    @property
    def shipped(self) -> bool:
        return self.kind == "shipped sample"

    def describe(self) -> str:
        if self.shipped:
            where = "assets/data/finetune-bitext" if self.path == sample_dir() else str(self.path)
            return (
                f"the shipped sample ({where}: at most {SAMPLE_PER_PAIR:,} contamination-filtered "
                f"Tatoeba-Challenge pairs per language pair, {LICENCE})"
            )
        return f"the data directory's Tatoeba-Challenge bitext ({self.path})"


def training_bitext_source(data_dir: str | os.PathLike[str] | None = None, root: Path | None = None) -> BitextSource:
    """The data directory's ``parallel/`` folder when it has one, else the shipped sample (``root``: its folder).

    A data directory that cannot be found also means the sample. DataError when neither is there."""
    found = find_data_dir(data_dir)
    parallel = found / PARALLEL_DIR if found is not None else None
    if parallel is not None and parallel.is_dir():
        return BitextSource("data directory", parallel)
    root = root or sample_dir()
    if not (root / MANIFEST).is_file():
        where = f"{parallel.parent}" if parallel is not None else "the data directory"
        raise DataError(
            f"no training bitext: {where} has no {PARALLEL_DIR} folder and the shipped sample {root} is "
            "missing; copy that folder into the data directory"
        )
    return BitextSource("shipped sample", root)


# ------------------------------------------------------------------------------------------------------------ reading
def sample_pairs(root: Path | None = None) -> list[str]:
    """The Tatoeba-Challenge folder names the sample holds (``"deu-eng"``, ...), sorted."""
    root = root or sample_dir()
    return sorted(p.name.removesuffix(SUFFIX) for p in root.glob(f"*{SUFFIX}"))


def load_sample_pair(pair: str, root: Path | None = None) -> ParallelCorpus:
    """One pair of the sample, oriented as asked: ``"de-en"``, ``"eng-deu"`` and ``"deu-eng"`` all work, and the
    first language is returned as src (as :func:`mlse.data.parallel.load_parallel` does)."""
    root = root or sample_dir()
    available = sample_pairs(root)
    a, sep, b = (iso_639_3(x) for x in pair.partition("-"))
    for folder, swap in ((f"{a}-{b}", False), (f"{b}-{a}", True)):
        if sep and folder in available:
            path = root / f"{folder}{SUFFIX}"
            first, second = _read_pairs(path)
            src, tgt = (second, first) if swap else (first, second)
            return ParallelCorpus(src, tgt, src_lang=a, tgt_lang=b, name=f"shipped sample/{a}-{b}", sources=[path])
    raise DataError(
        f"language pair {pair!r} is not in the shipped training sample {root} (it has "
        f"{', '.join(available) or 'nothing'}); for other pairs copy {PARALLEL_DIR} into the data "
        "directory"
    )


def _read_pairs(path: Path) -> tuple[list[str], list[str]]:
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the shipped sample ({exc})") from None
    first, second = [], []
    for number, line in enumerate(text.split("\n")[:-1], 1):  # "\n" only: U+0085 occurs inside sentences
        cells = line.split("\t")
        if len(cells) != 2 or not cells[0].strip() or not cells[1].strip():
            raise DataError(f"{path}:{number}: expected two non-empty tab-separated sentences")
        first.append(cells[0])
        second.append(cells[1])
    return first, second


# ----------------------------------------------------------------------------------------------------------- building
def build_sample(
    data_dir: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    *,
    per_pair: int = SAMPLE_PER_PAIR,
    seed: int = 0,
    command: str = "",
) -> dict:
    """Write the sample of every Tatoeba-Challenge folder of ``data_dir`` to ``out`` (see the module docstring);
    returns the manifest. Folder ``f`` is sampled with ``numpy.random.default_rng([seed, crc32(f)])``."""
    if per_pair < 1:
        raise DataError(f"per_pair must be a positive number, got {per_pair}")
    root = resolve_data_dir(data_dir)
    banned = evaluation_sentences(root)
    manifest: dict = {
        "command": command or f"python -m mlse data sample-bitext --out {out}",
        "what": "contamination-filtered sample of the Tatoeba-Challenge v2021-08-07 bitext (mlse.data.bitext_sample)",
        "per_pair": per_pair,
        "seed": seed,
        "format": "{folder}.tsv.gz: first language <TAB> second language",
        "labels": "the standard written language of each side (mlse.data.parallel.default_labels)",
        "filter": "pairs whose either side (NFC, whitespace-normalised) occurs in LASER Tatoeba (every language) or "
        "STS Multi MT test/dev (every language) dropped (mlse.data.contamination.filter_contaminated)",
        "licence": LICENCE,
        "attribution": ATTRIBUTION,
        "pairs": {},
        "source_files": {},
        "evaluation_files": _evaluation_files(root),
    }
    with atomic_dir(out) as folder:
        for name in parallel_pairs(root):
            a, _, b = name.partition("-")
            corpus = load_parallel(name, root, src_labels=default_labels(a), tgt_labels=default_labels(b))
            clean, dropped = filter_contaminated(corpus, banned)
            keep = seeded_subset(len(clean), per_pair, [seed, zlib.crc32(name.encode())])
            rows = [(clean.src[i], clean.tgt[i]) for i in keep]
            if any("\t" in s or "\n" in s for row in rows for s in row):
                raise DataError(f"{name}: a sentence holds a tab or newline; the sample's TSV cannot store it")
            path = folder / f"{name}{SUFFIX}"
            path.write_bytes(gzip.compress("".join(f"{s}\t{t}\n" for s, t in rows).encode("utf-8"), mtime=0))
            manifest["pairs"][name] = {
                "available": len(corpus),
                "contaminated_dropped": dropped,
                "clean": len(clean),
                "shipped": len(rows),
                "file": path.name,
                "sha256": file_sha256(path),
                "bytes": path.stat().st_size,
            }
            manifest["source_files"].update({_relative(p, root): file_sha256(p) for p in corpus.sources})
            log.info("sample %s: %d pairs, %d contaminated, %d shipped", name, len(corpus), dropped, len(rows))
        manifest["total_bytes"] = sum(v["bytes"] for v in manifest["pairs"].values())
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "README.md").write_text(_readme(manifest), encoding="utf-8")
    return manifest


def _evaluation_files(root: Path) -> dict[str, str]:
    """sha256 of every file the contamination filter read (relative to the data directory)."""
    paths = [p for lang in tatoeba_languages(root) for p in load_tatoeba(lang, root).sources]
    paths += [sts_file(lang, split, root) for split in ("test", "dev") for lang in STS_LANGS]
    return {_relative(p, root): file_sha256(p) for p in paths}


def _relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def _readme(manifest: dict) -> str:
    rows = "\n".join(
        f"| {name} | {v['available']:,} | {v['contaminated_dropped']:,} | {v['shipped']:,} |"
        for name, v in manifest["pairs"].items()
    )
    paragraphs = [
        f"A small sample of the Tatoeba-Challenge v2021-08-07 bitext, so that a deployment whose data directory has no "
        f"`{PARALLEL_DIR}` folder (a Hugging Face Space) can still fine-tune and train Stage 1. When that folder is in "
        "the data directory, the full files are used instead; a run records which (`training_data` in its "
        "`metrics.json` and `finetune_config.json`).",
        f"Built by `{manifest['command']}` (mlse/data/bitext_sample.py): the standard written language of each side; "
        "every pair whose either side occurs in LASER Tatoeba or STS Multi MT test/dev removed (the filter training "
        f"applies, applied again when the sample is loaded); then at most {manifest['per_pair']:,} pairs per folder "
        "(seeded, in file order). `MANIFEST.json` lists the sha256 of every source and evaluation file and of every "
        "file here.",
    ]
    licence = [ATTRIBUTION, f"Licence: {LICENCE}, https://creativecommons.org/licenses/by/2.0/fr/."]
    text = "\n\n".join(textwrap.fill(p, 118) for p in paragraphs)
    return (
        f"# Training bitext shipped with mlse\n\n{text}\n\n"
        "| folder | pairs (standard written language) | dropped as contaminated | shipped |\n|---|---|---|---|\n"
        f"{rows}\n\n## Licence\n\n" + "\n\n".join(textwrap.fill(p, 118) for p in licence) + "\n"
    )
