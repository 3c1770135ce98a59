"""Which invisible characters user text may keep: the rule the app applies before scoring or showing text.

**Removed**: control characters (Cc) but tab and newline (meaningless in a sentence, can drive terminals); lone
surrogates (Cs: not UTF-8); bidirectional embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069),
which can make shown text differ from processed text ("Trojan Source"). **Kept**: every other format character (Cf)
and mark, since they change the text itself (ZWJ / ZWNJ, variation selectors, U+200E/U+200F, U+200B, soft hyphens).
"""

from __future__ import annotations

import unicodedata

KEEP_CONTROLS = frozenset("\t\n")
BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def is_removed(ch: str) -> bool:
    """Whether the text rule above drops this character."""
    return ch not in KEEP_CONTROLS and (ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs"))


def strip_controls(text: str) -> tuple[str, int]:
    """(text without the removed characters, how many were removed); ``\\r\\n`` and ``\\r`` become ``\\n`` first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    kept = "".join(ch for ch in text if not is_removed(ch))
    return kept, len(text) - len(kept)
