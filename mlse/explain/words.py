"""Word pieces -> the words a reader sees, so that a token x token matrix can be shown word x word.

The rule (for WordPiece, SentencePiece and byte-level BPE tokenizers):

1. **Find each piece in the text**, marker (``▁``, ``Ġ``, ``##``) dropped, both sides folded (compatibility
   decomposition, accents dropped, case folded: ``flote`` is found in ``Flöte``). An unknown piece takes the text
   between its neighbours; a piece with no text of its own is glued to the next.
2. **Pieces of one run of non-space characters form one word**, except punctuation at the run's start or end
   (``flute.`` -> ``flute`` and ``.``; ``don't`` stays one) and pieces of scripts written without spaces (each a word).
3. **Special tokens and the prefix stay apart**: entries of their own (the prefix's pieces as one), flagged ``special``.

Labels are the user's own text; a word's attribution is the *sum* of its pieces'. A piece not found makes the sentence
fall back to the markers alone (:func:`_merge_by_markers`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import groupby

_MARKERS = ("\u2581", "\u0120")  # SentencePiece "▁", byte-level BPE "Ġ": a piece that starts a word
_CONTINUATION = "##"  # WordPiece: a piece that continues the word before
_UNKNOWN = {"[unk]", "<unk>"}
_UNIT = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff]|[^\s\u2e80-\u9fff\uf900-\ufaff]+")  # a CJK character or a word
# Scripts written without spaces between words: each piece is a word of its own.
_NO_SPACE_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3000, 0x30FF),  # CJK symbols and punctuation, Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # half- and full-width forms
    (0x20000, 0x3134F),  # CJK extensions B-G
)


@dataclass(frozen=True)
class TokenInfo:
    """What a model read for one sentence: ``text`` (its prefix, then the sentence), the token ``ids`` and their
    ``pieces``, which are ``special`` (added by the tokenizer), and ``prefix_chars`` (the prefix's length)."""

    text: str
    ids: tuple[int, ...]
    pieces: tuple[str, ...]
    special: tuple[bool, ...]
    prefix_chars: int = 0


@dataclass(frozen=True)
class Words:
    """The words of a sentence: ``labels`` (one per entry), which entries are ``special`` (a special token or the
    prefix), ``word_of_token`` and ``spans`` (``(start, end)`` in the sentence; None if special or in the fallback)."""

    labels: tuple[str, ...]
    special: tuple[bool, ...]
    word_of_token: tuple[int, ...]
    spans: tuple[tuple[int, int] | None, ...] = ()
    truncated: bool = False  # the text goes on after the last token (the model cut it at its maximum length)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _clean(piece: str) -> str:
    if piece.startswith(_CONTINUATION) and len(piece) > len(_CONTINUATION):
        return piece[len(_CONTINUATION) :]
    return piece.lstrip("".join(_MARKERS))


def _no_space_script(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _NO_SPACE_RANGES)


def _is_punctuation(text: str) -> bool:
    return bool(text) and all(unicodedata.category(c)[0] in "PS" for c in text)


def piece_spans(text: str, pieces: list[str], skip: list[bool]) -> list[tuple[int, int] | None] | None:
    """Where each piece lies in ``text`` as ``(start, end)`` character offsets; None for skipped pieces and for a
    piece with no text of its own. Returns None when a piece cannot be found."""
    # each folded character and the index of the text character it came from
    folded = [(f, i) for i, ch in enumerate(text) for f in _fold(ch)]
    flat, origin = "".join(f for f, _ in folded), [i for _, i in folded]
    spans: list[tuple[int, int] | None] = [None] * len(pieces)
    unknown: list[int] = []
    pending = False  # an unknown piece since the last piece found: it may cover text to skip over
    cursor = 0
    for t, piece in enumerate(pieces):
        if skip[t]:
            continue
        target = _fold(_clean(piece))
        if not target.strip():
            continue
        if target in _UNKNOWN:
            unknown.append(t)
            pending = True
            continue
        while cursor < len(flat) and flat[cursor].isspace():
            cursor += 1
        if flat.startswith(target, cursor):
            at = cursor
        elif pending and (at := flat.find(target, cursor)) >= 0:
            pass  # the unknown piece before this one covers the text skipped over
        else:
            return None
        spans[t] = (origin[at], origin[at + len(target) - 1] + 1)
        cursor, pending = at + len(target), False
    runs = groupby(enumerate(unknown), key=lambda it: it[1] - it[0])  # runs of consecutive unknown pieces
    # each run takes the text between the neighbours found, one unit (a word, a CJK character) per piece
    for group in ([t for _, t in run] for _, run in runs):
        before = max((s[1] for s in spans[: group[0]] if s is not None), default=0)
        after = min((s[0] for s in spans[group[-1] + 1 :] if s is not None), default=len(text))
        units = [(m.start() + before, m.end() + before) for m in _UNIT.finditer(text[before:after])]
        if len(units) == len(group):
            spans[group[0] : group[-1] + 1] = units
        elif units:  # the first piece takes the whole gap; the others are glued to it
            spans[group[0]] = (units[0][0], units[-1][1])
    return spans


def merge_words(tokens: TokenInfo) -> Words:
    """Group ``tokens`` into the words a reader sees (the rule in the module docstring)."""
    n = len(tokens.pieces)
    spans = piece_spans(tokens.text, list(tokens.pieces), list(tokens.special))
    if spans is None:
        return _merge_by_markers(tokens)
    prefix = tokens.text[: tokens.prefix_chars]
    prefix_token = [s is not None and s[0] < tokens.prefix_chars for s in spans]
    entries: list[tuple[str, bool, tuple[int, int] | None]] = []  # (label, special, span) of each word
    word_of_token = [-1] * n
    current: list[int] = []  # tokens of the word being built (all with spans)
    glue: list[int] = []  # tokens without text, waiting for the next word

    def close() -> None:
        if current:
            start, end = spans[current[0]][0], spans[current[-1]][1]
            entries.append((tokens.text[start:end], False, (start - tokens.prefix_chars, end - tokens.prefix_chars)))
            for t in [*glue, *current]:
                word_of_token[t] = len(entries) - 1
            glue.clear()
            current.clear()

    prefix_entry = -1
    for t in range(n):
        if tokens.special[t]:
            close()
            entries.append((tokens.pieces[t], True, None))
            word_of_token[t] = len(entries) - 1
            continue
        if prefix_token[t]:
            if prefix_entry < 0:
                entries.append((prefix.strip() or prefix, True, None))
                prefix_entry = len(entries) - 1
            word_of_token[t] = prefix_entry
            continue
        if spans[t] is None:
            glue.append(t)
            continue
        if current and _starts_word(tokens.text, spans, current, t):
            close()
        current.append(t)
    close()
    for t in glue:  # trailing tokens without text join the last word
        word_of_token[t] = max(len(entries) - 1, 0)
    if not entries:
        entries = [("", False, None)]
        word_of_token = [0] * n
    labels, special, word_spans = zip(*entries)
    last = max((s[1] for s in spans if s is not None), default=len(tokens.text))
    truncated = bool(tokens.text[last:].strip())
    return Words(labels, special, tuple(word_of_token), word_spans, truncated)


def _starts_word(text: str, spans: list, current: list[int], t: int) -> bool:
    """Whether token ``t`` starts a new word after the tokens ``current`` (rule 2 of the module docstring)."""
    prev_end = spans[current[-1]][1]
    start, end = spans[t]
    if any(c.isspace() for c in text[prev_end:start]):
        return True
    piece_text = text[start:end]
    word_text = text[spans[current[0]][0] : prev_end]
    if _no_space_script(piece_text[0]) or _no_space_script(word_text[-1]):
        return True
    if _is_punctuation(word_text):
        return not _is_punctuation(piece_text)  # leading punctuation stands alone; a run of it stays together
    if _is_punctuation(piece_text):
        rest = text[end:]
        run_rest = rest[: next((i for i, c in enumerate(rest) if c.isspace()), len(rest))]
        return all(_is_punctuation(c) for c in run_rest)  # trailing punctuation stands alone, inner stays
    return False


def _merge_by_markers(tokens: TokenInfo) -> Words:
    """The fallback rule: ``##`` continues the word before, ``▁``/``Ġ`` starts one (in a sentence that uses them, a
    piece without one continues), every other piece starts a word; labels are the pieces' text."""
    sentencepiece = any(p.startswith(_MARKERS) for p, s in zip(tokens.pieces, tokens.special) if not s)
    labels: list[str] = []
    special: list[bool] = []
    word_of_token: list[int] = []
    open_word = False
    for piece, is_special in zip(tokens.pieces, tokens.special):
        continues = piece.startswith(_CONTINUATION) or (sentencepiece and not piece.startswith(_MARKERS))
        if is_special:
            labels.append(piece)
            special.append(True)
            open_word = False
        elif continues and open_word:
            labels[-1] += _clean(piece)
        else:
            labels.append(_clean(piece))
            special.append(False)
            open_word = True
        word_of_token.append(len(labels) - 1)
    return Words(tuple(labels), tuple(special), tuple(word_of_token), (None,) * len(labels))
