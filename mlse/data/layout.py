"""The local layout of the data directory: one folder per dataset, and what each holds (no code, no imports).

The loaders, :mod:`mlse.data.hub_download` and :mod:`mlse.data.fetch_status` all use these names, so they depend on
the layout rather than on each other.
"""

from __future__ import annotations

STS_DIR = "stsb_multi_mt"  # stsb-{lang}-{split}.csv
STS_LANGS: tuple[str, ...] = ("en", "de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")
STS_SPLITS: tuple[str, ...] = ("train", "dev", "test")

FLORES_DIR = "flores200_devtest"  # {code}.devtest, e.g. eng_Latn.devtest
FLORES_SUFFIX = ".devtest"
# The FLORES-200 languages of the local copy (and what the hub download fetches).
FLORES_CODES: tuple[str, ...] = (
    "arb_Arab",
    "ces_Latn",
    "deu_Latn",
    "eng_Latn",
    "fra_Latn",
    "ita_Latn",
    "nld_Latn",
    "pol_Latn",
    "por_Latn",
    "rus_Cyrl",
    "spa_Latn",
    "tur_Latn",
    "ukr_Cyrl",
    "zho_Hans",
    "zho_Hant",
)

TATOEBA_DIR = "tatoeba_laser_v1"  # tatoeba.{xxx}-eng.{xxx} and tatoeba.{xxx}-eng.eng
PARALLEL_DIR = "parallel/tatoeba_challenge_v2021-08-07"  # Tatoeba-Challenge bitext, one folder per pair
WMT_DIR = "wmt_newstest"
