"""A sentence as the Score tab takes it in: cleaned and truncated, and its language detected or chosen.

The page's pair, its direct JSON API and ``/api/score`` all clean a sentence with :mod:`mlse.text.sentences`, so each
scores the same text. Detection is offline (:mod:`mlse.text.language_id`).
"""

from __future__ import annotations

import threading

from mlse.text.language_id import UNDETERMINED, detect_language, detector_name, language_choices, language_name
from mlse.text.sentences import AUTO, clean_text


def language_options() -> list[tuple[str, str]]:
    """Choices for the language pickers: auto-detect first, then the project's languages, then the others."""
    return [("auto-detect", AUTO), *language_choices()]


def detect_handler(text: str | None) -> str:
    """Live label under a sentence box: the detected language and how sure the detector is."""
    cleaned, _ = clean_text(text)
    if not cleaned:
        return ""
    code, confidence = detect_language(cleaned)
    if code == UNDETERMINED:
        return "Detected language: undetermined"
    return f"Detected language: **{language_name(code)}** (`{code}`, {confidence:.0%})"


def detect_api(text: str) -> tuple[str, float]:
    """The API's language detector: (ISO 639-1-ish code or "und", confidence) for one text."""
    return detect_language(clean_text(text)[0])


def warm_up_detector() -> threading.Thread:
    """Load the language detector now, in the background: unpacking langid's model briefly takes ~100 MB more than it
    keeps, which at start-up does not add to the app's peak memory, and the first request does not wait for it."""
    thread = threading.Thread(target=detector_name, name="mlse-langid-warm-up", daemon=True)
    thread.start()
    return thread
