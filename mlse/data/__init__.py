"""Dataset loaders: local files under a data directory (never copied into the repository).

Importing this package is light (numpy only; pandas and huggingface_hub load on first use).
"""

from mlse.data.contamination import evaluation_sentences, filter_contaminated, normalize_sentence
from mlse.data.flores import flores_languages, load_flores
from mlse.data.hashing import file_sha256
from mlse.data.hub_download import download_from_hub
from mlse.data.io import read_aligned, read_lines
from mlse.data.pairs import HAM_KIM_14, ISO_639_3
from mlse.data.parallel import default_labels, load_parallel, parallel_pairs
from mlse.data.paths import resolve_data_dir
from mlse.data.stsb import STS_LANGS, STS_SPLITS, load_sts, read_sts_file
from mlse.data.tatoeba import load_tatoeba, resolve_tatoeba_lang, tatoeba_languages
from mlse.data.tsv import load_parallel_tsv, load_scored_tsv
from mlse.data.types import ParallelCorpus, ScoredPairs
from mlse.data.wmt import load_wmt, wmt_sets

__all__ = [
    "HAM_KIM_14",
    "ISO_639_3",
    "STS_LANGS",
    "STS_SPLITS",
    "ParallelCorpus",
    "ScoredPairs",
    "default_labels",
    "download_from_hub",
    "evaluation_sentences",
    "file_sha256",
    "filter_contaminated",
    "flores_languages",
    "load_flores",
    "load_parallel",
    "load_parallel_tsv",
    "load_scored_tsv",
    "load_sts",
    "load_tatoeba",
    "load_wmt",
    "normalize_sentence",
    "parallel_pairs",
    "read_aligned",
    "read_lines",
    "read_sts_file",
    "resolve_data_dir",
    "resolve_tatoeba_lang",
    "tatoeba_languages",
    "wmt_sets",
]
