"""A sentence as the Score tab takes it in: cleaned and truncated, and its language detected or chosen.

The page's pair, its direct JSON API and the ``/api/score`` route (:mod:`mlse.serving.api_route`) all clean a
sentence here, so each scores the same text; the language pickers, the live "Detected language" label and the
detector's warm-up at start live here too. Detection is offline (:mod:`mlse.text.language_id`).
"""

from __future__ import annotations

import threading

from mlse.text.control_chars import strip_controls
from mlse.text.language_id import UNDETERMINED, detect_language, detector_name, language_choices, language_name
from mlse.ui.text import md_escape

MAX_CHARS = 2000  # sentence encoders truncate long inputs anyway (MiniLM: 256 tokens); keep requests small
AUTO = "auto"


# -- input hygiene --------------------------------------------------------------------------------------------------
def clean_text(text: str | None) -> tuple[str, str]:
    """Strip control characters and surrounding space, truncate to MAX_CHARS -> (text, notice or "").

    Which characters go is :mod:`mlse.text.control_chars`'s rule: real controls and bidi overrides; joiners (U+200C,
    U+200D), variation selectors and other meaningful format characters stay: removing them changes the text scored.
    """
    raw = text if isinstance(text, str) else ""
    kept, removed = strip_controls(raw)
    notices = []
    if removed:
        notices.append(f"removed {removed} control character(s)")
    kept = kept.strip()
    if len(kept) > MAX_CHARS:
        notices.append(f"truncated from {len(kept):,} to {MAX_CHARS:,} characters")
        kept = kept[:MAX_CHARS]
    return kept, "; ".join(notices)


# -- languages ------------------------------------------------------------------------------------------------------
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


def resolve_language(text: str, override: str | None) -> tuple[str, str]:
    """(code, how it was chosen) for one sentence: the user's override if it is a known code, else detection."""
    code, confidence = detect_language(text)
    known = {c for _, c in language_choices()}
    if override and override != AUTO:
        if override in known:
            how = "set by you" + (f"; detector said {code}" if code not in (override, UNDETERMINED) else "")
            return override, how
        return code, f"detected, {confidence:.0%}; unknown language “{md_escape(str(override))}” ignored"
    return code, (f"detected, {confidence:.0%}" if code != UNDETERMINED else "could not be detected")


def warm_up_detector() -> threading.Thread:
    """Load the language detector now, in the background: unpacking langid's model briefly takes ~100 MB more than it
    keeps, which at start-up (before any model is loaded) does not add to the app's peak memory, and the first
    request does not wait ~1 s for it."""
    thread = threading.Thread(target=detector_name, name="mlse-langid-warm-up", daemon=True)
    thread.start()
    return thread
