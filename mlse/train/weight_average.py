"""A uniform running average of a model's trained weights over the later part of a run (stochastic weight averaging,
Izmailov et al. 2018, at a constant learning rate): θ̄ₙ = θ̄ₙ₋₁ + (θₙ − θ̄ₙ₋₁) / n after each step it covers.

With the learning rate constant after its warm-up (:mod:`mlse.train.loop`), a run's weights wander over a plateau
where its dev score moves by ±0.5 between evaluations; their average sits nearer the plateau's centre, which is
where weight soups of whole runs (:mod:`mlse.encoders.weight_soup`) found their gains. Only the trainable tensors are
averaged (for a LoRA student the adapters' A and B factors, each on its own; the average stays a rank-r adapter).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WeightAverage:
    """The running mean of ``model``'s trainable parameters, kept in float32 beside them."""

    def __init__(self, model):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.mean = None
        self.count = 0

    def update(self) -> None:
        """Add the current weights to the average."""
        import torch  # lazy: the command line imports the training modules before torch is needed

        with torch.no_grad():
            if self.mean is None:
                self.mean = [p.detach().float().clone() for p in self.params]
            else:
                for m, p in zip(self.mean, self.params):
                    m.add_(p.detach().float() - m, alpha=1.0 / (self.count + 1))
        self.count += 1

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The averaged weights in the model for the ``with`` block (to evaluate or save them), the trained ones after.
        Without any update yet, the model is left as it is."""
        if self.mean is None:
            yield
            return
        import torch

        with torch.no_grad():
            kept = [p.detach().clone() for p in self.params]
            for p, m in zip(self.params, self.mean):
                p.copy_(m)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, k in zip(self.params, kept):
                    p.copy_(k)
