"""Stage 2 (the seed's own model): refine Stage-1 meaning embeddings with human STS scores.

A two-layer network g is applied to each sentence's meaning embedding; the loss (:func:`stage2_loss`) is::

    L = 1/B sum_i ( f(cos(g(m1_i), g(m2_i))) - gold_i / 5 )^2

where f is the identity, or a sigmoid / tanh of a learned scale and shift of the cosine (``f(c) = sigmoid(a c + b)``).
Variant: a 1-D convolution over the embedding dimensions before g ("conv prelayer").

Choices the seed leaves open, made here (and saved with the head):
- g(m) = m + W2 relu(W1 m + b1) + b2 with W2, b2 zero at start, so training starts at the Stage-1 similarity and early
  stopping can only keep an improvement (``residual=False``: the plain two-layer net).
- Conv prelayer: Conv1d(1 -> 1 channel, kernel 5, same padding) over the d embedding values, with a skip connection.
- Adam, lr 1e-3, batch 128, up to 30 epochs, early stopping on dev Pearson of the cosine (patience 3), best epoch kept.
- The calibrated 0-5 score is an isotonic regression of gold on the cosine, fitted on dev.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mlse.calibration.isotonic import IsotonicMap
from mlse.encoders.protocol import cosine_predictions
from mlse.evaluation.correlation import pearson
from mlse.heads.choices import NONLINEARITIES
from mlse.heads.fit import EarlyStopping, as_tensor, check_fitted, fit_epochs, train_epoch
from mlse.stop_signal import StopSignal

log = logging.getLogger(__name__)

# what a fitted head learned besides its weights and calibration, saved under these names (the attributes end in "_")
_SAVED = ("dim", "best_epoch", "dev_pearson", "history")


def stage2_loss(similarity: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE between ``f(cos)`` of each pair (:meth:`Stage2Net.similarity`, [B]) and its gold score / 5 ([B])."""
    return F.mse_loss(similarity, target)


class Stage2Net(nn.Module):
    def __init__(self, dim: int, hidden: int, conv: bool, nonlinearity: str, residual: bool):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, kernel_size=5, padding=2) if conv else None
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.residual = residual
        if residual:
            nn.init.zeros_(self.fc2.weight)
            nn.init.zeros_(self.fc2.bias)
        self.nonlinearity = nonlinearity
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.shift = nn.Parameter(torch.tensor(0.0))

    def embed(self, m: torch.Tensor) -> torch.Tensor:
        h = m  # [B, d]
        if self.conv is not None:
            h = h + self.conv(h.unsqueeze(1)).squeeze(1)  # [B, 1, d] -> [B, d]
        out = self.fc2(F.relu(self.fc1(h)))  # [B, d]
        return h + out if self.residual else out

    def similarity(self, m1: torch.Tensor, m2: torch.Tensor) -> torch.Tensor:
        """f(cos) on the gold/5 scale: [B]."""
        cos = F.cosine_similarity(self.embed(m1), self.embed(m2), dim=-1)
        if self.nonlinearity == "identity":
            return cos
        return getattr(torch, self.nonlinearity)(self.scale * cos + self.shift)  # torch.sigmoid / torch.tanh


@dataclass
class Stage2Config:
    conv: bool = False
    nonlinearity: str = "identity"
    residual: bool = True
    hidden: int = 0  # 0: same as the embedding dimension
    lr: float = 1e-3
    batch_size: int = 128
    max_epochs: int = 30
    patience: int = 3
    seed: int = 0

    def __post_init__(self):
        if self.nonlinearity not in NONLINEARITIES:
            raise ValueError(f"nonlinearity must be one of {NONLINEARITIES}, got {self.nonlinearity!r}")


