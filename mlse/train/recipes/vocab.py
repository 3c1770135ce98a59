"""Vocabulary extension: give an English WordPiece encoder (``minilm-en``) pieces for the languages it is taught.

Its English tokenizer splits other scripts into single letters whose embeddings mean nothing. So: learn a WordPiece
vocabulary of ``vocab_size`` pieces on the new languages' text (BERT normaliser **without accent stripping**); append
the pieces the old vocabulary lacks (old pieces keep their ids and embeddings); initialise each new input embedding:

* ``"aligned"`` (default): the Dice-weighted (``2 c_ij / (df_i + df_j)`` over translation pairs) mean of the ``top_k``
  best English pieces' embeddings, rescaled to their weighted mean norm; a statistical stand-in for WECHSEL's
  dictionaries (Minixhofer et al. 2022).
* ``"subword"``: the mean old embedding of the piece's old tokenisation (Gee et al. 2022); the fallback of
  ``"aligned"`` below ``min_count`` / ``min_dice``. All-``[UNK]`` pieces without evidence: the mean old embedding.

WordPiece (BERT-style) tokenizers only. See docs/training.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlse.errors import MlseError

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class ExtensionReport:
    """What :func:`extend_model_vocabulary` did (JSON-ready through ``vars``)."""

    old_size: int
    new_size: int
    added: int
    init_aligned: int
    init_subword: int
    init_mean: int
    tokens_per_sentence_before: float
    tokens_per_sentence_after: float
    strip_accents: bool


def wordpiece_tokenizer(student):
    """The ``(transformer module, hf tokenizer, vocab dict)`` of a BERT-style student, or a clear error."""
    module = student[0]
    tokenizer = getattr(module, "tokenizer", None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise MlseError("vocabulary extension needs a fast (tokenizers-backed) tokenizer")
    model = json.loads(backend.to_str())["model"]
    if model.get("type") != "WordPiece":
        raise MlseError(
            f"vocabulary extension supports WordPiece (BERT-style) tokenizers only; this student's tokenizer is "
            f"{model.get('type')!r} (a SentencePiece model such as XLM-R is multilingual already)"
        )
    return module, tokenizer, dict(model["vocab"])


def learn_wordpiece(
    texts: Sequence[str], vocab_size: int, *, lowercase: bool = True, strip_accents: bool = False
) -> list[str]:
    """Pieces of a WordPiece vocabulary learned on ``texts`` (BERT normaliser and pre-tokeniser), specials first."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers  # lazy: only tokenising needs it

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.__getitem__)


def merged_vocab(old: dict[str, int], learned: Sequence[str]) -> dict[str, int]:
    """Old pieces at their old ids, then the learned pieces the old vocabulary lacks, in learned order."""
    merged = dict(old)
    for piece in learned:
        merged.setdefault(piece, len(merged))
    return merged


def build_tokenizer(vocab: dict[str, int], old_tokenizer, strip_accents: bool):
    """A ``BertTokenizer`` over ``vocab`` with the old one's casing and length limit."""
    from transformers import BertTokenizer  # lazy: transformers costs seconds to import

    return BertTokenizer(
        vocab=vocab,
        do_lower_case=bool(getattr(old_tokenizer, "do_lower_case", True)),
        strip_accents=strip_accents,
        model_max_length=old_tokenizer.model_max_length,
    )


