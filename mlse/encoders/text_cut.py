"""Texts cut to what a model can read, before tokenising: a 50 MB field costs what its first words cost.

A tokenizer truncates only after segmenting the whole text, so every encode path passes its texts through
:func:`cut_texts` first: a text then costs at most ``max_tokens * C`` characters of tokenising (docs/cli.md, "Long
texts"). ``max_tokens`` is the model's ``max_seq_length``, special tokens included.

Why the cut changes nothing the model reads, for ordinary text: :func:`cut_text` keeps a text up to the end of its
``max_tokens``-th *word* (a run of characters other than space, tab, LF and CR that holds a letter or a digit) and at
most ``max_tokens * C`` characters.

1. Every tokenizer here splits at those four characters before segmenting, and no piece spans one, so the tokens of a
   text's first words are its first tokens, whatever follows them.
2. A word holding a letter or a digit gives at least one token (normalisation deletes none; an unknown one becomes
   ``<unk>``), so the first ``max_tokens`` words hold every token the model keeps. Words of punctuation or control
   characters alone are kept but not counted.
3. ``C = max(2 L, W + 1)`` (:func:`chars_per_token`): ``L`` the tokenizer's longest piece in characters, ``W``
   WordPiece's ``max_input_chars_per_word`` (0 for other models). Only a text of very long words (CJK or Thai without
   spaces, a URL, base64) meets the character bound; it is cut inside a word, keeping at least ``C`` characters of
   that word. WordPiece reads a word over ``W`` characters as one ``[UNK]``, whole or cut. That SentencePiece's
   segmentation of a long word's start does not depend on characters ``max_tokens * L`` further on is an observation
   rather than a proof, which tests/encoders/test_encoders_text_cut.py checks with the packaged models.

A text made to defeat this (thousands of control-character "words", 300-character WordPiece words) can read
differently once cut; its cost stays bounded. The embedding cache keys on the whole text
(:func:`mlse.encoders.cache.text_key`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

SEPARATORS = " \t\n\r"  # what every tokenizer here splits at (rule 1 of the module docstring)
_WORD = re.compile(r"[^ \t\n\r]+")
_SEPARATOR = re.compile(r"[ \t\n\r]")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
# Models with no bound of their own: longer than any encoder here reads (a cut there would change vectors).
MAX_CUT_TOKENS = 1 << 20


def chars_per_token(longest_piece: int, word_limit: int = 0) -> int:
    """``C`` of the module docstring: ``max(2 * longest_piece, word_limit + 1)`` (at least 2)."""
    return max(2 * int(longest_piece), int(word_limit) + 1 if word_limit else 0, 2)


def cut_text(text: str, max_tokens: int, chars: int) -> str:
    """``text`` up to the end of its ``max_tokens``-th word and at most ``max_tokens * chars`` characters (cut inside a
    word, at least ``chars`` characters of that word are kept); the module docstring says why it reads the same."""
    if len(text) < 2 * max_tokens:  # fewer than max_tokens + 1 words, and within max_tokens * chars characters
        return text
    limit = max_tokens * chars
    counted = 0
    for word in _WORD.finditer(text, 0, limit):
        if _LETTER_OR_DIGIT.search(text, word.start(), word.end()) is None:
            continue
        counted += 1
        if counted == max_tokens:
            if word.end() < limit or word.end() == len(text) or text[word.end()] in SEPARATORS:
                return text[: word.end()]  # a whole word: exact (rules 1-2)
            break  # the word runs past the character bound
    if len(text) <= limit:
        return text
    cut = limit
    if text[cut - 1] not in SEPARATORS and text[cut] not in SEPARATORS:  # inside a word: keep `chars` of it
        start = max(text.rfind(s, 0, cut) for s in SEPARATORS) + 1
        stop = start + chars
        if stop > cut:
            end = _SEPARATOR.search(text, cut, stop)
            cut = end.start() if end is not None else min(stop, len(text))
    return text[:cut]


def cut_texts(texts: Sequence[str], max_tokens: int | None, chars: int | Callable[[], int]) -> list[str]:
    """:func:`cut_text` on each text. ``max_tokens``: what the model reads (None, or over :data:`MAX_CUT_TOKENS`: no
    cut). ``chars``: ``C``, or a function giving it, called only when some text is long enough to need it."""
    texts = list(texts)
    if not max_tokens or not 0 < max_tokens <= MAX_CUT_TOKENS or all(len(t) < 2 * max_tokens for t in texts):
        return texts
    c = chars() if callable(chars) else chars
    return [cut_text(t, max_tokens, c) for t in texts]


def cut_groups(texts: Sequence[str], cut: Sequence[str]) -> list[list[int]]:
    """Positions of the texts kept whole, then of those the cut shortened (empty groups left out). A shortened text
    fills the model's whole input; a padding runtime encodes the groups apart, so no short text is padded to it."""
    whole = [i for i, (a, b) in enumerate(zip(texts, cut)) if len(a) == len(b)]
    shortened = [i for i, (a, b) in enumerate(zip(texts, cut)) if len(a) != len(b)]
    return [g for g in (whole, shortened) if g] or [whole]


def tokenizer_chars_per_token(tokenizer) -> int:
    """``C`` for a tokenizer: a ``tokenizers.Tokenizer``, a transformers tokenizer (fast or slow), a ``sentencepiece``
    processor, or anything with a ``chars_per_token()`` method (the compact tokenizer)."""
    own = getattr(tokenizer, "chars_per_token", None)
    if callable(own):
        return int(own())
    backend = getattr(tokenizer, "backend_tokenizer", None) or tokenizer  # transformers' fast tokenizer wraps one
    if hasattr(backend, "id_to_piece") and hasattr(backend, "get_piece_size"):  # sentencepiece
        return chars_per_token(max(map(len, backend.id_to_piece(list(range(backend.get_piece_size())))), default=1))
    word_limit = getattr(getattr(backend, "model", None), "max_input_chars_per_word", None)
    if word_limit is None:  # a slow BERT tokenizer
        word_limit = getattr(getattr(tokenizer, "wordpiece_tokenizer", None), "max_input_chars_per_word", 0)
    return chars_per_token(max(map(len, backend.get_vocab()), default=1), int(word_limit or 0))


def model_max_tokens(st) -> int | None:
    """The tokens a sentence-transformers model reads (``max_seq_length``), or None when it names no bound."""
    value = getattr(st, "max_seq_length", None)
    return int(value) if isinstance(value, int) and 0 < value <= MAX_CUT_TOKENS else None
