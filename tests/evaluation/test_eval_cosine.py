"""mlse.encoders.protocol.cosine_predictions, the one cosine: evaluation, Stage-2 heads and the app's pair scores
(mlse.encoders.protocol.similarity, what the Score tab shows) all call it and give what their own copies gave."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.encoders.protocol import Scoring, cosine_predictions


def test_hand_made_numbers_and_zero_rows():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [3.0, 4.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0], [1.0, 0.0], [-3.0, -4.0]])
    # orthogonal, parallel, no direction (0, not NaN), opposite
    assert cosine_predictions(a, b) == pytest.approx([0.0, 1.0, 0.0, -1.0], abs=1e-15)
    with pytest.raises(ValueError, match="equal shape"):
        cosine_predictions(a, b[:2])


def test_properties_bounds_scale_invariance_symmetry():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50, 16)), rng.normal(size=(50, 16))
    cos = cosine_predictions(a, b)
    assert cos.dtype == np.float64 and cos.shape == (50,)
    assert np.all(np.abs(cos) <= 1.0 + 1e-15)  # an ulp past 1 at most: left there, not clipped (ties would change)
    assert np.allclose(cosine_predictions(3.0 * a, 0.5 * b), cos, atol=1e-15)
    assert np.array_equal(cosine_predictions(b, a), cos)
    same = cosine_predictions(a, a)
    assert same == pytest.approx(np.ones(50), abs=1e-15)
    assert cosine_predictions(a, b)[7] == pytest.approx(a[7] @ b[7] / np.linalg.norm(a[7]) / np.linalg.norm(b[7]))


def test_old_values_are_kept():
    rng = np.random.default_rng(29)
    rng.uniform(size=40), rng.normal(size=40)  # the draws the pinning script made first
    e1, e2 = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    e2[2] = 0
    # computed with the code before the change
    pinned = [0.24344711408300146, 0.18870447071935223, 0.0, -0.39971669191452686, 0.5175956127450081]
    assert cosine_predictions(e1, e2) == pytest.approx(pinned, abs=1e-15)


class _Unit(Scoring):
    """A model whose embeddings are given L2-normalised rows, looked up by text (uncalibrated)."""

    name, identity = "unit", "unit"

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    def encode(self, texts, batch_size=64, **_):
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def test_similarity_gives_the_dot_product_it_gave_before():
    from mlse.encoders.protocol import similarity

    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(6, 12))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    model = _Unit({f"s{i}": v for i, v in enumerate(vectors)})
    cos, calibrated = similarity(model, ["s0", "s1", "s2"], ["s3", "s4", "s2"])
    emb = vectors.astype(np.float32)
    old = np.clip(np.einsum("ij,ij->i", emb[[0, 1, 2]], emb[[3, 4, 2]]), -1.0, 1.0)  # the copy pair_scores had before
    assert cos.dtype == np.float32 and calibrated is None
    assert cos == pytest.approx(old, abs=1e-6) and cos[2] == 1.0 and np.all(np.abs(cos) <= 1.0)


def test_stage2_cosine_is_the_shared_cosine_of_its_refined_embeddings():
    torch = pytest.importorskip("torch")
    from mlse.heads.stage2 import Stage2Config, Stage2Head, Stage2Net

    rng = np.random.default_rng(0)
    m1, m2 = rng.normal(size=(20, 8)).astype(np.float32), rng.normal(size=(20, 8)).astype(np.float32)
    torch.manual_seed(0)
    head = Stage2Head(Stage2Config())
    head.dim_, head.net_ = 8, Stage2Net(8, 8, False, "identity", False)
    a, b = head.transform(m1), head.transform(m2)
    assert np.array_equal(head.cosine(m1, m2), cosine_predictions(a, b))
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)  # the copy the head had
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    assert head.cosine(m1, m2) == pytest.approx((a * b).sum(1), abs=1e-6)
