"""What the Tatoeba tab scores: the LASER Tatoeba languages on disk, and one language or the user's bitext scored with
one model, as a :class:`~mlse.evaluation.runners.TatoebaLanguage` (both embedding sides, the metrics, the errors).

Scored as ``python -m mlse eval --task tatoeba`` does; memoised, so retrieval, details and compare share it.
"""

from __future__ import annotations

from mlse.data.tatoeba import tatoeba_languages
from mlse.data.types import ParallelCorpus
from mlse.errors import MlseError
from mlse.evaluation.bitext_view import score_bitext
from mlse.evaluation.runners import TatoebaLanguage, tatoeba_language
from mlse.memo import MB, BytesMemo
from mlse.serving.procmem import releases_memory

MARGIN_K = 4  # neighbourhood size of the ratio margin, as in run_tatoeba
# (model identity, language or bitext content, k) -> TatoebaLanguage: two embedding matrices each, so bounded by bytes
_memo = BytesMemo("tatoeba_tab.views", 128 * MB)


def languages(state) -> list[str]:
    """The LASER Tatoeba languages found in the data directory ([] when it is missing)."""
    try:
        return tatoeba_languages(state.data_dir)
    except MlseError:
        return []


def tatoeba_view(state, lang: str, model: str) -> TatoebaLanguage:
    """One language scored with one model (through the embedding cache); memoised per model identity and data file."""
    if not (lang or "").strip():
        raise MlseError("Choose a Tatoeba language.")
    if not (model or "").strip():
        raise MlseError("Choose a model.")
    encoder = state.encoder(model)  # ModelNotFoundError for an unknown model
    return tatoeba_language(encoder, lang, data_dir=state.data_dir, k=MARGIN_K, memo=_memo)


@releases_memory
def source_view(state, source, model: str) -> TatoebaLanguage:
    """A Tatoeba language (its code) or a user's bitext (a ParallelCorpus) scored with one model, memoised."""
    if not isinstance(source, ParallelCorpus):
        return tatoeba_view(state, source, model)
    if not (model or "").strip():
        raise MlseError("Choose a model.")
    return score_bitext(state.encoder(model), source, k=MARGIN_K, memo=_memo)
