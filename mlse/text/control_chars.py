"""Which invisible characters user text may keep: the rule the app applies before scoring or showing text.

The choice, and why:

* **Removed**: control characters (Unicode category Cc: NUL, ESC, DEL, C1 controls...) except tab and newline; they
  carry no meaning in a sentence and can drive terminals or break displays. Also lone surrogates (Cs), which are not
  text and cannot be encoded as UTF-8, and the bidirectional *embedding, override and isolate* controls
  (U+202A-U+202E, U+2066-U+2069): they only change how text is displayed, and are the known way to make shown text
  differ from the text that is processed ("Trojan Source").
* **Kept**: every other format character (Cf) and mark, because they change the text itself: U+200D ZERO WIDTH
  JOINER (emoji sequences, Indic conjuncts), U+200C ZERO WIDTH NON-JOINER (Persian, Hindi, German typography),
  variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF (emoji vs text presentation, CJK ideograph variants),
  U+200E/U+200F directional marks (punctuation placement in right-to-left text), U+200B ZERO WIDTH SPACE (word
  boundaries in Thai, Khmer, Burmese), soft hyphens and the emoji tag characters.
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
