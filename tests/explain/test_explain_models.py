"""The forward pass written out for attribution reproduces the models, and its hand-written derivatives agree with
torch's forward-mode AD: BERT (mean pooling), LaBSE-like (CLS + Dense + Normalize), XLM-R (offset positions), and
the other pooling modes."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from mlse.explain.backbones import attributable
from mlse.explain.integrate import token_contributions

TEXTS = ["A man is playing a flute.", "Ein Mann spielt Flöte und singt dazu."]


def _encoder(folder):
    from mlse.encoders.load import load_encoder

    return load_encoder(str(folder), cache=False)


def _check(encoder, layers=(0, 1, 2)):
    import torch

    backbone = attributable(encoder)
    for text in TEXTS:
        tokens = backbone.tokenize(text)
        own = encoder.encode([text])[0]
        for layer in layers:
            x, r = backbone.states(tokens, layer)
            with torch.no_grad():
                ours = backbone.tail(x.unsqueeze(0), layer)[0].numpy()
            np.testing.assert_allclose(ours, own, atol=2e-5)  # the same vector as the model's own encode
            tail = partial(backbone.tail, layer=layer)
            dual = token_contributions(tail, x, r, steps=3, rule="gauss")
            by_hand = token_contributions(
                tail, x, r, steps=3, rule="gauss", jvp=partial(backbone.tail_jvp, layer=layer)
            )
            np.testing.assert_allclose(by_hand, dual, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_labse", "tiny_xlmr"])
def test_forward_and_derivatives_match(fixture, request):
    _check(_encoder(request.getfixturevalue(fixture)))


def test_bfloat16_products_stay_close_to_float32_and_are_not_the_same_numbers(tiny_bert):
    backbone = attributable(_encoder(tiny_bert))
    x, r = backbone.states(backbone.tokenize(TEXTS[1]), 1)
    tail = partial(backbone.tail, layer=1)
    exact, half = (
        token_contributions(tail, x, r, steps=3, rule="gauss", jvp=partial(backbone.tail_jvp, layer=1, precision=p))
        for p in ("float32", "bfloat16")
    )
    gap = np.abs(half - exact).max() / np.abs(exact).max()
    assert 0 < gap < 2e-2, gap  # bfloat16 keeps 8 bits of mantissa: ~0.4 % a product, less after the sums


@pytest.mark.parametrize("mode", ["max", "cls", "lasttoken", "weightedmean", "mean_sqrt_len_tokens", ("cls", "mean")])
def test_other_pooling_modes(tiny_bert, mode):
    encoder = _encoder(tiny_bert)
    encoder.model[1].pooling_mode = mode  # this encoder's own copy of the model
    _check(encoder, layers=(1,))


def test_unsupported_pooling_is_refused(tiny_bert):
    from mlse.errors import MlseError

    encoder = _encoder(tiny_bert)
    encoder.model[1].include_prompt = False
    with pytest.raises(MlseError, match="pooling"):
        attributable(encoder)


def test_muse_on_onnx_is_refused_without_loading_it():
    from mlse.encoders.use import UseEncoder
    from mlse.errors import MlseError

    with pytest.raises(MlseError, match="ONNX backend.*backend='torch'"):
        attributable(UseEncoder(backend="onnx"))


@pytest.mark.slow
@pytest.mark.multithread
def test_muse_explanation_through_its_torch_port():
    from mlse.encoders.use import UseEncoder
    from mlse.explain import align_tokens, explain_pair

    muse = UseEncoder()
    e = explain_pair(muse, "A man is playing a flute.", "Ein Mann spielt Flöte.")
    assert e.layer == 0 and e.steps == 64 and e.rule == "midpoint"
    assert e.relative_residual < 0.02
    assert e.words1 == ("<s>", "A", "man", "is", "playing", "a", "flute", ".", "</s>")
    assert ("flute", "Flöte") in {p[:2] for p in e.top_pairs(3)}
    with pytest.raises(Exception, match="no layers"):
        explain_pair(muse, "a", "b", layer=2)
    a = align_tokens(muse, "A man is playing a flute.", "Ein Mann spielt Flöte.")
    assert a.words2[a.best1[a.words1.index("flute")]] == "Flöte"
