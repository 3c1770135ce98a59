"""A sentence as the app scores it: cleaned, truncated, and its language chosen or detected.

The page's pair, its direct JSON API and the ``/api/score`` route all clean a sentence here (:func:`clean_text`), so
each scores the same text. Detection is offline (:mod:`mlse.text.language_id`).
"""

from __future__ import annotations

from mlse.text.control_chars import strip_controls
from mlse.text.language_id import UNDETERMINED, detect_language, language_choices

MAX_CHARS = 2000  # sentence encoders truncate long inputs anyway (MiniLM: 256 tokens); keep requests small
AUTO = "auto"


# -- input hygiene --------------------------------------------------------------------------------------------------
def clean_text(text: str | None) -> tuple[str, str]:
    """Strip control characters (:mod:`mlse.text.control_chars`'s rule: joiners, variation selectors and other format
    characters that change the text stay) and surrounding space, truncate to MAX_CHARS -> (text, notice or "")."""
    kept, removed = strip_controls(text if isinstance(text, str) else "")
    notices = []
    if removed:
        notices.append(f"removed {removed} control character(s)")
    kept = kept.strip()
    if len(kept) > MAX_CHARS:
        notices.append(f"truncated from {len(kept):,} to {MAX_CHARS:,} characters")
        kept = kept[:MAX_CHARS]
    return kept, "; ".join(notices)


def resolve_language(text: str, override: str | None) -> tuple[str, str]:
    """(code, how it was chosen) for one sentence: the user's override if it is a known code, else detection. The
    "how" quotes an unknown override as given: a page escapes it before showing it."""
    code, confidence = detect_language(text)
    known = {c for _, c in language_choices()}
    if override and override != AUTO:
        if override in known:
            return override, "set by you" + (f"; detector said {code}" if code not in (override, UNDETERMINED) else "")
        return code, f"detected, {confidence:.0%}; unknown language “{str(override)[:40]}” ignored"
    return code, (f"detected, {confidence:.0%}" if code != UNDETERMINED else "could not be detected")