class Stage2Head:
    """scikit-learn style: ``fit(M1, M2, gold, dev=...) -> self``; ``transform`` gives refined embeddings."""

    def __init__(self, config: Stage2Config | None = None, **overrides):
        # a copy (the caller's config is not mutated), validated; an unknown override is a TypeError
        self.config = replace(config or Stage2Config(), **overrides)

    def fit(
        self,
        M1: np.ndarray,
        M2: np.ndarray,
        gold: np.ndarray,
        *,
        dev: tuple[np.ndarray, np.ndarray, np.ndarray],
        progress: Callable[[dict], None] | None = None,
        stop: StopSignal | None = None,
    ) -> Stage2Head:
        """``M1``, ``M2``: [n, d] meaning embeddings of the two sides; ``gold``: [n] scores on the 0-5 scale. ``stop``:
        as for :meth:`mlse.heads.stage1.Stage1Head.fit`."""
        cfg = self.config
        M1, M2, gold = np.asarray(M1, np.float32), np.asarray(M2, np.float32), np.asarray(gold, np.float32)
        if M1.shape != M2.shape or M1.ndim != 2 or len(gold) != len(M1):
            raise ValueError(f"M1 {M1.shape}, M2 {M2.shape} and gold {gold.shape} must align")
        self.dim_ = M1.shape[1]
        torch.manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed)
        self.net_ = Stage2Net(self.dim_, cfg.hidden or self.dim_, cfg.conv, cfg.nonlinearity, cfg.residual)
        optimiser = torch.optim.Adam(self.net_.parameters(), lr=cfg.lr)
        a, b, y = as_tensor(M1), as_tensor(M2), as_tensor(gold / 5.0)
        dev_m1, dev_m2, dev_gold = (np.asarray(x, np.float32) for x in dev)

        stopping = EarlyStopping(
            self.net_,
            mode="max",
            min_delta=1e-5,
            patience=cfg.patience,
            stop=stop,
            best=self._dev_pearson(dev_m1, dev_m2, dev_gold),
        )
        self.history_ = [{"epoch": 0, "train_loss": None, "dev_pearson": stopping.best}]

        def batch_loss(rows: np.ndarray) -> torch.Tensor:
            idx = torch.from_numpy(rows)
            return stage2_loss(self.net_.similarity(a[idx], b[idx]), y[idx])

        def run_epoch(epoch: int) -> dict:
            self.net_.train()
            train_loss = train_epoch(optimiser, rng.permutation(len(y)), cfg.batch_size, batch_loss)
            score = self._dev_pearson(dev_m1, dev_m2, dev_gold)
            return {"epoch": epoch, "train_loss": train_loss, "dev_pearson": score}

        fit_epochs(cfg.max_epochs, run_epoch, "dev_pearson", stopping, self.history_, progress)
        self.stopped_ = stopping.stopped
        stopping.restore()
        self.dev_pearson_, self.best_epoch_ = stopping.best, stopping.best_epoch
        # isotonic map cosine -> 0-5 on dev (mlse.calibration.isotonic, the same map backbones get)
        self.calibration_ = IsotonicMap.fit(self.cosine(dev_m1, dev_m2), dev_gold)
        log.info("stage 2: best dev Pearson %.4f at epoch %d", self.dev_pearson_, self.best_epoch_)
        return self

    @torch.no_grad()
    def _dev_pearson(self, m1: np.ndarray, m2: np.ndarray, gold: np.ndarray) -> float:
        self.net_.eval()
        return pearson(self.cosine(m1, m2), gold)

    @torch.no_grad()
    def transform(self, M: np.ndarray) -> np.ndarray:
        """Refined embeddings [n, d] (their cosine is the Stage-2 similarity)."""
        check_fitted(self)
        return self.net_.embed(as_tensor(M)).numpy()

    def cosine(self, M1: np.ndarray, M2: np.ndarray) -> np.ndarray:
        """Cosine of the refined embeddings of each pair: [n] float64."""
        return cosine_predictions(self.transform(M1), self.transform(M2))

    def calibrate(self, cos: np.ndarray) -> np.ndarray:
        """Cosine -> score on the human 0-5 scale (isotonic, fitted on dev)."""
        check_fitted(self)
        return self.calibration_(cos)

    # -- persistence ------------------------------------------------------------------------------------------------
    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        check_fitted(self)
        meta = {"kind": "stage2", "config": asdict(self.config), **{k: getattr(self, f"{k}_") for k in _SAVED}}
        meta["calibration"] = self.calibration_.to_dict()
        return dict(self.net_.state_dict()), meta

    @classmethod
    def from_state(cls, tensors: dict[str, torch.Tensor], meta: dict) -> Stage2Head:
        head = cls(Stage2Config(**meta["config"]))
        cfg = head.config
        for k in _SAVED:
            setattr(head, f"{k}_", meta[k])
        head.calibration_ = IsotonicMap.from_dict(meta["calibration"])
        head.net_ = Stage2Net(head.dim_, cfg.hidden or head.dim_, cfg.conv, cfg.nonlinearity, cfg.residual).eval()
        head.net_.load_state_dict(tensors)
        return head
