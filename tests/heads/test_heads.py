"""Stage-1 and Stage-2 heads (mlse.heads) on synthetic data whose structure is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from mlse.heads.choices import NONLINEARITIES
from mlse.heads.stage1 import Stage1Config, Stage1Head
from mlse.heads.stage2 import Stage2Config, Stage2Head
from mlse.stop_signal import StopSignal

LANGS = ["aa", "bb", "cc", "dd"]
DIM = 16
# Fixed language offsets: e = offset[language] + meaning + noise; a translation pair shares the meaning vector.
OFFSETS = np.random.default_rng(123).normal(0.0, 1.5, (len(LANGS), DIM))
S1_FAST = dict(max_epochs=40, batch_size=64, lr=1e-2)


def parallel(n: int, seed: int, noise: float = 0.3):
    """n translation pairs between two different languages: (X_a [n, d], X_b [n, d], lang_a, lang_b)."""
    rng = np.random.default_rng(seed)
    meaning = rng.normal(size=(n, DIM))
    la = rng.integers(0, len(LANGS), n)
    lb = (la + rng.integers(1, len(LANGS), n)) % len(LANGS)
    X_a = OFFSETS[la] + meaning + noise * rng.normal(size=(n, DIM))
    X_b = OFFSETS[lb] + meaning + noise * rng.normal(size=(n, DIM))
    return X_a.astype(np.float32), X_b.astype(np.float32), [LANGS[i] for i in la], [LANGS[i] for i in lb]


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _probe_accuracy(Z: np.ndarray, y: np.ndarray) -> float:
    """Held-out accuracy of a logistic-regression language probe (random half to train, half to test)."""
    idx = np.random.default_rng(0).permutation(len(Z))
    train, test = idx[: len(Z) // 2], idx[len(Z) // 2 :]
    return float(LogisticRegression(max_iter=2000).fit(Z[train], y[train]).score(Z[test], y[test]))


@pytest.fixture(scope="module")
def stage1_head() -> Stage1Head:
    return Stage1Head(seed=0, **S1_FAST).fit(*parallel(400, seed=0))


# -- Stage 1 ----------------------------------------------------------------------------------------------------------


def test_stage1_fit_returns_self_and_sets_learned_attributes():
    head = Stage1Head(seed=0, max_epochs=3, batch_size=64)
    assert not hasattr(head, "net_") and not hasattr(head, "languages_")
    records = []
    assert head.fit(*parallel(60, seed=1), progress=records.append) is head
    assert head.languages_ == sorted(LANGS)
    assert isinstance(head.net_, torch.nn.Module)
    assert len(head.history_) == 3 == len(records)
    assert [r["epoch"] for r in head.history_] == [1, 2, 3]
    assert 1 <= head.best_epoch_ <= 3
    assert head.dev_loss_ == min(r["dev_loss"] for r in head.history_)
    assert head.n_dev_ == 12 and head.n_train_ == 48  # dev_fraction 0.2 of 60
    assert set(head.history_[0]["dev_terms"]) == {"meaning", "negative", "reconstruction", "language_id", "language"}


def test_stage1_dev_loss_decreases(stage1_head):
    first = stage1_head.history_[0]["dev_loss"]
    assert stage1_head.dev_loss_ < 0.3 * first
    assert stage1_head.best_epoch_ > 1
    terms0 = stage1_head.history_[0]["dev_terms"]
    terms_best = stage1_head.history_[stage1_head.best_epoch_ - 1]["dev_terms"]
    assert terms_best["meaning"] < terms0["meaning"]
    assert terms_best["language_id"] < terms0["language_id"]


def test_stage1_translations_closer_than_random_pairs_in_meaning_space(stage1_head):
    X_a, X_b, _, _ = parallel(300, seed=100)
    m_a, m_b = stage1_head.transform(X_a), stage1_head.transform(X_b)
    assert m_a.shape == (300, DIM) and m_a.dtype == np.float32
    translations = _cos(m_a, m_b).mean()
    random_pairs = _cos(m_a, np.roll(m_b, 1, axis=0)).mean()
    assert translations > 0.8
    assert abs(random_pairs) < 0.2
    # and closer than in the input space, where the language offsets separate translations
    assert translations > _cos(X_a, X_b).mean() + 0.1


def test_stage1_meaning_carries_less_language_than_language_embedding(stage1_head):
    X_a, X_b, la, lb = parallel(300, seed=100)
    X, y = np.concatenate([X_a, X_b]), np.array(la + lb)
    acc_input = _probe_accuracy(X, y)
    acc_meaning = _probe_accuracy(stage1_head.transform(X), y)
    acc_language = _probe_accuracy(stage1_head.language_embedding(X), y)
    assert acc_input > 0.95 and acc_language > 0.95
    assert acc_meaning < acc_language - 0.25, (acc_meaning, acc_language)
    assert acc_meaning < acc_input - 0.25, (acc_meaning, acc_input)
    predicted = np.array(stage1_head.predict_language(X))
    assert np.mean(predicted == y) > 0.95
    assert set(predicted) <= set(LANGS)


def test_stage1_unfitted_head_raises():
    head = Stage1Head()
    X = np.zeros((3, DIM), np.float32)
    for method in (head.transform, head.language_embedding, head.predict_language):
        with pytest.raises(RuntimeError, match="not fitted"):
            method(X)
    with pytest.raises(RuntimeError, match="not fitted"):
        head.state()


def test_stage1_misaligned_inputs_raise():
    X_a, X_b, la, lb = parallel(20, seed=2)
    head = Stage1Head(max_epochs=1)
    with pytest.raises(ValueError, match="align"):
        head.fit(X_a, X_b[:-1], la, lb)
    with pytest.raises(ValueError, match="align"):
        head.fit(X_a, X_b, la[:-1], lb)
    with pytest.raises(ValueError, match="align"):
        head.fit(X_a, X_b, la, lb[:-1])
    with pytest.raises(ValueError, match="align"):
        head.fit(X_a, X_b[:, :-1], la, lb)
    with pytest.raises(ValueError, match="align"):
        head.fit(X_a[:, None, :], X_b[:, None, :], la, lb)
    with pytest.raises(ValueError, match="at least 10"):
        head.fit(X_a[:5], X_b[:5], la[:5], lb[:5])
    assert not hasattr(head, "net_")


@pytest.mark.parametrize("prelayer", [False, True])
def test_stage1_state_round_trip_reproduces_transform_exactly(stage1_head, prelayer):
    head = stage1_head if not prelayer else Stage1Head(seed=0, prelayer=True, max_epochs=5).fit(*parallel(80, 3))
    tensors, meta = head.state()
    assert meta["kind"] == "stage1" and meta["config"]["prelayer"] is prelayer
    clone = Stage1Head.from_state({k: v.clone() for k, v in tensors.items()}, meta)
    X = np.concatenate(parallel(50, seed=4)[:2])
    np.testing.assert_array_equal(clone.transform(X), head.transform(X))
    np.testing.assert_array_equal(clone.language_embedding(X), head.language_embedding(X))
    assert clone.predict_language(X) == head.predict_language(X)
    assert clone.languages_ == head.languages_ and clone.best_epoch_ == head.best_epoch_
    assert clone.dev_loss_ == head.dev_loss_ and clone.history_ == head.history_
    assert clone.config == head.config and isinstance(clone.config, Stage1Config)


def test_stage1_prelayer_variant_trains():
    head = Stage1Head(seed=0, prelayer=True, **S1_FAST).fit(*parallel(400, seed=0))
    assert isinstance(head.net_.prelayer, torch.nn.Sequential)  # not the identity
    assert head.dev_loss_ < 0.3 * head.history_[0]["dev_loss"]
    X_a, X_b, la, lb = parallel(200, seed=100)
    m_a, m_b = head.transform(X_a), head.transform(X_b)
    assert _cos(m_a, m_b).mean() > _cos(m_a, np.roll(m_b, 1, axis=0)).mean() + 0.5
    assert np.mean(np.array(head.predict_language(np.concatenate([X_a, X_b]))) == np.array(la + lb)) > 0.9


def test_stage1_same_seed_same_head():
    data = parallel(60, seed=5)
    a = Stage1Head(seed=7, max_epochs=3).fit(*data)
    b = Stage1Head(seed=7, max_epochs=3).fit(*data)
    np.testing.assert_array_equal(a.transform(data[0]), b.transform(data[0]))


def test_stage1_stop_ends_after_that_epoch_and_keeps_the_best():
    asked = []

    def stop_after_three() -> bool:
        asked.append(1)
        return len(asked) >= 3

    head = Stage1Head(seed=0, **S1_FAST).fit(*parallel(200, seed=3), stop=StopSignal(also=stop_after_three))
    assert head.stopped_ and len(head.history_) == 3 == len(asked)
    assert head.dev_loss_ == min(r["dev_loss"] for r in head.history_)  # the best of the epochs it ran
    assert head.transform(parallel(5, seed=4)[0]).shape == (5, DIM)
    assert not Stage1Head(seed=0, max_epochs=2).fit(*parallel(60, seed=1), stop=StopSignal()).stopped_


# -- Stage 2 ----------------------------------------------------------------------------------------------------------

# Gold is a monotone function of the cosine after a fixed linear map A that weights the first half of the dimensions
# 30x more than the second; the second half carries large, irrelevant noise, so the raw cosine is a poor predictor
# and a learned map can do much better.
A = np.diag(np.r_[np.full(DIM // 2, 3.0), np.full(DIM - DIM // 2, 0.1)])


def sts_pairs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    m1 = rng.normal(size=(n, DIM))
    half = DIM // 2
    scale = np.c_[np.repeat(rng.uniform(0.1, 1.5, (n, 1)), half, 1), np.repeat(rng.uniform(0.0, 3.0, (n, 1)), half, 1)]
    m2 = m1 + rng.normal(size=(n, DIM)) * scale
    gold = 5.0 * (_cos(m1 @ A, m2 @ A) + 1.0) / 2.0  # in [0, 5], monotone in the A-cosine
    return m1.astype(np.float32), m2.astype(np.float32), gold.astype(np.float32)


@pytest.fixture(scope="module")
def stage2_data():
    return sts_pairs(2000, seed=0), sts_pairs(500, seed=50)


@pytest.fixture(scope="module")
def stage2_head(stage2_data) -> Stage2Head:
    (m1, m2, gold), dev = stage2_data
    return Stage2Head(seed=0, max_epochs=20, batch_size=64, lr=3e-3, patience=5).fit(m1, m2, gold, dev=dev)


def test_stage2_fit_improves_dev_pearson(stage2_head):
    h = stage2_head
    assert h.history_[0]["epoch"] == 0 and h.history_[0]["train_loss"] is None
    start = h.history_[0]["dev_pearson"]
    assert 0.2 < start < 0.6  # the raw cosine is a poor predictor here
    assert h.dev_pearson_ >= start
    assert h.dev_pearson_ > start + 0.2
    assert h.dev_pearson_ == max(r["dev_pearson"] for r in h.history_)
    assert h.history_[h.best_epoch_]["dev_pearson"] == h.dev_pearson_


def test_stage2_keeps_best_epoch(stage2_data):
    """Whatever training does, the kept weights are never worse on dev than the Stage-1 starting point."""
    (m1, m2, gold), dev = stage2_data
    rng = np.random.default_rng(9)
    h = Stage2Head(seed=0, max_epochs=3, lr=0.5, patience=1).fit(m1, m2, rng.uniform(0, 5, len(gold)), dev=dev)
    assert h.dev_pearson_ >= h.history_[0]["dev_pearson"]
    cos = h.cosine(*dev[:2])
    assert np.corrcoef(cos, dev[2])[0, 1] == pytest.approx(h.dev_pearson_, abs=1e-4)


def test_stage2_same_seed_same_head(stage2_data):
    """On one machine a seed fixes the head exactly (the README's seed grids rely on it: across machines, float
    differences can still flip the early-stopping epoch)."""
    (m1, m2, gold), dev = stage2_data
    a, b = (Stage2Head(seed=3, max_epochs=3, lr=3e-3).fit(m1, m2, gold, dev=dev) for _ in range(2))
    assert a.best_epoch_ == b.best_epoch_
    np.testing.assert_array_equal(a.cosine(*dev[:2]), b.cosine(*dev[:2]))


def test_stage2_a_pressed_stop_ends_early_and_keeps_the_best(stage2_data):
    (m1, m2, gold), dev = stage2_data
    pressed = StopSignal()
    pressed.set()
    h = Stage2Head(seed=0, max_epochs=20, lr=3e-3, patience=20).fit(m1, m2, gold, dev=dev, stop=pressed)
    assert h.stopped_ and len(h.history_) == 2  # epoch 0 (the cosine) and the one epoch it ran
    assert h.dev_pearson_ == max(r["dev_pearson"] for r in h.history_)


def test_stage2_residual_untrained_net_is_identity(stage2_data):
    (m1, m2, gold), dev = stage2_data
    h = Stage2Head(residual=True, max_epochs=0).fit(m1[:50], m2[:50], gold[:50], dev=dev)
    assert h.best_epoch_ == 0 and len(h.history_) == 1
    np.testing.assert_array_equal(h.transform(m1), m1)
    plain = Stage2Head(residual=False, max_epochs=0).fit(m1[:50], m2[:50], gold[:50], dev=dev)
    assert not np.allclose(plain.transform(m1), m1)


@pytest.mark.parametrize("nonlinearity", NONLINEARITIES)
@pytest.mark.parametrize("conv", [False, True])
def test_stage2_every_variant_fits(stage2_data, nonlinearity, conv):
    (m1, m2, gold), dev = stage2_data
    h = Stage2Head(conv=conv, nonlinearity=nonlinearity, seed=0, max_epochs=10, batch_size=64, lr=3e-3, patience=10)
    assert h.fit(m1, m2, gold, dev=dev) is h
    assert (h.net_.conv is not None) is conv and h.net_.nonlinearity == nonlinearity
    assert len(h.history_) == 11 and np.isfinite([r["dev_pearson"] for r in h.history_]).all()
    assert h.dev_pearson_ >= h.history_[0]["dev_pearson"]
    assert h.dev_pearson_ > h.history_[0]["dev_pearson"] + 0.05
    assert h.transform(m1[:7]).shape == (7, DIM)
    assert np.all(np.abs(h.cosine(m1[:7], m2[:7])) <= 1 + 1e-6)


def test_stage2_calibration_within_scale_and_monotone(stage2_head, stage2_data):
    h = stage2_head
    grid = np.linspace(-1.5, 1.5, 301)
    scores = h.calibrate(grid)
    assert scores.min() >= 0.0 and scores.max() <= 5.0
    assert np.all(np.diff(scores) >= 0)
    assert scores[-1] > scores[0] + 2.0  # not a constant map
    _, (d1, d2, dgold) = stage2_data
    predicted = h.calibrate(h.cosine(d1, d2))
    assert predicted.min() >= 0.0 and predicted.max() <= 5.0
    # an isotonic fit of gold on the cosine is closer to gold than a constant
    assert np.mean((predicted - dgold) ** 2) < np.var(dgold)


def test_heads_reject_unknown_overrides_and_do_not_mutate_the_given_config():
    with pytest.raises(TypeError, match="max_epoch"):
        Stage1Head(max_epoch=3)  # typo of max_epochs: an error, not 100 silent epochs
    with pytest.raises(TypeError, match="nonlinear"):
        Stage2Head(nonlinear="tanh")
    c1, c2 = Stage1Config(), Stage2Config()
    assert Stage1Head(c1, lr=0.5).config.lr == 0.5 and c1.lr == Stage1Config().lr
    assert Stage2Head(c2, nonlinearity="tanh").config.nonlinearity == "tanh" and c2.nonlinearity == "identity"


def test_stage2_invalid_nonlinearity_raises():
    with pytest.raises(ValueError, match="nonlinearity"):
        Stage2Config(nonlinearity="relu")
    with pytest.raises(ValueError, match="nonlinearity"):
        Stage2Head(nonlinearity="relu")


def test_stage2_unfitted_and_misaligned(stage2_data):
    (m1, m2, gold), dev = stage2_data
    with pytest.raises(RuntimeError, match="not fitted"):
        Stage2Head().transform(m1)
    with pytest.raises(RuntimeError, match="not fitted"):
        Stage2Head().calibrate(np.zeros(3))
    with pytest.raises(ValueError, match="align"):
        Stage2Head(max_epochs=1).fit(m1, m2[:-1], gold[:-1], dev=dev)
    with pytest.raises(ValueError, match="align"):
        Stage2Head(max_epochs=1).fit(m1, m2, gold[:-1], dev=dev)


@pytest.mark.parametrize("variant", [dict(), dict(conv=True, nonlinearity="sigmoid", residual=False)])
def test_stage2_state_round_trip_identical(stage2_head, stage2_data, variant):
    (m1, m2, gold), dev = stage2_data
    h = stage2_head if not variant else Stage2Head(seed=1, max_epochs=2, **variant).fit(m1, m2, gold, dev=dev)
    tensors, meta = h.state()
    assert meta["kind"] == "stage2"
    clone = Stage2Head.from_state({k: v.clone() for k, v in tensors.items()}, meta)
    np.testing.assert_array_equal(clone.transform(m1), h.transform(m1))
    np.testing.assert_array_equal(clone.calibrate(clone.cosine(m1, m2)), h.calibrate(h.cosine(m1, m2)))
    t1, t2 = torch.from_numpy(m1), torch.from_numpy(m2)
    with torch.no_grad():
        np.testing.assert_array_equal(clone.net_.similarity(t1, t2).numpy(), h.net_.similarity(t1, t2).numpy())
    assert clone.config == h.config
    assert (clone.dev_pearson_, clone.best_epoch_, clone.history_) == (h.dev_pearson_, h.best_epoch_, h.history_)


def test_stage2_loss_on_hand_made_numbers():
    from mlse.heads.stage2 import stage2_loss

    # f(cos) = (1.0, 0.5, 0.0) against gold (5, 0, 2.5) / 5 = (1.0, 0.0, 0.5): squared errors 0, 0.25, 0.25 -> mean 1/6
    loss = stage2_loss(torch.tensor([1.0, 0.5, 0.0]), torch.tensor([5.0, 0.0, 2.5]) / 5)
    assert loss.item() == pytest.approx(1 / 6)
