"""Every named list of language pairs and languages the methods, experiments and the app use, in one place.

Pairs are written as the dataset that holds them names them: STS Multi MT and Tatoeba-Challenge English-X pairs as
ISO 639-1 ``"en-de"``; Tatoeba-Challenge folders for Stage 1 as ISO 639-3 ``"eng-deu"``; LASER Tatoeba languages as
ISO 639-3 ``"deu"`` (paired with English); FLORES-200 as ``"eng_Latn"``. What a dataset holds is in
:mod:`mlse.data.layout`.
"""

from __future__ import annotations

from mlse.data.layout import STS_LANGS

# ISO 639-1 -> ISO 639-3 (macrolanguage codes: Arabic "ara", Chinese "zho"), for the languages people ask for most. Each
# loader maps a code through this table, then to its dataset's own names (LASER Tatoeba: "cmn"; FLORES: "arb_Arab").
ISO_639_3: dict[str, str] = {
    "ar": "ara",
    "cs": "ces",
    "de": "deu",
    "en": "eng",
    "es": "spa",
    "fr": "fra",
    "it": "ita",
    "ja": "jpn",
    "ko": "kor",
    "nl": "nld",
    "pl": "pol",
    "pt": "por",
    "ru": "rus",
    "th": "tha",
    "tr": "tur",
    "uk": "ukr",
    "zh": "zho",
}


def iso_639_3(lang: str) -> str:
    """``lang`` stripped and lower-cased, an ISO 639-1 code mapped to its ISO 639-3 one (``"DE"`` -> ``"deu"``)."""
    code = lang.strip().lower()
    return ISO_639_3.get(code, code)


# -- STS Multi MT (evaluation, Stage 2, fine-tuning dev) -------------------------------------------------------------
# The pairs of the seed paper (000): Stage 2 trains on STAGE2_PAIRS (train split; dev for early stopping and
# calibration); HELD_OUT_PAIRS are never trained on. SEED_STS_PAIRS is both groups, in the seed's order.
STAGE2_PAIRS = ["en-de", "en-es", "en-fr", "en-it", "en-nl", "fr-de"]
HELD_OUT_PAIRS = ["en-en", "en-pl", "en-pt", "en-ru", "ru-de", "fr-es", "es-zh", "zh-ru", "pt-pl"]
SEED_STS_PAIRS = [
    *(f"en-{x}" for x in ("en", "de", "es", "fr", "it", "nl", "pl", "pt", "ru")),
    *("fr-de", "fr-es", "ru-de", "es-zh", "zh-ru", "pt-pl"),
]
# The 12 cross-lingual pairs the fine-tuning issue reports its average over.
CROSS_12 = ["en-de", "en-es", "en-fr", "en-it", "en-nl", "en-pl", "en-pt", "en-ru", "en-zh", "de-fr", "fr-es", "pt-pl"]
# A backbone's cosine -> 0-5 calibration is fitted on the dev split of these, pooled (see mlse.calibration.backbone).
CALIBRATION_PAIRS = ("en-en", *CROSS_12)
# Fine-tuning's in-training score: STS Multi MT dev of these pairs.
DEV_PAIRS = ["en-de", "en-fr", "en-ru", "en-zh"]
# The baseline tables and the distillation study: the seed's 15 pairs, then the cross-12 pairs not among them.
SEED_AND_CROSS_PAIRS = SEED_STS_PAIRS + [p for p in CROSS_12 if p not in SEED_STS_PAIRS]
# The distillation study's dev score (mlse.experiments.distillation): en-en as well, so a student's English is watched.
STUDY_DEV_PAIRS = ["en-en", *DEV_PAIRS]

# -- Tatoeba-Challenge bitext (training) ------------------------------------------------------------------------------
# The seed's Stage-1 training pairs, as folder names of parallel/tatoeba_challenge_v2021-08-07.
SEED_PARALLEL_PAIRS = [
    *(f"eng-{x}" for x in ("ara", "deu", "spa", "fra", "ita", "nld", "pol", "rus", "tur")),
    *("spa-zho", "fra-spa", "rus-deu", "tur-pol", "ukr-spa", "zho-rus"),
]
# The fine-tuning methods' training pairs: every English-X Tatoeba-Challenge folder (English is the anchor side).
ENGLISH_PAIRS = [f"en-{x}" for x in ("ar", "de", "es", "fr", "it", "nl", "pl", "pt", "ru", "tr", "uk", "zh")]
# The seed's Stage-1 X-Y folders in "a-b" form: a student that sees them aligns X with Y directly, not via English.
NON_ENGLISH_PAIRS = ["de-ru", "fr-es", "ru-zh", "es-zh", "pl-tr", "es-uk"]
# What the app's Fine-tune tab ticks for a fine-tuning method (a quick run; the CLI trains on all ENGLISH_PAIRS).
APP_FINETUNE_PAIRS = ["en-de", "en-fr", "en-ru", "en-zh"]

# -- LASER Tatoeba (evaluation) -----------------------------------------------------------------------------------
# The 14 languages of the Ham & Kim comparison, as Tatoeba codes.
HAM_KIM_14: tuple[str, ...] = (
    "ara",
    "deu",
    "spa",
    "fra",
    "ita",
    "jpn",
    "kor",
    "nld",
    "pol",
    "por",
    "rus",
    "tha",
    "tur",
    "cmn",
)

# -- FLORES-200 (analysis) ----------------------------------------------------------------------------------------
# The language-ID probe of Stage 1: FLORES-200 languages matching the Stage-1 training languages.
PROBE_LANGS = ["eng", "arb", "deu", "spa", "fra", "ita", "nld", "pol", "rus", "tur", "ukr", "zho"]
# What the app's language map projects by default.
DEFAULT_MAP_LANGS = ["eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "arb_Arab", "zho_Hans", "tur_Latn"]


def sts_pair_choices() -> list[str]:
    """Every STS Multi MT pair: the seed paper's first, then the 12 cross-lingual ones, then every other ordered one."""
    rest = [f"{a}-{b}" for a in STS_LANGS for b in STS_LANGS]
    return list(dict.fromkeys([*SEED_STS_PAIRS, *CROSS_12, *rest]))


def training_pair_choices(method: str) -> tuple[list[str], list[str]]:
    """(the pairs a training method may use, the default selection): Stage 1 on the seed's Tatoeba-Challenge pairs,
    Stage 2 on STS Multi MT pairs (the seed's six, then every English-X pair), the fine-tuning methods on the
    English-X Tatoeba-Challenge pairs."""
    if method == "stage1":
        return list(SEED_PARALLEL_PAIRS), list(SEED_PARALLEL_PAIRS)
    if method == "stage2":
        offered = list(dict.fromkeys([*STAGE2_PAIRS, *(f"en-{x}" for x in STS_LANGS if x != "en")]))
        return offered, list(STAGE2_PAIRS)
    return list(ENGLISH_PAIRS), list(APP_FINETUNE_PAIRS)
