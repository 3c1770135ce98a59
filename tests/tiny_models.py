"""Tiny sentence encoders built inside the test session: no hub, no downloads, seconds to build, and the same in
every process.

Each is a real transformers model (2 layers, hidden 32) with a tokenizer made from a few hundred real sentences, saved
in the sentence-transformers folder format, so tests go through exactly the loader users go through:
- a BERT with a WordPiece tokenizer, mean pooling (MiniLM-like);
- a BERT with CLS pooling + Dense + Normalize (LaBSE-like);
- an XLM-RoBERTa with a SentencePiece-style (unigram) tokenizer, mean pooling (paraphrase-xlm-r-like).

The vocabularies are made here by rule, not by the ``tokenizers`` trainers: those count in hash maps whose order
changes with every process, so equal counts fell differently and each process got another vocabulary (62 of 2,000
WordPiece entries and every unigram score's last bits differed between three runs). :func:`wordpiece_vocabulary`
merges the most frequent pair as the WordPiece trainer does, ties broken by the pair's text; :func:`unigram_vocabulary`
scores frequent substrings by their log frequency, ties broken by the piece's text. The weights follow a fixed seed,
so a tiny model's files are the same bytes in every process (``tests/project/test_tiny_models.py``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from pathlib import Path

from mlse.data import load_flores

LANGS = ["eng", "deu", "fra", "rus", "zho"]
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
XLMR_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
BERT_VOCAB = 2000
XLMR_VOCAB = 3000
SPACE = "\u2581"  # SentencePiece's word-start mark
MAX_PIECE = 8  # longest unigram piece (characters, the word-start mark included)


def training_sentences(data_dir: Path, per_lang: int = 80) -> list[str]:
    flores = load_flores(LANGS, data_dir)
    return [s for sents in flores.values() for s in sents[:per_lang]]


def bert_words(sentences: list[str]) -> Counter[str]:
    """Word counts after BERT's lowercasing normaliser and pre-tokenizer (what WordPiece sees)."""
    from tokenizers import normalizers, pre_tokenizers

    norm, split = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    return Counter(w for s in sentences for w, _ in split.pre_tokenize_str(norm.normalize_str(s)))


def wordpiece_vocabulary(sentences: list[str], size: int = BERT_VOCAB) -> list[str]:
    """The specials, every character (word-initial and ``##`` continuing), then merges of the most frequent adjacent
    pair of pieces until ``size`` entries; among equally frequent pairs the alphabetically first is merged."""
    words = bert_words(sentences)
    pieces = {w: [w[0], *(f"##{c}" for c in w[1:])] for w in sorted(words)}
    vocab = [*BERT_SPECIALS, *sorted({p for ps in pieces.values() for p in ps})]
    counts: Counter[tuple[str, str]] = Counter()
    holders: dict[tuple[str, str], set[str]] = {}
    for w, ps in pieces.items():
        for pair in zip(ps, ps[1:]):
            counts[pair] += words[w]
            holders.setdefault(pair, set()).add(w)
    heap = [(-n, pair) for pair, n in counts.items()]
    heapq.heapify(heap)
    known = set(vocab)
    while len(vocab) < size and heap:
        n, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -n or n == 0:
            continue  # a stale entry: the pair's count changed since it was pushed
        merged = pair[0] + pair[1].removeprefix("##")
        if merged not in known:
            vocab.append(merged)
            known.add(merged)
        changed: set[tuple[str, str]] = set()
        for w in sorted(holders.pop(pair, ())):
            old = pieces[w]
            for p in zip(old, old[1:]):
                counts[p] -= words[w]
                changed.add(p)
            new, i = [], 0
            while i < len(old):
                if i + 1 < len(old) and (old[i], old[i + 1]) == pair:
                    new.append(merged)
                    i += 2
                else:
                    new.append(old[i])
                    i += 1
            pieces[w] = new
            for p in zip(new, new[1:]):
                counts[p] += words[w]
                holders.setdefault(p, set()).add(w)
                changed.add(p)
        counts.pop(pair, None)
        for p in changed - {pair}:
            heapq.heappush(heap, (-counts[p], p))
    return vocab


def unigram_vocabulary(sentences: list[str], size: int = XLMR_VOCAB) -> list[tuple[str, float]]:
    """(piece, score) pairs: the specials (score 0), every character, then the substrings of ``▁``-prefixed words
    (2 to :data:`MAX_PIECE` characters) that cover the most text (count x length); each scored by its log frequency,
    rounded to 6 decimals. Ties go to the alphabetically first piece."""
    words = Counter(SPACE + w for s in sentences for w in s.split())
    counts: Counter[str] = Counter()
    for w, n in words.items():
        for i in range(len(w)):
            for j in range(i + 1, min(len(w), i + MAX_PIECE) + 1):
                counts[w[i:j]] += n
    chars = sorted(p for p in counts if len(p) == 1)
    longer = sorted((p for p in counts if len(p) > 1), key=lambda p: (-counts[p] * len(p), p))
    chosen = chars + longer[: size - len(XLMR_SPECIALS) - len(chars)]
    total = sum(counts[p] for p in chosen)
    return [(s, 0.0) for s in XLMR_SPECIALS] + [(p, round(math.log(counts[p] / total), 6)) for p in chosen]


def _save_sentence_transformer(hf_dir: Path, out: Path, pooling: str, dense_out: int | None = None) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    torch.manual_seed(0)
    word = Transformer(str(hf_dir), max_seq_length=64)
    modules = [word, Pooling(word.get_embedding_dimension(), pooling)]
    if dense_out:
        modules += [Dense(word.get_embedding_dimension(), dense_out, activation_function=torch.nn.Tanh()), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    return out


def build_tiny_bert(data_dir: Path, out: Path, *, labse_like: bool = False) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = wordpiece_vocabulary(training_sentences(data_dir))
    # the vocabulary as a dict: transformers 5 ignores a ``vocab_file`` argument and builds a 5-entry vocabulary
    fast = BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=True)
    assert len(fast) == len(vocab), f"{len(fast)} tokens from a {len(vocab)}-entry vocabulary"
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    hf_dir = out.parent / f"{out.name}-hf"
    BertModel(config).save_pretrained(hf_dir)
    fast.save_pretrained(hf_dir)
    if labse_like:
        return _save_sentence_transformer(hf_dir, out, "cls", dense_out=24)
    return _save_sentence_transformer(hf_dir, out, "mean")


def build_tiny_xlmr(data_dir: Path, out: Path) -> Path:
    import torch
    from tokenizers import SentencePieceUnigramTokenizer, Tokenizer, models
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    sp = SentencePieceUnigramTokenizer()  # its normaliser, pre-tokenizer and decoder, around a rule-made model
    vocab = unigram_vocabulary(training_sentences(data_dir))
    tok = Tokenizer(models.Unigram(vocab, unk_id=XLMR_SPECIALS.index("<unk>"), byte_fallback=False))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = sp.normalizer, sp.pre_tokenizer, sp.decoder
    fast = XLMRobertaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
    )
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    hf_dir = out.parent / f"{out.name}-hf"
    XLMRobertaModel(config).save_pretrained(hf_dir)
    fast.save_pretrained(hf_dir)
    return _save_sentence_transformer(hf_dir, out, "mean")


def install_in_hf_cache(model_dir: Path, cache: Path, repo_id: str, revision: str = "0" * 40) -> Path:
    """Lay ``model_dir`` out as the Hugging Face hub cache does (refs/main -> snapshots/<rev>/...)."""
    import shutil

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    shutil.copytree(model_dir, snapshot, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot
