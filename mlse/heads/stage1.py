"""Stage 1: split a frozen sentence embedding into a *meaning* and a *language* embedding (Tiyajamorn et al. 2021).

Trained on translation pairs only: two linear d x d maps (meaning m, language l) and a language-ID layer on l,
optionally after a fully connected *prelayer*. The loss, as the authors' public code computes it, with x, y a
translation pair in languages a, b, x', y' random sentences of languages a, b and e the frozen input embedding:

* meaning:        1 - cos(m(x), m(y))                                   (translations mean the same)
* negative:       max(0, cos(m(x), m(x')) - margin), likewise for y      (same language, other meaning)
* reconstruction: MSE(l(x) + m(x), e(x)), likewise for y                 (nothing is lost in the split)
* language ID:    CE(W l(x), a), likewise for y                          (l carries the language)
* language:       1 - cos(l(x), l(x')), likewise for y                   (same language, same l)

Batch means, summed unweighted as in the paper (:class:`Stage1Weights` weighs them for ablations). Choices the paper
leaves open (recorded in the saved config):
- x', y' are drawn uniformly per item from that language's training sentences, fresh each step; for the dev loss
  once, with a fixed seed, so that early stopping compares like with like.
- The reconstruction target is e also with a prelayer (the prelayer output would let the prelayer collapse to zero).
- The prelayer is Linear(d, d) + Tanh. Early stopping on the dev loss after ``patience`` epochs, keeping the best.
- ``lr`` 1e-3, not the paper's 1e-4: with ~100x fewer pairs per epoch than the paper, 1e-4 had not converged in 100
  epochs. ``lr=1e-4`` restores the paper's setting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mlse.errors import MlseError
from mlse.heads.fit import EarlyStopping, as_tensor, check_fitted, fit_epochs, train_epoch
from mlse.stop_signal import StopSignal

log = logging.getLogger(__name__)

# what a fitted head learned besides its weights, saved under these names (the attributes end in "_")
_SAVED = ("languages", "dim", "best_epoch", "dev_loss", "n_train", "n_dev", "history")


# ------------------------------------------------------------------------------------------------------------- loss
@dataclass(frozen=True)
class Stage1Weights:
    meaning: float = 1.0
    negative: float = 1.0
    reconstruction: float = 1.0
    language_id: float = 1.0
    language: float = 1.0
    margin: float = 0.0  # CosineEmbeddingLoss margin for the negative term


def _pull(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (1.0 - F.cosine_similarity(a, b, dim=-1)).mean()


def _push(a: torch.Tensor, b: torch.Tensor, margin: float) -> torch.Tensor:
    return (F.cosine_similarity(a, b, dim=-1) - margin).clamp(min=0).mean()


def stage1_loss_terms(
    e: tuple[torch.Tensor, torch.Tensor],  # inputs e(x), e(y): [B, d] each
    m: tuple[torch.Tensor, torch.Tensor],  # meaning m(x), m(y): [B, d]
    lang_emb: tuple[torch.Tensor, torch.Tensor],  # language l(x), l(y): [B, d]
    m_rand: tuple[torch.Tensor, torch.Tensor],  # meaning of random same-language sentences x', y': [B, d]
    l_rand: tuple[torch.Tensor, torch.Tensor],  # language of x', y': [B, d]
    logits: tuple[torch.Tensor, torch.Tensor],  # language-ID logits of l(x), l(y): [B, n_langs]
    langs: tuple[torch.Tensor, torch.Tensor],  # language ids of x, y: [B] int64
    weights: Stage1Weights = Stage1Weights(),
) -> dict[str, torch.Tensor]:
    """The five terms of the module docstring, each weighted, and their sum under ``"total"`` (scalars)."""
    terms = {
        "meaning": _pull(m[0], m[1]),
        "negative": _push(m[0], m_rand[0], weights.margin) + _push(m[1], m_rand[1], weights.margin),
        "reconstruction": F.mse_loss(lang_emb[0] + m[0], e[0]) + F.mse_loss(lang_emb[1] + m[1], e[1]),
        "language_id": F.cross_entropy(logits[0], langs[0]) + F.cross_entropy(logits[1], langs[1]),
        "language": _pull(lang_emb[0], l_rand[0]) + _pull(lang_emb[1], l_rand[1]),
    }
    terms = {k: v * getattr(weights, k) for k, v in terms.items()}
    terms["total"] = sum(terms.values())
    return terms


# ------------------------------------------------------------------------------------------------------------ model
class Stage1Net(nn.Module):
    def __init__(self, dim: int, n_langs: int, prelayer: bool = False):
        super().__init__()
        self.prelayer = nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) if prelayer else nn.Identity()
        self.meaning = nn.Linear(dim, dim)
        self.language = nn.Linear(dim, dim)
        self.language_id = nn.Linear(dim, n_langs)

    def forward(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.prelayer(e)  # [B, d]
        return self.meaning(h), self.language(h)  # [B, d], [B, d]


@dataclass
class Stage1Config:
    prelayer: bool = False
    lr: float = 1e-3  # the paper's 1e-4 assumes ~100x more pairs per epoch; see the module docstring
    batch_size: int = 512
    max_epochs: int = 100
    patience: int = 10
    dev_fraction: float = 0.2
    seed: int = 0
    weights: Stage1Weights = field(default_factory=Stage1Weights)


class Stage1Head:
    """scikit-learn style: ``fit(...) -> self``; learned attributes end in ``_``; ``transform`` gives meaning."""

    def __init__(self, config: Stage1Config | None = None, **overrides):
        # a copy (the caller's config is not mutated); an unknown override is a TypeError, not silently ignored
        self.config = replace(config or Stage1Config(), **overrides)

    # -- training ---------------------------------------------------------------------------------------------------
    def fit(
        self,
        X_a: np.ndarray,
        X_b: np.ndarray,
        lang_a: Sequence[str],
        lang_b: Sequence[str],
        *,
        progress: Callable[[dict], None] | None = None,
        stop: StopSignal | None = None,
    ) -> Stage1Head:
        """Train on translation pairs: row i of ``X_a`` [n, d] translates row i of ``X_b`` [n, d].

        ``lang_a[i]`` / ``lang_b[i]`` name each side's language. ``progress`` gets one dict per epoch. ``stop`` is
        asked after every epoch (:mod:`mlse.heads.fit`; ``stopped_`` is then True).
        """
        cfg = self.config
        X_a, X_b = np.asarray(X_a, np.float32), np.asarray(X_b, np.float32)
        if X_a.shape != X_b.shape or X_a.ndim != 2 or len(X_a) != len(lang_a) or len(X_b) != len(lang_b):
            raise ValueError(f"X_a {X_a.shape}, X_b {X_b.shape}, lang_a {len(lang_a)}, lang_b {len(lang_b)} must align")
        if len(X_a) < 10:
            raise ValueError(f"Stage 1 needs at least 10 translation pairs, got {len(X_a)}")
        self.languages_ = sorted(set(lang_a) | set(lang_b))
        code = {lang: i for i, lang in enumerate(self.languages_)}
        ya = np.array([code[x] for x in lang_a], dtype=np.int64)
        yb = np.array([code[x] for x in lang_b], dtype=np.int64)
        self.dim_ = X_a.shape[1]

        rng = np.random.default_rng(cfg.seed)
        torch.manual_seed(cfg.seed)
        order = rng.permutation(len(X_a))
        n_dev = max(1, int(round(len(order) * cfg.dev_fraction)))
        dev, train = order[:n_dev], order[n_dev:]

        # Pool of training sentences per language, for the random same-language partners.
        pool_emb = as_tensor(np.concatenate([X_a[train], X_b[train]]))  # [2n_train, d]
        pool_lang = np.concatenate([ya[train], yb[train]])
        by_lang = {k: np.flatnonzero(pool_lang == k) for k in range(len(self.languages_))}

        def partners(langs: np.ndarray, gen: np.random.Generator) -> torch.Tensor:
            idx = np.empty(len(langs), dtype=np.int64)
            for k in np.unique(langs):
                where = np.flatnonzero(langs == k)
                candidates = by_lang[k] if len(by_lang[k]) else np.flatnonzero(pool_lang >= 0)
                idx[where] = candidates[gen.integers(0, len(candidates), len(where))]
            return pool_emb[idx]  # [B, d]

        self.net_ = Stage1Net(self.dim_, len(self.languages_), cfg.prelayer)
        optimiser = torch.optim.Adam(self.net_.parameters(), lr=cfg.lr)
        ea, eb = as_tensor(X_a), as_tensor(X_b)
        ta, tb = torch.from_numpy(ya), torch.from_numpy(yb)
        dev_gen = np.random.default_rng(cfg.seed + 1)
        dev_partners = (partners(ya[dev], dev_gen), partners(yb[dev], dev_gen))

        stopping = EarlyStopping(self.net_, mode="min", min_delta=1e-6, patience=cfg.patience, stop=stop)
        started = time.perf_counter()

        def batch_loss(b: np.ndarray) -> torch.Tensor:
            return self._terms(ea[b], eb[b], partners(ya[b], rng), partners(yb[b], rng), ta[b], tb[b])["total"]

        def run_epoch(epoch: int) -> dict:
            self.net_.train()
            train_loss = train_epoch(optimiser, rng.permutation(train), cfg.batch_size, batch_loss)
            self.net_.eval()
            with torch.no_grad():
                dev_terms = self._terms(ea[dev], eb[dev], *dev_partners, ta[dev], tb[dev])
            return {
                "epoch": epoch,
                "train_loss": train_loss,
                "dev_loss": float(dev_terms["total"]),
                "dev_terms": {k: float(v) for k, v in dev_terms.items() if k != "total"},
                "seconds": time.perf_counter() - started,
            }

        self.history_ = []
        fit_epochs(cfg.max_epochs, run_epoch, "dev_loss", stopping, self.history_, progress)
        self.stopped_ = stopping.stopped
        if stopping.best_state is None:  # every dev loss was NaN: nothing worth keeping
            raise MlseError("Stage 1 diverged (dev loss is NaN from the first epoch): lower --lr or check the inputs")
        stopping.restore()
        self.dev_loss_, self.best_epoch_ = stopping.best, stopping.best_epoch
        self.n_train_, self.n_dev_ = len(train), len(dev)
        log.info("stage 1: best dev loss %.4f at epoch %d of %d", self.dev_loss_, self.best_epoch_, len(self.history_))
        return self

    def _terms(self, ex, ey, ex_rand, ey_rand, lx, ly) -> dict[str, torch.Tensor]:
        net = self.net_
        meaning, language = net(torch.cat([ex, ey, ex_rand, ey_rand]))  # [4B, d] each
        mx, my, mxr, myr = meaning.chunk(4)  # [B, d] each
        lx_emb, ly_emb, lxr, lyr = language.chunk(4)
        logits = net.language_id(torch.cat([lx_emb, ly_emb])).chunk(2)  # [B, n_langs] each
        return stage1_loss_terms(
            (ex, ey), (mx, my), (lx_emb, ly_emb), (mxr, myr), (lxr, lyr), logits, (lx, ly), self.config.weights
        )

    # -- inference --------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def transform(self, X: np.ndarray) -> np.ndarray:
        """Meaning embeddings [n, d]."""
        check_fitted(self)
        return self.net_(as_tensor(X))[0].numpy()

    @torch.no_grad()
    def language_embedding(self, X: np.ndarray) -> np.ndarray:
        """Language embeddings [n, d]."""
        check_fitted(self)
        return self.net_(as_tensor(X))[1].numpy()

    @torch.no_grad()
    def predict_language(self, X: np.ndarray) -> list[str]:
        check_fitted(self)
        logits = self.net_.language_id(self.net_(as_tensor(X))[1])  # [n, n_langs]
        return [self.languages_[i] for i in logits.argmax(1).tolist()]

    # -- persistence ------------------------------------------------------------------------------------------------
    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON-able metadata) for saving."""
        check_fitted(self)
        meta = {"kind": "stage1", "config": asdict(self.config), **{k: getattr(self, f"{k}_") for k in _SAVED}}
        return dict(self.net_.state_dict()), meta

    @classmethod
    def from_state(cls, tensors: dict[str, torch.Tensor], meta: dict) -> Stage1Head:
        config = dict(meta["config"])  # asdict of a Stage1Config: its weights are a dict too
        config["weights"] = Stage1Weights(**config.get("weights", {}))
        head = cls(Stage1Config(**config))
        for k in _SAVED:
            setattr(head, f"{k}_", meta[k])
        head.net_ = Stage1Net(head.dim_, len(head.languages_), head.config.prelayer).eval()
        head.net_.load_state_dict(tensors)
        return head
