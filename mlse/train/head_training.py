"""Train the Stage 1 and Stage 2 heads on cached embeddings of a frozen backbone, and save them as scorers.

Data flow: parallel / STS data -> backbone embeddings (through the embedding cache) -> head.fit -> Scorer.save.
``backend`` runs a backbone given by name on torch, onnx or onnx-int8.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mlse.data.bitext import load_filtered_bitext, same_seed
from mlse.data.flores import load_flores
from mlse.data.pairs import PROBE_LANGS, SEED_PARALLEL_PAIRS, STAGE2_PAIRS
from mlse.data.portable import data_hashes, data_identity, portable_hashes, portable_text
from mlse.data.stsb import load_sts
from mlse.errors import DataError, MlseError
from mlse.evaluation.runners import encode_lookup
from mlse.heads.scorer import Scorer
from mlse.models import load_model
from mlse.stop_signal import Stopped, StopSignal, check, start_budget
from mlse.train.config import Stage1Settings, Stage2Settings

log = logging.getLogger(__name__)


@dataclass
class ParallelEmbeddings:
    X_a: np.ndarray  # [n, d]
    X_b: np.ndarray  # [n, d]
    lang_a: list[str]
    lang_b: list[str]
    info: dict = field(default_factory=dict)


def stage1_data(
    encoder,
    *,
    pairs: Sequence[str] = SEED_PARALLEL_PAIRS,
    max_pairs: int | None = Stage1Settings.max_pairs,
    data_dir=None,
    seed: int = 0,
    stop: StopSignal | None = None,
) -> ParallelEmbeddings:
    """Contamination-filtered translation pairs of every requested pair, embedded by the backbone.

    Each language pair is capped at ``max_pairs`` (a seeded subset) *after* filtering, so every pair keeps its share.
    ``stop`` is asked between language pairs and between encoding chunks (:class:`Stopped` ends it)."""
    if not pairs:
        raise DataError("no parallel pairs given for Stage 1")
    bitext = load_filtered_bitext(
        pairs,
        max_pairs=max_pairs or None,
        sample_seed=same_seed(seed),
        data_dir=data_dir,
        stop=stop,
        label="stage 1 data",
    )
    lookup = encode_lookup(encoder, bitext.src + bitext.tgt, stop=stop)
    X_a = np.stack([lookup[t] for t in bitext.src])
    X_b = np.stack([lookup[t] for t in bitext.tgt])
    info = {**bitext.info, "n_pairs": len(bitext.src)}
    return ParallelEmbeddings(X_a, X_b, bitext.src_lang, bitext.tgt_lang, info)


def sts_embeddings(
    encoder, pairs: Sequence[str], split: str, data_dir=None, stop: StopSignal | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(E1 [n, d], E2 [n, d], gold [n], data hashes) over the concatenation of the STS pairs."""
    check(stop, f"loading STS {split} data")
    datasets = [load_sts(p, split, data_dir) for p in pairs]
    lookup = encode_lookup(encoder, [t for ds in datasets for t in (*ds.s1, *ds.s2)], stop=stop)
    e1 = np.stack([lookup[t] for ds in datasets for t in ds.s1])
    e2 = np.stack([lookup[t] for ds in datasets for t in ds.s2])
    gold = np.concatenate([ds.scores for ds in datasets]).astype(np.float32)
    hashes = data_hashes((p for ds in datasets for p in ds.sources), data_dir)
    return e1, e2, gold, hashes


def probe_texts(flores: dict[str, list[str]]) -> list[str]:
    """The language probe's texts: FLORES-200 devtest of every probed language, language by language."""
    return [t for sents in flores.values() for t in sents]


def language_probe(
    scorer, *, langs: Sequence[str] = PROBE_LANGS, data_dir=None, seed: int = 0, stop: StopSignal | None = None
) -> dict[str, float]:
    """Accuracy (%) of a linear language-ID probe on backbone, meaning and language embeddings.

    FLORES-200 devtest is multi-way parallel: the probe trains on the first half of the sentence ids and is tested on
    the other half, so no test sentence's meaning was seen in training. ``stop`` is asked while encoding."""
    from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn is slow to import; only the probe

    flores = load_flores(list(langs), data_dir)
    n = len(next(iter(flores.values())))
    texts = probe_texts(flores)
    labels = np.repeat(np.arange(len(flores)), n)
    is_train = np.tile(np.arange(n) < n // 2, len(flores))
    encode_lookup(scorer.backbone, texts, stop=stop)  # stoppable; fills the cache encode_parts reads
    parts = scorer.encode_parts(texts)
    out = {"chance": 100.0 / len(flores), "n_langs": len(flores)}
    for kind in ("backbone", "meaning", "language"):
        if kind not in parts:
            continue
        probe = LogisticRegression(max_iter=2000, random_state=seed).fit(parts[kind][is_train], labels[is_train])
        out[kind] = 100.0 * float(probe.score(parts[kind][~is_train], labels[~is_train]))
    return out


def train_stage1(
    backbone: str,
    *,
    out: str | Path,
    prelayer: bool = Stage1Settings.prelayer,
    pairs: Sequence[str] = SEED_PARALLEL_PAIRS,
    max_pairs: int | None = Stage1Settings.max_pairs,
    data_dir=None,
    seed: int = Stage1Settings.seed,
    probe: bool = Stage1Settings.probe,
    progress: Callable[[dict], None] | None = None,
    stop: StopSignal | None = None,
    backend: str = Stage1Settings.backend,
    **config,
):
    """Fit a Stage-1 head on ``backbone`` and save the scorer ``backbone+s1`` to ``out``.

    ``stop`` is asked in every phase: while loading or encoding it raises :class:`~mlse.stop_signal.Stopped`
    (nothing saved); during training the best epoch is saved, marked partial with the reason (``"budget"`` or
    ``"stopped"``). The budget starts once the data and probe texts are encoded; only the Stop button skips the probe.
    """
    from mlse.heads.stage1 import Stage1Head  # lazy: the heads are torch modules (torch costs seconds to import)

    encoder = load_model(backbone, backend=backend) if isinstance(backbone, (str, Path)) else backbone
    if hasattr(encoder, "stage1"):
        raise MlseError(f"{encoder.name} already has heads: give Stage 1 a plain backbone")
    check(stop, "loading the backbone")
    data = stage1_data(encoder, pairs=pairs, max_pairs=max_pairs, data_dir=data_dir, seed=seed, stop=stop)
    if probe:  # the probe's FLORES texts are one-off encoding too: encoded (and cached) before the budget starts
        encode_lookup(encoder, probe_texts(load_flores(list(PROBE_LANGS), data_dir)), stop=stop)
    start_budget(stop)  # the one-off encoding is done: a job's budget counts from here (mlse.stop_signal)
    head = Stage1Head(prelayer=prelayer, seed=seed, **config).fit(
        data.X_a, data.X_b, data.lang_a, data.lang_b, progress=progress, stop=stop
    )
    # why training ended early: "budget" (time is up) or "stopped" (the Stop button); None: patience or max epochs
    ended_by = (stop.reason() or "stopped") if head.stopped_ and stop is not None else None
    scorer = Scorer(encoder, stage1=head)
    metrics = {
        "stage1_dev_loss": head.dev_loss_,
        "stage1_best_epoch": head.best_epoch_,
        "stage1_epochs": len(head.history_),
        "stage1_stopped": head.stopped_,
    }
    partial = {"phase": "training", "reason": ended_by, "epochs": len(head.history_)} if ended_by else None
    if probe and ended_by != "stopped":
        button = None if stop is None else StopSignal(stop.event, also=stop.also)
        try:
            metrics["language_probe"] = language_probe(scorer, data_dir=data_dir, seed=seed, stop=button)
        except Stopped:
            partial = {"phase": "language probe (skipped)", "reason": "stopped", "epochs": len(head.history_)}
    training = {
        "stage1": {"pairs": data.info["pairs"], "n_pairs": data.info["n_pairs"], "max_pairs": max_pairs, "seed": seed}
    }
    return _save(scorer, out, training, data.info["data"], metrics, partial)


def train_stage2(
    stage1: str | Path,
    *,
    out: str | Path,
    conv: bool = Stage2Settings.conv,
    nonlinearity: str = Stage2Settings.nonlinearity,
    pairs: Sequence[str] = STAGE2_PAIRS,
    data_dir=None,
    seed: int = Stage2Settings.seed,
    progress: Callable[[dict], None] | None = None,
    stop: StopSignal | None = None,
    backend: str = Stage2Settings.backend,
    **config,
):
    """Fit a Stage-2 head on the meaning embeddings of a saved Stage-1 scorer; save ``...+s2`` to ``out``.

    ``stop`` as for :func:`train_stage1`; ``backend``: the runtime of the Stage-1 scorer's backbone."""
    from mlse.heads.stage2 import Stage2Head  # lazy: the heads are torch modules (torch costs seconds to import)

    base = load_model(str(stage1), backend=backend) if isinstance(stage1, (str, Path)) else stage1
    if getattr(base, "stage1", None) is None:
        raise MlseError(f"{getattr(base, 'name', stage1)} has no Stage 1 head: train stage1 first")
    e1, e2, gold, hashes = sts_embeddings(base.backbone, pairs, "train", data_dir, stop)
    d1, d2, dgold, dev_hashes = sts_embeddings(base.backbone, pairs, "dev", data_dir, stop)
    start_budget(stop)  # the one-off encoding is done: a job's budget counts from here (mlse.stop_signal)
    s1 = base.stage1
    head = Stage2Head(conv=conv, nonlinearity=nonlinearity, seed=seed, **config).fit(
        s1.transform(e1),
        s1.transform(e2),
        gold,
        dev=(s1.transform(d1), s1.transform(d2), dgold),
        progress=progress,
        stop=stop,
    )
    scorer = Scorer(base.backbone, stage1=s1, stage2=head)
    training = dict(base.metadata.get("training", {}))
    training["stage2"] = dict(
        pairs=list(pairs), n_train=len(gold), n_dev=len(dgold), seed=seed, conv=conv, nonlinearity=nonlinearity
    )
    metrics = {
        **base.metadata.get("metrics", {}),
        "stage2_dev_pearson": 100 * head.dev_pearson_,
        "stage2_best_epoch": head.best_epoch_,
        "stage2_epochs": len(head.history_) - 1,
        "stage2_stopped": head.stopped_,
    }
    # an in-memory Stage-1 scorer (the seed grid passes one) is recorded by its run name, not its repr
    stage1_run = portable_text(str(stage1)) if isinstance(stage1, (str, Path)) else base.name  # never an absolute path
    data = {**portable_hashes(base.metadata.get("data", {}), data_dir), **hashes, **dev_hashes}
    partial = {"phase": "training", "epochs": len(head.history_) - 1} if head.stopped_ else None
    return _save(scorer, out, training, data, metrics, partial, stage1_run=stage1_run)


def _save(scorer: Scorer, out, training: dict, data: dict, metrics: dict, partial: dict | None, **extra) -> Scorer:
    """Record in ``scorer`` what its heads were trained on (``data``: the files' hashes) and how they did (``partial``:
    why training ended early, or None), then save it to ``out`` and name it after that folder."""
    scorer.metadata = {"training": training, "data": data, "data_identity": data_identity(data), "metrics": metrics}
    scorer.metadata |= extra
    if partial:
        scorer.metadata["partial"] = partial
    scorer.save(out)
    scorer.name = Path(out).name
    return scorer


def train_heads(
    settings: Stage1Settings | Stage2Settings,
    *,
    progress: Callable[[dict], None] | None = None,
    stop: StopSignal | None = None,
) -> Scorer:
    """Run the Stage-1 or Stage-2 settings the command line and the app make (``out`` must be set): each field goes to
    :func:`train_stage1` / :func:`train_stage2` by name, ``lr`` and ``max_epochs`` only when set."""
    train = train_stage1 if isinstance(settings, Stage1Settings) else train_stage2
    options = {k: v for k, v in asdict(settings).items() if v is not None or k not in ("lr", "max_epochs")}
    return train(**options, progress=progress, stop=stop)
