"""The supervised STS term of a fine-tuning run: scored pairs beside (or instead of) the translation pairs.

With ``sts_loss`` set, every step also draws ``sts_batch_size`` scored STS Multi MT train pairs in a random language
pairing (:mod:`mlse.data.sts_train`) and adds ``sts_weight`` x CoSENT or AnglE on the student's cosines. Method ``sts``
is the term alone. :class:`WithStsTerm` wraps any :class:`mlse.train.methods.Method`.
"""

from __future__ import annotations

import numpy as np

from mlse.data.sts_train import StsTrainRows
from mlse.train.config import FinetuneConfig
from mlse.train.student_model import tokenize


def build_sts_loss(cfg: FinetuneConfig, forward):
    """The loss module of ``cfg.sts_loss`` on the student's (autocast) ``forward``."""
    from mlse.losses.angle import AnglELoss  # lazy: the loss modules import torch
    from mlse.losses.cosent import CoSENTLoss

    return {"cosent": CoSENTLoss, "angle": AnglELoss}[cfg.sts_loss](forward)


class StsTerm:
    """Draws a batch of scored pairs (seeded) and returns the STS loss of the student on it."""

    def __init__(self, loss_fn, student, rows: StsTrainRows, batch_size: int, device: str, seed: int):
        self.loss_fn, self.student, self.rows, self.batch_size, self.device = loss_fn, student, rows, batch_size, device
        self.rng = np.random.default_rng([seed, 7])  # its own stream: the translation batches stay as they were
        self.last = float("nan")

    def loss(self):
        import torch  # lazy, as above

        batch = self.rows.sample(self.rng, self.batch_size)
        f1 = tokenize(self.student, batch.texts1, self.device)
        f2 = tokenize(self.student, batch.texts2, self.device)
        value = self.loss_fn(f1, f2, torch.from_numpy(batch.scores).to(self.device))
        self.last = float(value.detach())
        return value


class WithStsTerm:
    """A method plus the weighted STS term (``base`` None: the term alone, method ``sts``)."""

    def __init__(self, base, term: StsTerm, weight: float, batch_size: int):
        self.base, self.term, self.weight = base, term, weight
        own = 2 * term.batch_size / max(1, batch_size)
        self.sentences_per_pair = (base.sentences_per_pair if base is not None else 0) + own

    def batch_loss(self, idx: np.ndarray):
        sts = self.term.loss()  # first: the dropout draws of the translation batch come after it
        return sts if self.base is None else self.base.batch_loss(idx) + self.weight * sts

    def after_step(self, step: int, total_steps: int) -> None:
        if self.base is not None:
            self.base.after_step(step, total_steps)

    def record(self) -> dict:
        return {**(self.base.record() if self.base is not None else {}), "sts_loss": self.term.last}

    def final_metrics(self) -> dict:
        return {**(self.base.final_metrics() if self.base is not None else {}), "sts_rows": len(self.term.rows)}
