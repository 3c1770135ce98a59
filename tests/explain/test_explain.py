"""Token-pair attributions (mlse.explain): exact on a model whose attribution is known in closed form, converging on a
real (tiny) transformer, the identity score = pairs + reference terms + residual, and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.explain import align_tokens, explain_pair
from mlse.explain.integrate import quadrature
from mlse.explain.words import TokenInfo

S1, S2 = "A man is playing a flute.", "Ein Mann spielt Flöte."


class BagOfEmbeddings:
    """f(x) = mean of the token embeddings, no normalisation: linear, so the attribution is known exactly,
    A_ij = (a_i - r_i)·(b_j - r_j) / (n_a n_b), and every quadrature is exact (residual 0 for any steps)."""

    name = "bag"
    n_layers = 0

    def __init__(self, dim: int = 6):
        self.rng = np.random.default_rng(0)
        self.table: dict[str, np.ndarray] = {}
        self.pad = self.rng.normal(size=dim).astype(np.float32)
        self.dim = dim

    def vector(self, word: str) -> np.ndarray:
        if word not in self.table:
            self.table[word] = self.rng.normal(size=self.dim).astype(np.float32)
        return self.table[word]

    def tokenize(self, text: str) -> TokenInfo:
        words = text.split()
        return TokenInfo(text, tuple(range(len(words))), tuple(words), (False,) * len(words))

    def states(self, tokens, layer):
        import torch

        x = torch.tensor(np.stack([self.vector(w) for w in tokens.pieces]))  # [T, D]
        return x, torch.tensor(np.tile(self.pad, (len(tokens.pieces), 1)))

    def tail(self, z, layer):
        return z.mean(dim=-2)

    def contextual(self, tokens):
        return self.states(tokens, 0)[0]


@pytest.mark.parametrize("steps, rule", [(1, "midpoint"), (3, "gauss"), (7, "midpoint")])
def test_linear_encoder_gets_its_exact_attribution_and_no_residual(steps, rule):
    bag = BagOfEmbeddings()
    a_words, b_words = "red apples fall down".split(), "rote Äpfel fallen".split()
    e = explain_pair(bag, " ".join(a_words), " ".join(b_words), steps=steps, rule=rule, layer=0)
    a = np.stack([bag.vector(w) for w in a_words]) - bag.pad  # [4, D]
    b = np.stack([bag.vector(w) for w in b_words]) - bag.pad  # [3, D]
    expected = a @ b.T / (len(a_words) * len(b_words))
    np.testing.assert_allclose(e.matrix, expected, atol=1e-6)
    fa, fb = a.mean(0) + bag.pad, b.mean(0) + bag.pad
    assert e.score == pytest.approx(float(fa @ fb), abs=1e-5)
    p = bag.pad.astype(np.float64)
    assert e.reference_terms == pytest.approx(float(fa @ p + p @ fb - p @ p), abs=1e-5)
    assert abs(e.residual) < 1e-5
    # the reference terms split exactly into one term per word and a constant (the model is linear)
    np.testing.assert_allclose(e.token_terms1, a @ p / len(a_words), atol=1e-6)
    np.testing.assert_allclose(e.token_terms2, b @ p / len(b_words), atol=1e-6)
    assert e.reference_constant == pytest.approx(float(p @ p), abs=1e-5)
    assert e.token_terms1.sum() + e.token_terms2.sum() + e.reference_constant == pytest.approx(
        e.reference_terms, abs=1e-5
    )
    np.testing.assert_allclose(e.word_totals1, a @ fb / len(a_words), atol=1e-5)  # P_a[i]·f(b)
    assert e.words1 == tuple(a_words) and e.words2 == tuple(b_words)
    assert e.steps == steps and e.layer == 0 and e.seconds >= 0


def test_quadrature_weights_sum_to_one_and_gauss_is_exact_for_cubics():
    for rule in ("gauss", "midpoint"):
        nodes, weights = quadrature(5, rule)
        assert weights.sum() == pytest.approx(1.0) and ((nodes > 0) & (nodes < 1)).all()
    nodes, weights = quadrature(2, "gauss")
    assert float(weights @ nodes**3) == pytest.approx(0.25, abs=1e-12)
    with pytest.raises(MlseError, match="steps"):
        quadrature(0, "gauss")
    with pytest.raises(MlseError, match="rule"):
        quadrature(4, "simpson")


@pytest.fixture(scope="module")
def bert(tiny_bert):
    from mlse.encoders.load import load_encoder

    return load_encoder(str(tiny_bert), cache=False)


@pytest.fixture(scope="module")
def bert64(tiny_bert):
    """The same model in float64: the quadrature error is then far above rounding, so its order is deterministic."""
    from mlse.encoders.load import load_encoder

    encoder = load_encoder(str(tiny_bert), cache=False)
    encoder.model.double()
    return encoder


def test_residual_shrinks_as_steps_grow_on_a_real_transformer(bert64):
    # in float32 the residual of this tiny model meets rounding noise (~1e-5) by 4 steps, and the order of two
    # noise-level numbers moves with the summation order; in float64 it follows the quadrature rules' error orders.
    # Only what the rules guarantee for a smooth path is asserted, not which rule wins at a given small step count.
    def residual(steps, rule):  # float32 products: bfloat16's rounding would floor the residual near 1e-4
        return abs(explain_pair(bert64, S1, S2, steps=steps, layer=0, rule=rule, precision="float32").residual)

    midpoint = [residual(s, "midpoint") for s in (1, 4, 32)]
    assert midpoint[2] < midpoint[1] < midpoint[0], midpoint
    # midpoint error ~ 1/n^2 once n is large: (32/4)^2 = 64; from 4 steps the session's tiny BERT (the same in every
    # process) is not there yet: 12.4 (2.06e-7 then 1.66e-8), still more than first order's 32/4 = 8
    assert midpoint[1] / midpoint[2] > 8, midpoint
    gauss = [residual(s, "gauss") for s in (1, 2, 8)]
    assert gauss[2] < gauss[1] < gauss[0], gauss
    assert gauss[2] < midpoint[2], (gauss, midpoint)  # 8 Gauss-Legendre points beat 32 midpoints (6-1200x seen)


@pytest.mark.parametrize("native", [True, False])
def test_auto_precision_is_bfloat16_only_where_the_cpu_computes_it(bert, monkeypatch, native):
    from mlse.encoders.hardware import Capabilities
    from mlse.explain import explanation

    monkeypatch.setattr(explanation, "device_capabilities", lambda device: Capabilities(device, native))
    e = explain_pair(bert, S1, S2, steps=2, layer=1)
    assert e.precision == ("bfloat16" if native else "float32") == e.to_dict()["precision"]
    assert explain_pair(bert, S1, S2, steps=2, layer=1, precision="float32").precision == "float32"
    dual_only = type("DualOnly", (), {})()  # a backbone without hand-written derivatives (muse's kind)
    assert explanation.attribution_precision(dual_only, "auto") == "float32"
    with pytest.raises(MlseError, match="float32 only"):
        explanation.attribution_precision(dual_only, "bfloat16")
    with pytest.raises(MlseError, match="unknown precision 'half'"):
        explain_pair(bert, S1, S2, steps=2, layer=1, precision="half")


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_the_identity_holds_and_the_score_is_the_models_cosine(bert, layer):
    e = explain_pair(bert, S1, S2, steps=4, layer=layer)
    emb = bert.encode([S1, S2])
    assert e.score == pytest.approx(float(emb[0] @ emb[1]), abs=1e-5)
    assert e.forward_score == pytest.approx(e.score, abs=1e-5)
    assert e.score == pytest.approx(e.matrix.sum() + e.reference_terms + e.residual, abs=1e-9)
    assert e.matrix.shape == (len(e.words1), len(e.words2))
    assert e.matrix.sum() == pytest.approx(e.token_matrix.sum(), abs=1e-9)  # merging pieces keeps the total
    split = e.token_terms1.sum() + e.token_terms2.sum() + e.reference_constant
    assert split == pytest.approx(e.reference_terms, abs=max(2 * abs(e.residual), 1e-5))
    assert e.words1[0] == "[CLS]" and e.special1[0] and e.words2[-1] == "[SEP]" and e.special2[-1]
    if layer == 0:  # special tokens equal their reference at the embedding layer: they get exactly nothing
        assert e.special_terms == 0.0
    top = e.top_pairs(3)
    assert len(top) == 3 and all(w1 in e.words1 and w2 in e.words2 for w1, w2, _ in top)
    assert abs(top[0][2]) >= abs(top[1][2]) >= abs(top[2][2])
    assert not any(w in ("[CLS]", "[SEP]") for w1, w2, _ in top for w in (w1, w2))


def test_layers_out_of_range_and_empty_sentences_are_refused(bert):
    with pytest.raises(MlseError, match="layer must be 0"):
        explain_pair(bert, S1, S2, layer=3)
    with pytest.raises(MlseError, match="sentence 2 is empty"):
        explain_pair(bert, S1, "   ")
    with pytest.raises(MlseError, match="sentence 1 is empty"):
        align_tokens(bert, "", S2)


def test_a_sentence_cut_at_the_models_length_says_so(bert):
    long = " ".join(["word"] * 100)  # the tiny model reads 64 tokens
    e = explain_pair(bert, long, S2, steps=2, layer=2)
    assert len(e.words1) < 100 and len(e.notes) == 1 and e.notes[0].startswith("sentence 1 is longer")
    assert explain_pair(bert, S1, S2, steps=2, layer=2).notes == ()


def test_onnx_models_scorers_and_other_encoders_are_refused(tiny_bert, fake_scorer):
    from mlse.encoders.load import load_encoder
    from tests.fake_encoder import FakeEncoder

    with pytest.raises(MlseError, match="ONNX backend.*backend='torch'"):
        explain_pair(load_encoder(str(tiny_bert), backend="onnx", cache=False), S1, S2)
    with pytest.raises(MlseError, match="is a scorer.*explain its backbone"):
        explain_pair(fake_scorer, S1, S2)
    with pytest.raises(MlseError, match="cannot be explained"):
        explain_pair(FakeEncoder(), S1, S2)


def test_the_compact_tokenizer_path_and_the_prompt(tmp_path):
    """A tiny e5-format model (query: prompt, SentencePiece ids from the compact tokenizer)."""
    from mlse.encoders import e5
    from mlse.encoders.load import load_encoder
    from tests.e5_format_writer import build_tiny, write_e5

    out = tmp_path / "me5-tiny"
    out.mkdir()
    e5.convert(write_e5(tmp_path / "tiny.bin", build_tiny(seed=0)), out)
    model = load_encoder(str(out), cache=False)
    assert model.compact_runner() is not None
    s1, s2 = "the cat sat", "the dog ran"
    e = explain_pair(model, s1, s2, steps=8, layer=1)
    assert e.words1[:2] == ("<s>", "query:") and e.special1[:2] == (True, True)
    assert [w for w, s in zip(e.words1, e.special1) if not s] == s1.split()
    emb = model.encode([s1, s2])
    assert e.score == pytest.approx(float(emb[0] @ emb[1]), abs=1e-5)


def test_alignment_matches_identical_words(bert):
    a = align_tokens(bert, "the cat sleeps", "the cat sleeps")
    assert a.words1 == ("the", "cat", "sleeps") and a.similarity.shape == (3, 3)
    assert a.best1 == (0, 1, 2) and a.best2 == (0, 1, 2)
    np.testing.assert_allclose(np.diag(a.similarity), 1.0, atol=1e-5)
    assert [m[:2] for m in a.mutual()] == [("the", "the"), ("cat", "cat"), ("sleeps", "sleeps")]
    assert a.to_dict()["note"].startswith("contextual token similarity")


def test_cli_prints_the_split_and_writes_the_json(tiny_bert, tmp_path, capsys):
    import json

    from mlse.cli.main import main

    out = tmp_path / "explain.json"
    rc = main(
        [
            "explain",
            "--model",
            str(tiny_bert),
            S1,
            S2,
            "--steps",
            "4",
            "--layer",
            "1",
            "--top",
            "3",
            "--align",
            "--json-out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0
    assert "cosine" in printed and "reference terms" in printed and "residual" in printed
    assert printed.count("<->") == 3 and "not an explanation of the score" in printed
    assert "sentence 1: " in printed and "sentence 2: " in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert np.asarray(data["matrix"]).shape == (len(data["words1"]), len(data["words2"]))
    assert data["score"] == pytest.approx(np.sum(data["matrix"]) + data["reference_terms"] + data["residual"])
    assert data["layer"] == 1 and data["steps"] == 4 and "alignment" in data


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "--steps must be a positive integer"),
        (["--layer", "9"], "layer must be 0"),
        (["--backend", "onnx"], "ONNX backend"),
    ],
)
def test_cli_errors_are_one_line(tiny_bert, capsys, argv, message):
    from mlse.cli.main import main

    rc = main(["explain", "--model", str(tiny_bert), S1, S2, *argv])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "Loading weights" not in line]
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:") and message in err[0], err


@pytest.mark.slow
@pytest.mark.multithread
def test_real_minilm_explanation_converges_and_names_the_flute():
    from mlse.models import load_model

    model = load_model("minilm-en")
    e = explain_pair(model, S1, "A man plays the flute.")
    assert e.relative_residual < 0.02
    words = {w for pair in e.top_pairs(3) for w in pair[:2]}
    assert "flute" in words or "flute." in words
    a = align_tokens(model, S1, "A man plays the flute.")
    assert a.words2[a.best1[a.words1.index("flute")]] == "flute"
