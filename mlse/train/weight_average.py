"""A uniform running average of a model's trained weights over the later part of a run (stochastic weight averaging,
Izmailov et al. 2018, at a constant learning rate): θ̄ₙ = θ̄ₙ₋₁ + (θₙ − θ̄ₙ₋₁) / n after each step it covers.

At a constant learning rate a run's weights wander over a plateau; their average sits nearer its centre. See
docs/training.md. The average is torch's ``AveragedModel`` over the trainable parameters alone (for a LoRA student its
A and B factors, each on its own: the average stays a rank-r adapter).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WeightAverage:
    """The running mean of ``model``'s trainable parameters, in a copy of them beside the model (their dtype)."""

    def __init__(self, model):
        from torch import nn
        from torch.optim.swa_utils import AveragedModel  # lazy: the command line imports the training modules early

        self.params = [p for p in model.parameters() if p.requires_grad]
        # an nn.Module whose parameters are the params themselves (not copies): what AveragedModel copies and reads
        self._view = nn.Module()
        self._view.params = nn.ParameterList(self.params)
        self._average = AveragedModel(self._view).requires_grad_(False)
        self.mean = list(self._average.module.parameters())  # [same shapes as params], valid once count > 0

    @property
    def count(self) -> int:
        """How many weights the average holds (0: none yet)."""
        return int(self._average.n_averaged)

    def update(self) -> None:
        """Add the current weights to the average."""
        self._average.update_parameters(self._view)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The averaged weights in the model for the ``with`` block (to evaluate or save them), the trained ones after.
        Without any update yet, the model is left as it is."""
        if self.count == 0:
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
