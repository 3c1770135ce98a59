"""Language vs meaning: 2-D maps of a multi-way parallel sample, with the two numbers that say what a map shows.

The sample is FLORES-200 devtest, where sentence *i* is the same sentence in every language. For each embedding space
of a model (``raw`` = the backbone; ``meaning`` and ``language`` = the Stage-1 head's two outputs, when present) this
module computes:

* a 2-D projection (UMAP with the cosine metric, or PCA for quick checks);
* **language-ID probe accuracy**: how well a linear classifier tells the language from the embedding. High in the raw
  and language spaces is expected; a meaning space that forgot the language drives it towards chance;
* **translation retrieval@1**: for a sentence in language A, is its nearest neighbour among language B's sentences its
  translation. High means the space groups by meaning rather than by language.

Projections and metrics are cached on disk (one ``.npz`` per model identity, languages, sample size, seed, method and
space) under ``<MLSE cache>/projections``; embeddings go through the embedding cache, so a repeated request recomputes
nothing and, when every space is cached, does not even encode.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_bytes
from mlse.data.flores import load_flores
from mlse.dirs import cache_root
from mlse.errors import MlseError

log = logging.getLogger(__name__)

SPACES = ("raw", "meaning", "language")
SPACE_TITLES = {"raw": "Raw (backbone)", "meaning": "Meaning (Stage 1)", "language": "Language (Stage 1)"}
# Scorer.encode_parts key -> space name used here.
_PART_OF_SPACE = {"raw": "backbone", "meaning": "meaning", "language": "language"}
# Eight languages in five scripts: a readable default map.
METHODS = ("umap", "pca")
PROBE_FOLDS = 5
_FORMAT = "mlse-projection/1"  # part of the cache key: bump when the computation changes

Progress = Callable[[float, str], None]


# -- the sample -----------------------------------------------------------------------------------------------------
@dataclass
class Sample:
    """``n`` FLORES sentences in each of ``langs``, language-major: point ``k`` is ``langs[lang_idx[k]]`` of
    sentence ``sentence_ids[k]``."""

    langs: list[str]
    ids: np.ndarray  # [n] FLORES line numbers (0-based), sorted
    texts: list[str]  # [L * n]
    lang_idx: np.ndarray  # [L * n] index into langs
    sentence_ids: np.ndarray  # [L * n] FLORES line number of each point

    @property
    def n(self) -> int:
        return len(self.ids)

    def text(self, lang: str, sentence_id: int) -> str:
        li, pos = self.langs.index(lang), int(np.searchsorted(self.ids, sentence_id))
        return self.texts[li * self.n + pos]


def flores_sample(langs: Sequence[str], n: int, *, data_dir=None, seed: int = 0) -> Sample:
    """A seeded subset of ``n`` FLORES sentence ids, in every language of ``langs`` (codes as ``load_flores`` takes).

    A random subset rather than the first ``n`` lines: FLORES is ordered by source article, so the first lines would
    cover few topics.
    """
    if not langs:
        raise MlseError("choose at least one language")
    if n < 1:
        raise MlseError(f"sentences per language must be at least 1 (got {n})")
    flores = load_flores(list(langs), data_dir)  # {code: [1012 lines]}; DataError on a missing folder or bad code
    total = len(next(iter(flores.values())))
    ids = np.arange(total) if n >= total else np.sort(np.random.default_rng(seed).choice(total, n, replace=False))
    codes = list(flores)
    texts = [flores[code][i] for code in codes for i in ids]
    lang_idx = np.repeat(np.arange(len(codes)), len(ids))  # [L * n]
    sentence_ids = np.tile(ids, len(codes))  # [L * n]
    return Sample(codes, ids, texts, lang_idx, sentence_ids)


# -- embeddings -----------------------------------------------------------------------------------------------------
def available_spaces(model) -> list[str]:
    """``raw`` for any encoder; ``meaning`` and ``language`` too when the model is a scorer with a Stage-1 head."""
    return list(SPACES) if getattr(model, "stage1", None) is not None else ["raw"]


def embed_spaces(model, texts: Sequence[str], spaces: Sequence[str]) -> dict[str, np.ndarray]:
    """Embeddings of ``texts`` in each requested space -> {space: float32 [n, d]}.

    The backbone goes through the embedding cache (``load_encoder`` wraps it); the Stage-1 head on top is a few matrix
    products, cheap enough to recompute.
    """
    if hasattr(model, "encode_parts") and getattr(model, "stage1", None) is not None:
        parts = model.encode_parts(list(texts))
        return {s: np.asarray(parts[_PART_OF_SPACE[s]], dtype=np.float32) for s in spaces}
    if any(s != "raw" for s in spaces):
        raise MlseError(f"{getattr(model, 'name', 'this model')} has no Stage-1 head: only the raw space exists")
    base = getattr(model, "backbone", model)  # a Scorer without heads: its backbone is the raw space
    return {"raw": np.asarray(base.encode(list(texts)), dtype=np.float32)}


def _unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


# -- projection -----------------------------------------------------------------------------------------------------
def project_2d(X: np.ndarray, *, method: str = "umap", seed: int = 0) -> np.ndarray:
    """[n, d] -> [n, 2] coordinates.

    UMAP uses the cosine metric, a fixed ``random_state`` (deterministic, single-threaded) and ``n_neighbors`` shrunk
    for small samples (UMAP needs fewer neighbours than points). PCA runs on L2-normalised rows, so it too reflects
    cosine geometry; it is instant and used for quick checks and tests. Fewer than 5 points are always placed by PCA:
    UMAP's graph is meaningless there.
    """
    if method not in METHODS:
        raise MlseError(f"unknown projection method {method!r}; use one of {', '.join(METHODS)}")
    X = _unit_rows(X)  # [n, d]
    if method == "pca" or len(X) < 5:
        return _pca_2d(X)
    import umap  # lazy: umap costs seconds to import; only a projection needs it

    n_neighbors = int(min(15, max(2, len(X) - 1)))
    reducer = umap.UMAP(n_components=2, metric="cosine", n_neighbors=n_neighbors, min_dist=0.1, random_state=seed,
                        n_jobs=1, init="spectral" if len(X) > 50 else "random")  # fmt: skip
    with warnings.catch_warnings():  # n_jobs / random_state notices are expected, not user-facing
        warnings.simplefilter("ignore")
        return np.asarray(reducer.fit_transform(X), dtype=np.float32)  # [n, 2]


def _pca_2d(X: np.ndarray) -> np.ndarray:
    """Top-2 principal components via SVD; zero-padded when the data has fewer than 2 dimensions of variance."""
    out = np.zeros((len(X), 2), dtype=np.float32)
    if len(X) < 2:
        return out
    centred = X - X.mean(0, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)  # u [n, r], s [r]
    k = min(2, len(s))
    out[:, :k] = u[:, :k] * s[:k]
    return out


# -- metrics --------------------------------------------------------------------------------------------------------
def language_id_accuracy(
    X: np.ndarray, lang_idx: np.ndarray, groups: np.ndarray, *, folds: int = PROBE_FOLDS, seed: int = 0
) -> float | None:
    """Accuracy (0-1) of a cross-validated language-ID probe, or None when it cannot be measured.

    The probe is a multinomial logistic regression on L2-normalised embeddings (the same estimator as
    :func:`mlse.train.heads.language_probe`, which this does not call because it embeds all of FLORES itself and uses
    one fixed half/half split). Folds are **grouped by sentence**: all translations of a test sentence are held out
    together, so the probe cannot recognise a sentence's meaning from its translation in training. Needs at least
    two languages and two sentences.
    """
    from sklearn.linear_model import LogisticRegression  # lazy: slow to import; only this computation needs it
    from sklearn.model_selection import GroupKFold

    lang_idx, groups = np.asarray(lang_idx), np.asarray(groups)
    n_groups = len(np.unique(groups))
    if len(np.unique(lang_idx)) < 2 or n_groups < 2:
        return None
    X = _unit_rows(X)  # [n, d]
    correct = 0
    for train, test in GroupKFold(n_splits=min(folds, n_groups)).split(X, lang_idx, groups):
        probe = LogisticRegression(max_iter=2000, random_state=seed)
        probe.fit(X[train], lang_idx[train])
        correct += int((probe.predict(X[test]) == lang_idx[test]).sum())
    return correct / len(X)


def retrieval_at1(X: np.ndarray, lang_idx: np.ndarray, sentence_ids: np.ndarray) -> float | None:
    """Translation retrieval@1 (0-1) by cosine, averaged over ordered language pairs (A -> B, A != B).

    For each sentence of language A the nearest of language B's sentences must be its translation (same sentence id).
    Ties go to the lowest index, so a space that maps everything to one point scores near chance, not 1. None with
    fewer than two languages.
    """
    X, lang_idx, sentence_ids = _unit_rows(X), np.asarray(lang_idx), np.asarray(sentence_ids)
    langs = np.unique(lang_idx)
    if len(langs) < 2:
        return None
    blocks = {}
    for lang in langs:
        rows = np.flatnonzero(lang_idx == lang)
        blocks[lang] = (X[rows], sentence_ids[rows])  # ([n_l, d], [n_l])
    scores = []
    for a in langs:
        Xa, ids_a = blocks[a]
        for b in langs:
            if a == b:
                continue
            Xb, ids_b = blocks[b]
            nearest = (Xa @ Xb.T).argmax(1)  # [n_a]
            scores.append(float(np.mean(ids_b[nearest] == ids_a)))
    return float(np.mean(scores))


# -- the map --------------------------------------------------------------------------------------------------------
@dataclass
class SpaceView:
    space: str
    coords: np.ndarray  # [L * n, 2]
    lang_id_accuracy: float | None
    retrieval_at1: float | None
    from_cache: bool = False

    @property
    def title(self) -> str:
        return SPACE_TITLES.get(self.space, self.space)


@dataclass
class LanguageMap:
    model: str
    identity: str
    method: str
    seed: int
    sample: Sample
    views: dict[str, SpaceView] = field(default_factory=dict)

    @property
    def chance(self) -> float:
        return 1.0 / len(self.sample.langs)


def projection_dir() -> Path:
    return cache_root() / "projections"


def projection_key(identity: str, langs: Sequence[str], n: int, seed: int, space: str, method: str) -> str:
    """The cache key: everything the coordinates and metrics depend on (the sample follows from langs, n, seed)."""
    blob = json.dumps([_FORMAT, identity, list(langs), int(n), int(seed), space, method, PROBE_FOLDS])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _cache_path(key: str) -> Path:
    return projection_dir() / f"{key}.npz"


def _load_view(path: Path, space: str, n_points: int) -> SpaceView | None:
    """A cached view, or None when absent or unreadable (a damaged file is simply recomputed and replaced)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            coords = np.asarray(z["coords"], dtype=np.float32)
            metrics = json.loads(str(z["metrics"]))
    except (OSError, ValueError, KeyError) as exc:
        log.warning("projection cache %s unreadable (%s); recomputing", path, exc)
        return None
    if coords.shape != (n_points, 2):
        return None
    return SpaceView(space, coords, metrics.get("lang_id_accuracy"), metrics.get("retrieval_at1"), from_cache=True)


