"""The data of a fine-tuning run: English-X training pairs, the frozen teacher's targets, the STS dev set and its score.

Training pairs are the contamination-filtered Tatoeba-Challenge bitext (English is always the src side), each pair
capped and sampled with its own seed, all shuffled together; from the data directory, else the shipped sample
(``info["source"]`` says which). Teacher embeddings go through the embedding cache. The dev score is Spearman x 100 of
the cosine on STS Multi MT **dev**, per pair.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlse.data.bitext import load_filtered_bitext, seed_per_pair
from mlse.data.parallel import seeded_subset
from mlse.data.stsb import load_sts
from mlse.encoders.protocol import cosine_predictions
from mlse.errors import MlseError
from mlse.evaluation.sts import sts_metrics
from mlse.models import load_model
from mlse.stop_signal import StopSignal, encode_in_chunks
from mlse.train.config import FinetuneConfig

_ENGLISH = ("en", "eng")


@dataclass
class TrainingData:
    """Shuffled translation pairs; ``src`` is English."""

    src: list[str]
    tgt: list[str]
    info: dict


def english_first(pair: str) -> tuple[str, str]:
    """``"de-en"`` -> ``("en", "de")``: English is the anchor (src) side whenever it is in the pair."""
    a, sep, b = pair.strip().partition("-")
    if not sep or not a or not b:
        raise MlseError(f"bad language pair {pair!r}; expected e.g. en-de")
    if b.lower() in _ENGLISH and a.lower() not in _ENGLISH:
        a, b = b, a
    return a, b


def run_bitext(cfg: FinetuneConfig, stop: StopSignal | None = None, label: str = "finetune data"):
    """The run's bitext sample: its English-X pairs, contamination-filtered, pair ``i`` capped at ``max_pairs`` and
    sampled with seed ``[seed, i]``."""
    return load_filtered_bitext(
        ["-".join(english_first(pair)) for pair in cfg.pairs],
        max_pairs=cfg.max_pairs,
        sample_seed=seed_per_pair(cfg.seed),
        data_dir=cfg.data_dir,
        stop=stop,
        label=label,
    )


def prepare_data(cfg: FinetuneConfig, stop: StopSignal | None = None) -> TrainingData:
    """The run's bitext sample (:func:`run_bitext`), all its pairs shuffled together."""
    bitext = run_bitext(cfg, stop)
    src, tgt, info = bitext.src, bitext.tgt, bitext.info
    if not src:
        raise MlseError(
            f"no training pairs left after the contamination filter and max_pairs={cfg.max_pairs} "
            f"(pairs: {', '.join(cfg.pairs)})"
        )
    order = np.random.default_rng(cfg.seed).permutation(len(src))
    info["n_pairs"] = len(src)
    return TrainingData([src[j] for j in order], [tgt[j] for j in order], info)


def teacher_targets(
    cfg: FinetuneConfig, data: TrainingData, dim: int, device: str, stop: StopSignal | None = None
) -> tuple:
    """Frozen-teacher embeddings (mse, soft): ``(t(src) [N, d_t], t(tgt) [N, d_t] or None, info)``, unnormalised (MSE
    targets are the raw outputs; soft labels are cosines). The dimension check runs on one text first."""
    if cfg.method not in ("mse", "soft"):
        return None, None, {}
    teacher = load_model(cfg.teacher, device=device)  # the same cache entries as `mlse eval` of the teacher
    probe = teacher.encode(data.src[:1], normalize=False)  # [1, d_t]
    if cfg.method == "mse" and cfg.bridge == "none" and probe.shape[1] != dim:
        raise MlseError(
            f"method 'mse' needs equal teacher and student dimensions: teacher {cfg.teacher!r} is {probe.shape[1]}-d, "
            f"student {cfg.student!r} is {dim}-d (use 'soft' or 'hard', --bridge linear, or a student of the "
            f"teacher's dimension)"
        )
    t0 = time.perf_counter()

    def targets(texts: list[str]) -> np.ndarray:  # stoppable between chunks; finished chunks stay cached
        return encode_in_chunks(teacher, texts, stop=stop, batch_size=cfg.batch_size, normalize=False)

    t_src = targets(data.src)  # [N, d_t]
    t_tgt = targets(data.tgt) if cfg.method == "soft" and cfg.label == "average" else None  # [N, d_t]
    info = {
        "teacher_identity": teacher.identity,
        "teacher_dim": int(probe.shape[1]),
        "teacher_encode_s": round(time.perf_counter() - t0, 2),
        "teacher_cache": dict(getattr(teacher, "stats", {})),
    }
    return t_src, t_tgt, info


@dataclass
class DevSet:
    """STS Multi MT dev pairs flattened: unique texts once, and per pair the rows of s1 / s2 in ``texts``."""

    texts: list[str]
    pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # pair -> (s1 rows [n], s2 rows [n], gold [n])


def load_dev(pairs: Sequence[str], data_dir: str | None, max_rows: int | None, seed: int) -> DevSet:
    """Dev pairs for the in-training score; the texts are deduplicated (en-xx pairs share their English side)."""
    index: dict[str, int] = {}
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for pair in pairs:
        ds = load_sts(pair, "dev", data_dir)
        rows = seeded_subset(len(ds.scores), max_rows or None, seed)
        s1 = np.array([index.setdefault(ds.s1[r], len(index)) for r in rows])
        s2 = np.array([index.setdefault(ds.s2[r], len(index)) for r in rows])
        out[pair] = (s1, s2, ds.scores[rows].astype(np.float64))
    return DevSet(list(index), out)


def student_embeddings(
    student, texts: Sequence[str], batch_size: int, *, normalize: bool, stop: StopSignal | None = None
) -> np.ndarray:
    """The student's embeddings [n, d] of ``texts`` in eval mode (no dropout), put back in train mode after; ``stop``
    is asked between chunks."""
    student.eval()
    try:
        return encode_in_chunks(
            student,
            texts,
            stop=stop,
            batch_size=batch_size,
            convert_to_numpy=True,
            show_progress_bar=False,
            normalize_embeddings=normalize,
        )
    finally:
        student.train()


def dev_scores(student, dev: DevSet, batch_size: int, stop: StopSignal | None = None) -> dict[str, float]:
    """Spearman x 100 of the cosine per dev pair (:func:`student_embeddings`; :class:`~mlse.stop_signal.Stopped`
    abandons the evaluation)."""
    emb = student_embeddings(student, dev.texts, batch_size, normalize=True, stop=stop)  # [n_texts, d]
    return {
        pair: sts_metrics(cosine_predictions(emb[s1], emb[s2]), gold, n_boot=0)["spearman"]
        for pair, (s1, s2, gold) in dev.pairs.items()
    }
