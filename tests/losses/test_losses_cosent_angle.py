"""CoSENT (Su 2022) and AnglE (Li & Li 2023): the formulas on hand-computed numbers, then what they are for."""

from __future__ import annotations

import math

import pytest
import torch

from mlse.losses.angle import AnglELoss, angle_difference, angle_loss
from mlse.losses.cosent import CoSENTLoss, cosent_loss, ranking_loss


def test_ranking_loss_by_hand():
    s = torch.tensor([0.5, 0.9, 0.1])  # the model's similarities
    y = torch.tensor([3.0, 1.0, 2.0])  # gold: pair 0 > pair 2 > pair 1
    # ordered pairs (i, j) with y_i > y_j: (0, 1) s_1 - s_0 = 0.4; (0, 2) -0.4; (2, 1) 0.8
    expected = math.log(1 + math.exp(20 * 0.4) + math.exp(20 * -0.4) + math.exp(20 * 0.8))
    assert ranking_loss(s, y).item() == pytest.approx(expected, rel=1e-6)
    assert ranking_loss(s, y, scale=1.0).item() == pytest.approx(
        math.log(1 + math.exp(0.4) + math.exp(-0.4) + math.exp(0.8)), rel=1e-6
    )


def test_only_the_order_of_the_gold_scores_counts_and_ties_are_not_compared():
    s = torch.tensor([0.2, 0.7, 0.4])
    assert ranking_loss(s, torch.tensor([0.0, 5.0, 1.0])).item() == pytest.approx(
        ranking_loss(s, torch.tensor([1.0, 3.0, 2.0])).item()
    )  # same order, other values: same loss
    assert ranking_loss(s, torch.tensor([2.0, 2.0, 2.0])).item() == 0.0  # all tied: log(1 + 0 terms)
    well_ordered = ranking_loss(torch.tensor([0.1, 0.9, 0.5]), torch.tensor([0.0, 5.0, 2.5])).item()
    assert 0 < well_ordered < 1e-3  # every higher-rated pair scored higher by a margin: almost nothing to learn


def test_cosent_uses_the_cosine_and_its_gradient_raises_the_underrated_pair():
    e1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    e2 = torch.tensor([[1.0, 1.0], [1.0, 0.1]], requires_grad=True)  # cosines 0.707 and 0.995
    y = torch.tensor([5.0, 0.0])  # but pair 0 is the similar one
    loss = cosent_loss(e1, e2, y)
    cos = torch.nn.functional.cosine_similarity(e1, e2.detach(), dim=-1)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(20 * (cos[1] - cos[0]).item())), rel=1e-5)
    loss.backward()
    # a gradient step moves pair 0's second vector towards [1, 0] (its y component shrinks): its cosine rises
    assert e2.grad[0, 1] > 0 and e2.grad[1, 1] < 0
    assert cosent_loss(e1 * 3, e2.detach() * 0.5, y).item() == pytest.approx(loss.item(), rel=1e-5)  # scale-free


def test_bad_shapes_and_scales_are_refused():
    with pytest.raises(ValueError, match="one length"):
        ranking_loss(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="scale"):
        ranking_loss(torch.zeros(3), torch.zeros(3), scale=0)
    with pytest.raises(ValueError, match="same shape"):
        cosent_loss(torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(2))
    with pytest.raises(ValueError, match="d even"):
        angle_difference(torch.zeros(2, 3), torch.zeros(2, 3))


def test_angle_difference_by_hand():
    z = torch.tensor([[1.0, 2.0, 0.5, -1.0]])  # z = (1 + 0.5i, 2 - 1i)
    assert angle_difference(z, 3 * z).item() == pytest.approx(0.0, abs=1e-6)  # same direction
    assert angle_difference(z, -z).item() == pytest.approx(math.pi, abs=1e-6)
    a, b = z.chunk(2, dim=-1)
    iz = torch.cat([-b, a], dim=-1)  # i * z: every component turned by 90 degrees
    assert angle_difference(z, iz).item() == pytest.approx(math.pi / 2, abs=1e-6)
    assert torch.nn.functional.cosine_similarity(z, iz).item() == pytest.approx(0.0, abs=1e-6)
    # one complex component: z = 1, w = 1 + i -> <z, w> = 1 - i, |arg| = pi / 4
    assert angle_difference(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 1.0]])).item() == pytest.approx(
        math.pi / 4, abs=1e-6
    )


def test_angle_loss_is_the_weighted_sum_of_its_two_rankings():
    torch.manual_seed(0)
    e1, e2, y = torch.randn(6, 8), torch.randn(6, 8), torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    cos_part = cosent_loss(e1, e2, y)
    angle_part = ranking_loss(-angle_difference(e1, e2) / math.pi, y)
    assert angle_loss(e1, e2, y).item() == pytest.approx((cos_part + angle_part).item(), rel=1e-6)
    assert angle_loss(e1, e2, y, cos_weight=0.0, angle_weight=2.0).item() == pytest.approx(
        2 * angle_part.item(), rel=1e-6
    )


@pytest.mark.parametrize("make", [lambda m: CoSENTLoss(m), lambda m: AnglELoss(m)])
def test_the_modules_embed_with_the_model_and_training_lowers_the_loss(make):
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 8)

    def model(features):  # the sentence-transformers call convention
        return {"sentence_embedding": layer(features["x"])}

    loss_fn = make(model)
    x1, x2 = torch.randn(16, 8), torch.randn(16, 8)
    y = torch.rand(16) * 5
    opt = torch.optim.SGD(layer.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn({"x": x1}, {"x": x2}, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
