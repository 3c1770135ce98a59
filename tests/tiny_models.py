"""Tiny sentence encoders built inside the test session: no hub, no downloads, seconds to build.

Each is a real transformers model (2 layers, hidden 32) with a tokenizer trained on a few hundred real sentences, saved
in the sentence-transformers folder format, so tests go through exactly the loader users go through:
- a BERT with a WordPiece tokenizer, mean pooling (MiniLM-like);
- a BERT with CLS pooling + Dense + Normalize (LaBSE-like);
- an XLM-RoBERTa with a SentencePiece (unigram) tokenizer, mean pooling (paraphrase-xlm-r-like).
"""

from __future__ import annotations

from pathlib import Path

from mlse.data import load_flores

LANGS = ["eng", "deu", "fra", "rus", "zho"]


def training_sentences(data_dir: Path, per_lang: int = 80) -> list[str]:
    flores = load_flores(LANGS, data_dir)
    return [s for sents in flores.values() for s in sents[:per_lang]]


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
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=2000, special_tokens=specials)
    tok.train_from_iterator(training_sentences(data_dir), trainer)
    fast = BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
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
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(
        training_sentences(data_dir),
        vocab_size=3000,
        show_progress=False,
        unk_token="<unk>",
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    fast = XLMRobertaTokenizerFast(
        tokenizer_object=sp._tokenizer,
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