def _save_view(path: Path, view: SpaceView, identity: str) -> None:
    metrics = {"lang_id_accuracy": view.lang_id_accuracy, "retrieval_at1": view.retrieval_at1, "identity": identity}
    buf = io.BytesIO()
    np.savez_compressed(buf, coords=view.coords, metrics=np.array(json.dumps(metrics)))
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError as exc:  # the cache is an optimisation: a read-only cache dir must not break the map
        log.warning("could not write projection cache %s: %s", path, exc)


def language_map(
    model,
    langs: Sequence[str],
    n: int,
    *,
    data_dir=None,
    seed: int = 0,
    method: str = "umap",
    spaces: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> LanguageMap:
    """Project ``n`` FLORES sentences in each of ``langs`` in every space of ``model`` (an encoder or a Scorer).

    ``spaces`` defaults to all the model has (:func:`available_spaces`). ``progress(fraction, message)`` is called as
    the work advances. Cached views are read back without encoding anything.
    """
    report = progress or (lambda fraction, message: None)
    if method not in METHODS:
        raise MlseError(f"unknown projection method {method!r}; use one of {', '.join(METHODS)}")
    have = available_spaces(model)
    spaces = list(spaces) if spaces is not None else have
    missing = [s for s in spaces if s not in have]
    if missing:
        raise MlseError(f"{model.name} has no {', '.join(missing)} space (a Stage-1 head gives meaning and language)")
    report(0.0, "loading FLORES")
    sample = flores_sample(langs, n, data_dir=data_dir, seed=seed)
    identity = model.identity
    result = LanguageMap(model.name, identity, method, seed, sample)
    paths = {s: _cache_path(projection_key(identity, sample.langs, sample.n, seed, s, method)) for s in spaces}
    for s in spaces:
        view = _load_view(paths[s], s, len(sample.texts))
        if view is not None:
            result.views[s] = view
    todo = [s for s in spaces if s not in result.views]
    if todo:
        report(0.05, f"embedding {len(sample.texts)} sentences with {model.name}")
        embeddings = embed_spaces(model, sample.texts, todo)  # {space: [L * n, d]}
        for i, s in enumerate(todo):
            base = 0.3 + 0.7 * i / len(todo)
            report(base, f"{SPACE_TITLES[s]}: {method.upper()} projection")
            coords = project_2d(embeddings[s], method=method, seed=seed)  # [L * n, 2]
            report(base + 0.35 / len(todo), f"{SPACE_TITLES[s]}: language-ID probe and retrieval")
            view = SpaceView(
                s,
                coords,
                language_id_accuracy(embeddings[s], sample.lang_idx, sample.sentence_ids, seed=seed),
                retrieval_at1(embeddings[s], sample.lang_idx, sample.sentence_ids),
            )
            _save_view(paths[s], view, identity)
            result.views[s] = view
    result.views = {s: result.views[s] for s in spaces}  # panel order = requested order
    report(1.0, "done")
    return result
