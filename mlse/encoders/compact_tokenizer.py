"""Token ids of a SentencePiece-Unigram ``tokenizer.json`` through the C++ ``sentencepiece`` library: same ids, ~1/5
of the memory.

Why: the Rust ``tokenizers`` library keeps a Unigram vocabulary in a byte trie with a hash map per node, which for
e5's 250,002 pieces outweighs the rest of the model; ``sentencepiece`` holds them in a double-array trie.

Which tokenizers: exactly the pipeline :func:`mlse.encoders.e5.build_tokenizer` writes (``me5-small`` and its
students); anything else gets ``None`` from :func:`compact_tokenizer` and the caller keeps the Rust tokenizer.

How the ids stay the same (``tests/encoders/test_encoders_compact_tokenizer.py``): ``sentencepiece``'s own normaliser on
the same charsmap, spaces collapsed and one leading space (``Metaspace``'s ``▁``) added in Python, then a model with
an identity normaliser. Each ``<unk>`` is expanded to the length of its run of unknown characters (sentencepiece fuses
a run). Texts holding a special token's literal text, or a combining mark after white space or after a character the
charsmap rewrites (the normalisers group those differently), go to the Rust tokenizer, loaded only when one comes.
The ``sentencepiece`` model is built once per tokenizer file, under ``<cache>/tokenizers/<sha256[:16]>-v<VERSION>/``.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_dir
from mlse.dirs import cache_root
from mlse.encoders.identity import file_sha256_memo
from mlse.encoders.text_cut import tokenizer_chars_per_token

VERSION = 2  # 2: grapheme extenders from newer Unicode tables than Python's (combining_marks)
MODEL_FILE = "unigram.model"  # sentencepiece ModelProto, identity normaliser
NORMALIZER_FILE = "normalizer.spec"  # sentencepiece NormalizerSpec with the charsmap
META_FILE = "compact.json"
_SPACES = re.compile(" {2,}")


def tokenizer_cache_dir(tokenizer_file: Path) -> Path:
    return cache_root() / "tokenizers" / f"{file_sha256_memo(tokenizer_file)[:16]}-v{VERSION}"


def compact_tokenizer(tokenizer_file: str | Path, max_length: int | None = None) -> CompactTokenizer | None:
    """A :class:`CompactTokenizer` for ``tokenizer_file`` when its pipeline is the one supported, else None."""
    tokenizer_file = Path(tokenizer_file)
    folder = tokenizer_cache_dir(tokenizer_file)
    if not (folder / META_FILE).is_file():
        spec = supported_spec(json.loads(tokenizer_file.read_text(encoding="utf-8")))
        if spec is None:
            return None
        with atomic_dir(folder) as tmp:  # only a supported pipeline gets a folder
            write_model(spec, tmp)
    return CompactTokenizer(folder, tokenizer_file, max_length)


def supported_spec(tok: dict) -> dict | None:
    """The parts of a parsed tokenizer.json a compact tokenizer needs, or None when its pipeline differs."""
    model, norm, pre, post = (tok.get(k) or {} for k in ("model", "normalizer", "pre_tokenizer", "post_processor"))
    if model.get("type") != "Unigram" or model.get("byte_fallback") or model.get("unk_id") is None:
        return None
    norms = norm.get("normalizers") or []
    if norm.get("type") != "Sequence" or [n.get("type") for n in norms] != ["Precompiled", "Replace"]:
        return None
    if norms[1].get("pattern") != {"Regex": " {2,}"} or norms[1].get("content") != " ":
        return None
    pres = pre.get("pretokenizers") or []
    if pre.get("type") != "Sequence" or [p.get("type") for p in pres] != ["Metaspace", "Split"]:
        return None
    meta, split = pres
    if meta.get("replacement") != "\u2581" or meta.get("prepend_scheme") != "always" or not meta.get("split"):
        return None
    if split.get("behavior") != "Isolated" or split.get("invert") or "Regex" not in (split.get("pattern") or {}):
        return None
    single = post.get("single") or []
    if post.get("type") != "TemplateProcessing" or len(single) != 3 or "Sequence" not in single[1]:
        return None
    specials = post.get("special_tokens") or {}
    try:
        bos, eos = (specials[single[i]["SpecialToken"]["id"]]["ids"] for i in (0, 2))
    except (KeyError, TypeError):
        return None
    vocab = model.get("vocab") or []
    added = {int(a["id"]): a for a in tok.get("added_tokens") or []}
    if any(i >= len(vocab) or vocab[i][0] != a["content"] or a.get("normalized") for i, a in added.items()):
        return None  # an added token outside the Unigram vocabulary, or one matched after normalisation
    unknown = python_class(split["pattern"]["Regex"])
    if unknown is None:
        return None
    return {
        "vocab": vocab,
        "unk": int(model["unk_id"]),
        "bos": bos,
        "eos": eos,
        "unknown": unknown,
        "charsmap": norms[0]["precompiled_charsmap"],
        "specials": sorted(added),
        "special_texts": sorted(a["content"] for a in added.values()),
    }


def python_class(pattern: str) -> str | None:
    """The Split pattern (Oniguruma, ``[^\\x{21}-\\x{7e}...]``) as a Python regex class, or None when it is another
    kind of pattern."""
    if not re.fullmatch(r"\[\^?(?:\\x\{[0-9a-fA-F]+\}|-)*\]", pattern):
        return None
    return re.sub(r"\\x\{([0-9a-fA-F]+)\}", lambda m: f"\\U{int(m.group(1), 16):08x}", pattern)


def write_model(spec: dict, out: Path) -> None:
    """The sentencepiece model (identity normaliser) and normaliser spec of ``spec`` into ``out``."""
    import base64

    from sentencepiece import sentencepiece_model_pb2 as pb  # lazy: a packaged model's own library

    proto = pb.ModelProto()
    piece_type = pb.ModelProto.SentencePiece
    control = set(spec["specials"]) - {spec["unk"]}
    for i, (piece, score) in enumerate(spec["vocab"]):
        kind = piece_type.UNKNOWN if i == spec["unk"] else piece_type.CONTROL if i in control else piece_type.NORMAL
        proto.pieces.add(piece=piece, score=float(score), type=kind)
    trainer = proto.trainer_spec
    trainer.model_type = pb.TrainerSpec.UNIGRAM
    trainer.vocab_size = len(spec["vocab"])
    trainer.unk_id = spec["unk"]
    trainer.bos_id = trainer.eos_id = trainer.pad_id = -1  # added below, after truncation, as the template does
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = False  # the leading space is added in Python (see the module docstring)
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    (out / MODEL_FILE).write_bytes(proto.SerializeToString())
    normalizer = pb.NormalizerSpec(
        name="precompiled",
        precompiled_charsmap=base64.b64decode(spec["charsmap"]),
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        escape_whitespaces=False,
    )
    (out / NORMALIZER_FILE).write_bytes(normalizer.SerializeToString())
    # A combining mark at the start, after white space or after a character the normaliser changes: the two
    # normalisers group such a pair differently (see CompactTokenizer._needs_exact).
    changed = changed_characters(normalizer.SerializeToString())
    fragile = f"(?:^|[\\s\u2581]|{changed}){character_class(combining_marks())}"
    meta = {
        "supported": True,
        "version": VERSION,
        "bos": spec["bos"],
        "eos": spec["eos"],
        "unk": spec["unk"],
        "special_texts": spec["special_texts"],
        "pieces": len(spec["vocab"]),
        "unknown": spec["unknown"],
        "fragile": fragile,
    }
    (out / META_FILE).write_text(json.dumps(meta, ensure_ascii=False))


class CompactTokenizer:
    """``encode_ids(texts)``: the ids the Rust tokenizer of ``tokenizer_file`` gives, with ``<s> … </s>``, truncated
    to ``max_length`` tokens like ``Tokenizer.enable_truncation(max_length)``."""

    def __init__(self, folder: Path, tokenizer_file: Path, max_length: int | None = None):
        import sentencepiece as spm  # lazy: a packaged model's own library

        meta = json.loads((folder / META_FILE).read_text())
        self.bos, self.eos, self.unk = list(meta["bos"]), list(meta["eos"]), int(meta["unk"])
        self.special_texts = tuple(meta["special_texts"])
        self._unknown_runs = re.compile(f"{meta['unknown']}+")
        self._fragile = re.compile(meta["fragile"])
        self.max_length = max_length
        self.tokenizer_file = tokenizer_file
        self._model = spm.SentencePieceProcessor(model_file=str(folder / MODEL_FILE))
        self._normalizer = spm.SentencePieceNormalizer(normalizer_spec=(folder / NORMALIZER_FILE).read_bytes())
        self._exact = None  # the Rust tokenizer, for the rare texts _needs_exact names (loaded on demand)
        self._lock = threading.Lock()

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        texts = list(texts)
        if not texts:
            return []
        prepared = [_prepare(t) for t in self._normalizer.normalize(texts)]
        rows: list[list[int] | None] = self._model.encode(prepared)
        for i, row in enumerate(rows):
            if self._needs_exact(texts[i]):
                rows[i] = None
            elif self.unk in row:
                rows[i] = self._expand_unknown(prepared[i], row)
        keep = None if self.max_length is None else max(self.max_length - len(self.bos) - len(self.eos), 0)
        out = [None if row is None else self.bos + (row if keep is None else row[:keep]) + self.eos for row in rows]
        exact = [i for i, row in enumerate(out) if row is None]
        for i, ids in zip(exact, self._exact_ids([texts[i] for i in exact])):
            out[i] = ids
        return out

    def chars_per_token(self) -> int:
        """``C`` of :mod:`mlse.encoders.text_cut`: from the longest piece (the pieces are the tokenizer file's)."""
        return tokenizer_chars_per_token(self._model)

    def _needs_exact(self, text: str) -> bool:
        """A special token's literal text (the Rust tokenizer matches it, sentencepiece does not), or a combining mark
        at the start, after white space or after a character the normaliser changes (grouped differently)."""
        special = "<" in text and any(s in text for s in self.special_texts)
        return special or self._fragile.search(text) is not None

    def _expand_unknown(self, text: str, row: list[int]) -> list[int] | None:
        """One ``<unk>`` per unknown character, as the Rust pipeline's isolating split gives: sentencepiece gives one
        per run of them. None (-> the exact tokenizer) if the runs and the ``<unk>`` ids do not pair up."""
        runs = [len(m.group()) for m in self._unknown_runs.finditer(text.replace(" ", "\u2581"))]
        if len(runs) != row.count(self.unk):
            return None
        lengths = iter(runs)
        ids: list[int] = []
        for token in row:
            ids.extend([token] * next(lengths) if token == self.unk else [token])
        return ids

    def _exact_ids(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        with self._lock:
            if self._exact is None:  # only rare texts need it (see _needs_exact)
                self._exact = RustTokenizer(self.tokenizer_file, self.max_length)
        return self._exact.encode_ids(texts)


class RustTokenizer:
    """The ``tokenizers`` tokenizer of a file behind :class:`CompactTokenizer`'s ``encode_ids``, truncated to
    ``max_length`` tokens (None: not truncated)."""

    def __init__(self, path: Path, max_length: int | None):
        from tokenizers import Tokenizer  # lazy: only encoding needs it

        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_padding()  # each batch is padded to its own longest text
        if max_length is None:
            self._tokenizer.no_truncation()
        else:
            self._tokenizer.enable_truncation(max_length)

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tokenizer.encode_batch(texts)]

    def chars_per_token(self) -> int:
        return tokenizer_chars_per_token(self._tokenizer)


@functools.cache
def combining_marks() -> tuple[int, ...]:
    """Every character that extends a grapheme (marks, joiners, emoji modifiers, tags), by the ``regex`` library's
    Unicode tables: Python 3.11's are Unicode 14, and the Rust tokenizer groups marks added since (U+0CF3, U+1AE8)."""
    import regex  # lazy: only building a compact tokenizer needs it (a dependency of transformers as well)

    extends = regex.compile(r"[\p{M}\p{Grapheme_Cluster_Break=Extend}\p{gcb=SpacingMark}\p{gcb=ZWJ}]")
    return tuple(cp for cp in range(sys.maxunicode + 1) if extends.match(chr(cp)))


def changed_characters(normalizer_spec: bytes) -> str:
    """A regex class of the characters the normaliser changes (maps to something else, or deletes)."""
    import sentencepiece as spm  # lazy: a packaged model's own library

    normalizer = spm.SentencePieceNormalizer(normalizer_spec=normalizer_spec)
    changed: list[int] = []
    for start in range(0, sys.maxunicode + 1, 1 << 16):  # in slices: a list of every character costs ~100 MB
        chars = [chr(cp) for cp in range(start, start + (1 << 16)) if not 0xD800 <= cp <= 0xDFFF]
        changed += [ord(c) for c, n in zip(chars, normalizer.normalize(chars)) if n != c]
    return character_class(changed)


def codepoint_ranges(codepoints) -> list[list[int]]:
    """``[first, last]`` of each run of consecutive code points in ``codepoints``, in order."""
    ranges: list[list[int]] = []
    for cp in sorted(set(codepoints)):
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def character_class(codepoints, escape: str = "\\U{:08x}", negated: bool = False) -> str:
    """``[...]`` matching exactly ``codepoints`` (as ranges, so that the class stays short); with ``negated``,
    ``[^...]`` matching every other character. ``escape``: a code point in the regex's syntax (Python's by default)."""
    ranges = codepoint_ranges(codepoints)
    body = "".join(escape.format(a) if a == b else f"{escape.format(a)}-{escape.format(b)}" for a, b in ranges)
    return f"[{'^' if negated else ''}{body}]"


def padded(rows: list[list[int]], pad_id: int, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Token id rows right-padded to ``width`` (default: the longest row): int64 ids and attention mask [b, T]."""
    width = max(map(len, rows)) if width is None else width
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)  # [b, T]
    mask = np.zeros_like(ids)  # [b, T]
    for r, row in enumerate(rows):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    return ids, mask


def _prepare(normalized: str) -> str:
    """Collapse runs of spaces (the pipeline's ``Replace``) and start with one space (``Metaspace``'s ``▁``)."""
    text = _SPACES.sub(" ", normalized)
    return text if not text or text[0] == " " else " " + text
