"""Stage-1 loss terms (mlse.heads.stage1) on hand-made tensors whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch

from mlse.heads.stage1 import Stage1Weights, stage1_loss_terms

TERMS = ("meaning", "negative", "reconstruction", "language_id", "language")


def _unit(i: int, d: int = 8) -> torch.Tensor:
    v = torch.zeros(d)
    v[i] = 1.0
    return v


def _confident(langs: torch.Tensor, n_langs: int, scale: float = 30.0) -> torch.Tensor:
    """Logits with ``scale`` on the given class and 0 elsewhere: [B, n_langs]."""
    return scale * torch.nn.functional.one_hot(langs, n_langs).float()


def _terms(e, m, lang_emb, m_rand, l_rand, logits, langs, weights=Stage1Weights()):
    """Same tensors for both sides x and y unless a pair is given."""

    def two(t):
        return t if isinstance(t, tuple) else (t, t)

    return stage1_loss_terms(two(e), two(m), two(lang_emb), two(m_rand), two(l_rand), two(logits), two(langs), weights)


def _neutral(B: int = 4, d: int = 8):
    """Tensors under which every term is (near) zero: a baseline each test perturbs one term of."""
    torch.manual_seed(0)
    meaning = torch.stack([_unit(i % 4, d) for i in range(B)])  # [B, d], dims 0..3
    partner = torch.stack([_unit(4 + i % 2, d) for i in range(B)])  # orthogonal to every meaning
    lang = torch.stack([_unit(7, d)] * B)  # [B, d]
    langs = torch.zeros(B, dtype=torch.long)
    return dict(
        e=meaning + lang,
        m=meaning,
        lang_emb=lang,
        m_rand=partner,
        l_rand=lang.clone(),
        logits=_confident(langs, 3),
        langs=langs,
    )


def test_neutral_inputs_give_zero_total():
    t = _terms(**_neutral())
    for k in TERMS:
        assert float(t[k]) == pytest.approx(0.0, abs=1e-6), k
    assert float(t["total"]) == pytest.approx(0.0, abs=1e-6)


def test_meaning_term_zero_for_identical_one_for_orthogonal():
    kw = _neutral()
    m = kw.pop("m")
    same = _terms(m=(m, m.clone()), **kw)
    assert float(same["meaning"]) == pytest.approx(0.0, abs=1e-6)
    ortho = torch.stack([_unit(6)] * len(m))  # orthogonal to every meaning row (dims 0..3)
    t = _terms(m=(m, ortho), **kw)
    assert float(t["meaning"]) == pytest.approx(1.0, abs=1e-6)
    opposite = _terms(m=(m, -m), **kw)
    assert float(opposite["meaning"]) == pytest.approx(2.0, abs=1e-6)
    # scale does not matter (cosine)
    scaled = _terms(m=(m, 7.5 * m), **kw)
    assert float(scaled["meaning"]) == pytest.approx(0.0, abs=1e-6)


def test_negative_term_zero_for_orthogonal_or_opposite_partners_positive_for_equal():
    kw = _neutral()
    m = kw["m"]
    kw.pop("m_rand")
    assert float(_terms(m_rand=-m, **kw)["negative"]) == pytest.approx(0.0, abs=1e-6)
    ortho = torch.stack([_unit(5)] * len(m))
    assert float(_terms(m_rand=ortho, **kw)["negative"]) == pytest.approx(0.0, abs=1e-6)
    # equal partners: cos 1 on each of the two sides -> 1 + 1
    assert float(_terms(m_rand=m.clone(), **kw)["negative"]) == pytest.approx(2.0, abs=1e-6)
    # only the x side equal -> 1
    assert float(_terms(m_rand=(m.clone(), ortho), **kw)["negative"]) == pytest.approx(1.0, abs=1e-6)
    # the margin is subtracted before the hinge
    half = Stage1Weights(margin=0.5)
    assert float(_terms(m_rand=m.clone(), weights=half, **kw)["negative"]) == pytest.approx(1.0, abs=1e-6)
    # a partner at cos 0.6 with margin 0.5 gives 0.1 per side
    partner = 0.6 * m + 0.8 * ortho
    assert float(_terms(m_rand=partner, weights=half, **kw)["negative"]) == pytest.approx(0.2, abs=1e-5)


def test_reconstruction_zero_when_parts_sum_to_input_and_mse_otherwise():
    torch.manual_seed(1)
    e = torch.randn(5, 8)
    m = torch.randn(5, 8)
    kw = _neutral(B=5)
    for k in ("e", "m", "lang_emb"):
        kw.pop(k)
    t = _terms(e=e, m=m, lang_emb=e - m, **kw)
    assert float(t["reconstruction"]) == pytest.approx(0.0, abs=1e-10)
    off = _terms(e=e, m=m, lang_emb=e - m + 0.5, **kw)  # every element off by 0.5 on both sides: 2 * 0.25
    assert float(off["reconstruction"]) == pytest.approx(0.5, abs=1e-6)


def test_language_id_near_zero_for_confident_correct_and_large_for_wrong():
    kw = _neutral()
    langs = torch.tensor([0, 1, 2, 1])
    kw.pop("logits")
    kw.pop("langs")
    right = _terms(logits=_confident(langs, 3), langs=langs, **kw)["language_id"]
    assert float(right) < 1e-6
    wrong = _terms(logits=_confident((langs + 1) % 3, 3), langs=langs, **kw)["language_id"]
    assert float(wrong) == pytest.approx(2 * 30.0, rel=1e-4)  # CE = 30 per side
    uniform = _terms(logits=torch.zeros(4, 3), langs=langs, **kw)["language_id"]
    assert float(uniform) == pytest.approx(2 * math.log(3), rel=1e-5)


def test_language_term_zero_for_identical_language_embeddings():
    kw = _neutral()
    lang = kw["lang_emb"]
    kw.pop("l_rand")
    assert float(_terms(l_rand=lang.clone(), **kw)["language"]) == pytest.approx(0.0, abs=1e-6)
    other = torch.stack([_unit(6)] * len(lang))
    assert float(_terms(l_rand=other, **kw)["language"]) == pytest.approx(2.0, abs=1e-6)  # 1 per side


def test_weights_scale_terms_and_total_is_their_sum():
    torch.manual_seed(2)
    B, d, k = 6, 8, 3
    args = dict(
        e=(torch.randn(B, d), torch.randn(B, d)),
        m=(torch.randn(B, d), torch.randn(B, d)),
        lang_emb=(torch.randn(B, d), torch.randn(B, d)),
        m_rand=(torch.randn(B, d), torch.randn(B, d)),
        l_rand=(torch.randn(B, d), torch.randn(B, d)),
        logits=(torch.randn(B, k), torch.randn(B, k)),
        langs=(torch.randint(0, k, (B,)), torch.randint(0, k, (B,))),
    )
    plain = _terms(**args)
    assert float(plain["total"]) == pytest.approx(sum(float(plain[t]) for t in TERMS), rel=1e-6)
    assert all(float(plain[t]) > 0 for t in TERMS)
    w = Stage1Weights(meaning=2.0, negative=0.0, reconstruction=0.5, language_id=3.0, language=1.0)
    weighted = _terms(weights=w, **args)
    for t in TERMS:
        assert float(weighted[t]) == pytest.approx(getattr(w, t) * float(plain[t]), rel=1e-6), t
    assert float(weighted["total"]) == pytest.approx(sum(float(weighted[t]) for t in TERMS), rel=1e-6)
    assert float(weighted["total"]) != pytest.approx(float(plain["total"]), rel=1e-3)


def _synthetic(pairing: torch.Tensor | None = None):
    """e = lang_vec[lang] + meaning_vec[sentence], language in dims 0..2, meaning in dims 3..10 (orthogonal).

    Translation pairs (x in language 0 or 1, y in language 2) of 8 sentences; random same-language partners carry
    another sentence's (orthogonal) meaning. ``pairing`` permutes which sentence each y row holds.
    """
    d, n_sent = 11, 8
    lang_vec = 2.0 * torch.eye(d)[:3]  # [3, d]
    meaning_vec = torch.eye(d)[3 : 3 + n_sent] * torch.linspace(1.0, 3.0, n_sent)[:, None]  # [8, d]
    sent = torch.arange(n_sent)
    sent_y = sent if pairing is None else sent[pairing]
    lang_x = torch.tensor([0, 1] * (n_sent // 2))
    lang_y = torch.full((n_sent,), 2)
    partner = (sent + 1) % n_sent  # another sentence: orthogonal meaning
    partner_y = (sent_y + 1) % n_sent
    e = (lang_vec[lang_x] + meaning_vec[sent], lang_vec[lang_y] + meaning_vec[sent_y])
    m = (meaning_vec[sent], meaning_vec[sent_y])
    l = (lang_vec[lang_x], lang_vec[lang_y])  # noqa: E741
    m_rand = (meaning_vec[partner], meaning_vec[partner_y])
    l_rand = (lang_vec[lang_x], lang_vec[lang_y])
    logits = (_confident(lang_x, 3), _confident(lang_y, 3))
    return stage1_loss_terms(e, m, l, m_rand, l_rand, logits, (lang_x, lang_y))


def test_perfectly_split_synthetic_data_gives_near_zero_loss_and_shuffled_pairs_a_higher_one():
    split = _synthetic()
    assert float(split["total"]) < 1e-6
    for t in TERMS:
        assert float(split[t]) < 1e-6, t
    shuffled = _synthetic(pairing=torch.tensor([1, 2, 3, 4, 5, 6, 7, 0]))  # every y holds another sentence
    assert float(shuffled["meaning"]) == pytest.approx(1.0, abs=1e-6)  # orthogonal meanings
    assert float(shuffled["total"]) > float(split["total"]) + 0.9
    partly = _synthetic(pairing=torch.tensor([1, 0, 2, 3, 4, 5, 6, 7]))  # 2 of 8 rows mispaired
    assert float(partly["meaning"]) == pytest.approx(0.25, abs=1e-6)
    assert float(split["total"]) < float(partly["total"]) < float(shuffled["total"])