def _token_ids(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids per text without [CLS] / [SEP], padding or truncation (fast batch encoding)."""
    from tokenizers import Tokenizer  # lazy: only tokenising needs it

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())  # a copy: the model's may pad to max length
    backend.no_padding()
    backend.no_truncation()
    return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]


def _presence(rows: list[list[int]], n_cols: int):
    """Binary document-term matrix ``[n_rows, n_cols]`` (scipy CSR) of which ids occur in each row."""
    from scipy import sparse  # lazy: slow to import; only this computation needs it

    cols = [np.unique(np.asarray(ids, dtype=np.int64)) for ids in rows]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in cols], dtype=np.int64)])
    indices = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    return sparse.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr), shape=(len(rows), n_cols))


def aligned_init(
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    new_ids: np.ndarray,
    old_embeddings: np.ndarray,
    *,
    excluded_old: Sequence[int] = (),
    top_k: int = 5,
    min_count: int = 3,
    min_dice: float = 0.05,
) -> dict[int, np.ndarray]:
    """Embeddings for the new pieces from their Dice association with old pieces over translation pairs.

    ``src_ids[i]`` / ``tgt_ids[i]``: old-tokenizer ids of the English side, new-tokenizer ids of the other side of
    pair ``i``; ``new_ids`` (>= ``len(old_embeddings)``), ``old_embeddings`` ``[V_old, d]``. Returns ``{new_id: [d]}``
    for pieces with enough evidence only.
    """
    n_old, _ = old_embeddings.shape
    n_total = int(max(new_ids.max() + 1, n_old)) if len(new_ids) else n_old
    src = _presence(src_ids, n_old)  # [N, V_old]
    tgt = _presence(tgt_ids, n_total)[:, new_ids]  # [N, n_new]
    if excluded_old:  # specials never count as translations
        keep = np.ones(n_old, dtype=np.float32)
        keep[list(excluded_old)] = 0.0
        src = src.multiply(keep[None, :]).tocsr()
    counts = (tgt.T @ src).tocsr()  # [n_new, V_old] co-occurrence in pairs
    df_new = np.asarray(tgt.sum(axis=0)).ravel()  # [n_new]
    df_old = np.asarray(src.sum(axis=0)).ravel()  # [V_old]
    norms = np.linalg.norm(old_embeddings, axis=1)  # [V_old]
    out: dict[int, np.ndarray] = {}
    for row in range(counts.shape[0]):
        start, end = counts.indptr[row], counts.indptr[row + 1]
        cols, c = counts.indices[start:end], counts.data[start:end]
        ok = c >= min_count
        if not ok.any():
            continue
        cols, c = cols[ok], c[ok]
        dice = 2.0 * c / (df_new[row] + df_old[cols])
        best = np.argsort(-dice)[:top_k]
        cols, dice = cols[best], dice[best]
        if dice[0] < min_dice:
            continue
        w = dice / dice.sum()
        vec = w @ old_embeddings[cols]  # [d]
        target_norm = float(w @ norms[cols])
        norm = float(np.linalg.norm(vec))
        out[int(new_ids[row])] = vec * (target_norm / norm) if norm > 0 else vec
    return out


def subword_init(pieces: Sequence[str], old_tokenizer, old_embeddings: np.ndarray) -> dict[int, np.ndarray]:
    """Mean old embedding of each piece's old tokenisation (``##`` stripped); pieces that are all [UNK] are left out.

    Keys are positions in ``pieces``."""
    words = [p[2:] if p.startswith("##") and len(p) > 2 else p for p in pieces]
    unk = old_tokenizer.unk_token_id
    out: dict[int, np.ndarray] = {}
    for i, ids in enumerate(_token_ids(old_tokenizer, words)):
        ids = [t for t in ids if t != unk]
        if ids:
            out[i] = old_embeddings[ids].mean(axis=0)
    return out


def extend_model_vocabulary(
    student,
    texts: Sequence[str],
    *,
    vocab_size: int = 30000,
    parallel: tuple[Sequence[str], Sequence[str]] | None = None,
    init: str = "aligned",
    strip_accents: bool = False,
) -> ExtensionReport:
    """Extend ``student``'s WordPiece vocabulary in place (tokenizer and input embeddings); see the module docstring.

    ``texts``: the text to learn pieces from (the non-English training side); ``parallel``: ``(english, other)``
    translation pairs for the ``"aligned"`` initialisation (``init="subword"`` needs none)."""
    import torch  # lazy: torch costs seconds to import; only computing needs it

    if init not in ("aligned", "subword"):
        raise MlseError(f"unknown embedding initialisation {init!r}; expected 'aligned' or 'subword'")
    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise MlseError(f"vocab_size must be > {len(SPECIAL_TOKENS)}, got {vocab_size}")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise MlseError("vocabulary extension needs text in the new languages; none was given")
    if init == "aligned" and parallel is None:
        raise MlseError("init='aligned' needs parallel (english, other) sentences")
    module, old_tok, old_vocab = wordpiece_tokenizer(student)
    learned = learn_wordpiece(
        texts, vocab_size, lowercase=bool(getattr(old_tok, "do_lower_case", True)), strip_accents=strip_accents
    )
    vocab = merged_vocab(old_vocab, learned)
    new_tok = build_tokenizer(vocab, old_tok, strip_accents)
    embedding = module.auto_model.get_input_embeddings()
    old_weights = embedding.weight.detach().float().cpu().numpy()  # [V_old_rows, d]; rows may exceed the vocab
    n_old = max(len(old_vocab), old_weights.shape[0])
    added = [p for p in vocab if vocab[p] >= len(old_vocab)]
    # ids of the added pieces in the resized matrix: appended after every existing row
    new_ids = np.arange(n_old, n_old + len(added))
    remap = {vocab[p]: int(new_ids[i]) for i, p in enumerate(added)}

    init_vectors: dict[int, np.ndarray] = {}
    if init == "aligned" and added:
        src_ids = _token_ids(old_tok, parallel[0])
        tgt_ids = [[remap.get(t, t) for t in ids] for ids in _token_ids(new_tok, parallel[1])]
        specials = [old_vocab[s] for s in SPECIAL_TOKENS if s in old_vocab]
        init_vectors = aligned_init(src_ids, tgt_ids, new_ids, old_weights[:n_old], excluded_old=specials)
    n_aligned = len(init_vectors)
    pending = [i for i in range(len(added)) if int(new_ids[i]) not in init_vectors]
    sub = subword_init([added[i] for i in pending], old_tok, old_weights)  # keys: positions in pending
    init_vectors |= {int(new_ids[pending[j]]): vec for j, vec in sub.items()}
    n_subword = len(init_vectors) - n_aligned
    mean_vec = old_weights[:n_old].mean(axis=0)

    sample = texts[:2000]
    before = float(np.mean([len(ids) for ids in _token_ids(old_tok, sample)]))
    after = float(np.mean([len(ids) for ids in _token_ids(new_tok, sample)]))

    # Added pieces' tokenizer ids are len(old_vocab) + k; remap them to rows new_ids (differs if the matrix is padded).
    if n_old != len(old_vocab):
        vocab = {p: remap.get(i, i) for p, i in vocab.items()}
        new_tok = build_tokenizer(vocab, old_tok, strip_accents)
    module.auto_model.resize_token_embeddings(n_old + len(added), mean_resizing=False)  # rows set below
    weight = module.auto_model.get_input_embeddings().weight
    with torch.no_grad():
        for row in new_ids:
            vec = init_vectors.get(int(row), mean_vec)
            weight[int(row)] = torch.as_tensor(vec, dtype=weight.dtype)
    module.processor = new_tok  # sentence-transformers >= 6: ``tokenizer`` is a read-only view of ``processor``
    report = ExtensionReport(
        old_size=len(old_vocab),
        new_size=n_old + len(added),
        added=len(added),
        init_aligned=n_aligned,
        init_subword=n_subword,
        init_mean=len(added) - n_aligned - n_subword,
        tokens_per_sentence_before=round(before, 2),
        tokens_per_sentence_after=round(after, 2),
        strip_accents=strip_accents,
    )
    log.info("vocabulary extended: %s", vars(report))
    return report
