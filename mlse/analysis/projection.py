"""Language vs meaning: 2-D maps of a multi-way parallel sample, with the two numbers that say what a map shows.

The sample is FLORES-200 devtest (sentence *i* is the same sentence in every language) or a user's own sentences
(:mod:`mlse.analysis.user_sample`; translations share an id). For each space of a model (``raw`` = the backbone;
``meaning``/``language`` = the Stage-1 head's outputs) it computes a 2-D projection (UMAP, cosine; or PCA), the
language-ID probe accuracy and translation retrieval@1. Each view is cached as one ``.npz`` under
``<MLSE cache>/projections``, keyed by all it depends on; a fully cached map encodes nothing. See docs/app/map.md.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlse.analysis.map_sample import Sample, flores_sample  # re-exported: the map's sample lives there
from mlse.analysis.umap_process import UmapWorker, umap_coords
from mlse.atomic import atomic_write_bytes
from mlse.dirs import cache_root
from mlse.errors import MlseError
from mlse.single_flight import single_flight

log = logging.getLogger(__name__)

SPACES = ("raw", "meaning", "language")
SPACE_TITLES = {"raw": "Raw (backbone)", "meaning": "Meaning (Stage 1)", "language": "Language (Stage 1)"}
# Scorer.encode_parts key -> space name used here.
_PART_OF_SPACE = {"raw": "backbone", "meaning": "meaning", "language": "language"}
METHODS = ("umap", "pca")
PROBE_FOLDS = 5
_FORMAT = "mlse-projection/1"  # part of the cache key: bump when the computation changes

Progress = Callable[[float, str], None]


# -- embeddings -----------------------------------------------------------------------------------------------------
def available_spaces(model) -> list[str]:
    """``raw`` for any encoder; ``meaning`` and ``language`` too when the model is a scorer with a Stage-1 head."""
    return list(SPACES) if getattr(model, "stage1", None) is not None else ["raw"]


def embed_spaces(model, texts: Sequence[str], spaces: Sequence[str]) -> dict[str, np.ndarray]:
    """Embeddings of ``texts`` in each requested space -> {space: float32 [n, d]}.

    The backbone goes through the embedding cache; the Stage-1 head on top is cheap enough to recompute.
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
MIN_UMAP_POINTS = 5  # fewer points are placed by PCA: UMAP's neighbour graph is meaningless there
UMAP_NEIGHBORS = 15


def projection_plan(n_points: int, method: str = "umap") -> tuple[str, int | None, str]:
    """How ``n_points`` points will be projected -> (method used, UMAP n_neighbors or None, a line for the page).

    UMAP needs fewer neighbours than points: below ``UMAP_NEIGHBORS + 1`` points ``n_neighbors`` shrinks to
    ``n_points - 1``, and below :data:`MIN_UMAP_POINTS` PCA takes over.
    """
    if method not in METHODS:
        raise MlseError(f"unknown projection method {method!r}; use one of {', '.join(METHODS)}")
    if method == "pca":
        return "pca", None, "PCA (cosine)"
    if n_points < MIN_UMAP_POINTS:
        return "pca", None, f"PCA (cosine): {n_points} points are too few for UMAP (it needs {MIN_UMAP_POINTS})"
    n_neighbors = min(UMAP_NEIGHBORS, n_points - 1)
    if n_neighbors < UMAP_NEIGHBORS:
        return "umap", n_neighbors, (f"UMAP (cosine) with n_neighbors shrunk to {n_neighbors} for {n_points} points")
    return "umap", n_neighbors, f"UMAP (cosine, {n_neighbors} neighbours)"


def project_2d_explained(X: np.ndarray, *, method: str = "umap", seed: int = 0, worker=None) -> tuple[np.ndarray, str]:
    """[n, d] -> ([n, 2] coordinates, how they were made: one line for the page).

    UMAP: cosine metric, fixed ``random_state``, ``n_neighbors`` from :func:`projection_plan`, run in a child process
    (``worker`` if given; :mod:`mlse.analysis.umap_process`). PCA runs on L2-normalised rows (cosine geometry).
    """
    X = _unit_rows(X)  # [n, d]
    used, n_neighbors, described = projection_plan(len(X), method)
    if used == "pca":
        return _pca_2d(X), described
    coords = umap_coords(X, n_neighbors=n_neighbors, seed=seed, worker=worker)  # [n, 2] or None
    if coords is None or not np.isfinite(coords).all():
        return _pca_2d(X), "PCA (cosine): UMAP could not lay out these points"
    return coords, described


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
    :func:`mlse.train.head_training.language_probe`, which this does not call because it embeds all of FLORES itself and
    uses one fixed half/half split). Folds are **grouped by sentence**: all translations of a test sentence are held out
    together, so the probe cannot recognise a sentence's meaning from its translation in training. Needs at least
    two languages and two sentences. A fold whose training part holds one language only (a small, unbalanced user
    sample) predicts that language.
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
        seen = np.unique(lang_idx[train])
        if len(seen) < 2:
            correct += int((lang_idx[test] == seen[0]).sum())
            continue
        probe = LogisticRegression(max_iter=2000, random_state=seed)
        probe.fit(X[train], lang_idx[train])
        correct += int((probe.predict(X[test]) == lang_idx[test]).sum())
    return correct / len(X)


def retrieval_at1(X: np.ndarray, lang_idx: np.ndarray, sentence_ids: np.ndarray) -> float | None:
    """Translation retrieval@1 (0-1) by cosine, averaged over ordered language pairs (A -> B, A != B).

    For each sentence of language A that has a translation in language B (same sentence id), the nearest of B's
    sentences must be one. Ties go to the lowest index, so a space that maps everything to one point scores near
    chance, not 1. Pairs of languages that share no sentence are left out; None when no pair shares one (fewer than
    two languages, or no translations marked).
    """
    X, lang_idx, sentence_ids = _unit_rows(X), np.asarray(lang_idx), np.asarray(sentence_ids)
    langs = np.unique(lang_idx)
    if len(langs) < 2:
        return None
    blocks = {lang: (X[lang_idx == lang], sentence_ids[lang_idx == lang]) for lang in langs}  # ([n_l, d], [n_l])
    scores = []
    for a, b in itertools.permutations(langs, 2):
        (Xa, ids_a), (Xb, ids_b) = blocks[a], blocks[b]
        queries = np.isin(ids_a, ids_b)  # [n_a]: sentences of A with a translation in B
        if not queries.any():
            continue
        nearest = (Xa[queries] @ Xb.T).argmax(1)  # [q]
        scores.append(float(np.mean(ids_b[nearest] == ids_a[queries])))
    return float(np.mean(scores)) if scores else None


# -- the map --------------------------------------------------------------------------------------------------------
@dataclass
class SpaceView:
    space: str
    coords: np.ndarray  # [L * n, 2]
    lang_id_accuracy: float | None
    retrieval_at1: float | None
    from_cache: bool = False
    projection: str = ""  # how the coordinates were made (projection_plan's line)

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
        """The probe's chance level: the share of the most frequent language (1 / L for FLORES)."""
        counts = np.bincount(np.asarray(self.sample.lang_idx), minlength=1)
        return float(counts.max() / max(counts.sum(), 1))

    @property
    def projection(self) -> str:
        """How the panels were projected (the first panel's line: all panels share the sample size)."""
        return next((v.projection for v in self.views.values() if v.projection), self.method.upper())


def projection_dir() -> Path:
    return cache_root() / "projections"


def projection_key(identity: str, langs: Sequence[str], n: int, seed: int, space: str, method: str) -> str:
    """The cache key: everything the coordinates and metrics depend on (the sample follows from langs, n, seed)."""
    blob = json.dumps([_FORMAT, identity, list(langs), int(n), int(seed), space, method, PROBE_FOLDS])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def sample_key(identity: str, sample: Sample, seed: int, space: str, method: str) -> str:
    """The cache key of any sample (a user's): a hash of its texts, languages and meanings, not of a FLORES request."""
    digest = hashlib.sha256()
    for part in (sample.texts, [sample.langs[i] for i in sample.lang_idx.tolist()], sample.sentence_ids.tolist()):
        digest.update(json.dumps(part, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    blob = json.dumps([_FORMAT, identity, "sample", digest.hexdigest(), int(seed), space, method, PROBE_FOLDS])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _cache_path(key: str) -> Path:
    return projection_dir() / f"{key}.npz"


def _load_view(path: Path, space: str, n_points: int, method: str) -> SpaceView | None:
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
    projection = metrics.get("projection") or projection_plan(n_points, method)[2]
    return SpaceView(
        space,
        coords,
        metrics.get("lang_id_accuracy"),
        metrics.get("retrieval_at1"),
        from_cache=True,
        projection=projection,
    )


def _save_view(path: Path, view: SpaceView, identity: str) -> None:
    metrics = {
        "lang_id_accuracy": view.lang_id_accuracy,
        "retrieval_at1": view.retrieval_at1,
        "identity": identity,
        "projection": view.projection,
    }
    buf = io.BytesIO()
    np.savez_compressed(buf, coords=view.coords, metrics=np.array(json.dumps(metrics)))
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError as exc:  # the cache is an optimisation: a read-only cache dir must not break the map
        log.warning("could not write projection cache %s: %s", path, exc)


def language_map(
    model,
    langs: Sequence[str] | None = None,
    n: int | None = None,
    *,
    sample: Sample | None = None,
    data_dir=None,
    seed: int = 0,
    method: str = "umap",
    spaces: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> LanguageMap:
    """Project a sample in every space of ``model`` (an encoder or a Scorer): ``n`` FLORES sentences in each of
    ``langs``, or a ready ``sample`` (a user's sentences, :func:`mlse.analysis.user_sample.user_sample`).

    ``spaces`` defaults to all the model has (:func:`available_spaces`). ``progress(fraction, message)`` is called as
    the work advances. Cached views are read back without encoding anything: a FLORES view is keyed by its languages,
    size and seed, any other sample by a hash of its texts, languages and meanings.
    """
    report = progress or (lambda fraction, message: None)
    if method not in METHODS:
        raise MlseError(f"unknown projection method {method!r}; use one of {', '.join(METHODS)}")
    have = available_spaces(model)
    spaces = list(spaces) if spaces is not None else have
    missing = [s for s in spaces if s not in have]
    if missing:
        raise MlseError(f"{model.name} has no {', '.join(missing)} space (a Stage-1 head gives meaning and language)")
    identity = model.identity
    if sample is None:
        if langs is None or n is None:
            raise MlseError("give FLORES languages and a sample size, or a ready sample")
        report(0.0, "loading FLORES")
        sample = flores_sample(langs, n, data_dir=data_dir, seed=seed)
        keys = {s: projection_key(identity, sample.langs, sample.n, seed, s, method) for s in spaces}
    else:
        if not sample.texts:
            raise MlseError("the sample has no sentences")
        report(0.0, f"{len(sample.texts)} sentences from {sample.source}")
        keys = {s: sample_key(identity, sample, seed, s, method) for s in spaces}
    return _map_sample(model, sample, keys, seed=seed, method=method, spaces=spaces, report=report)


def is_projected(model, langs: Sequence[str], n: int, *, data_dir=None, seed: int = 0, method: str = "umap") -> bool:
    """True when every panel of :func:`language_map` for this FLORES request is in the cache (looked up as it looks
    them up; nothing is encoded or projected): a caller can then draw the map at once."""
    sample = flores_sample(langs, n, data_dir=data_dir, seed=seed)
    keys = [projection_key(model.identity, sample.langs, sample.n, seed, s, method) for s in available_spaces(model)]
    return all(_cache_path(key).is_file() for key in keys)


def _map_sample(model, sample: Sample, keys: dict[str, str], *, seed, method, spaces, report) -> LanguageMap:
    result = LanguageMap(model.name, model.identity, method, seed, sample)
    paths = {s: _cache_path(keys[s]) for s in spaces}
    cached = lambda: {s: v for s in spaces if (v := _load_view(paths[s], s, len(sample.texts), method))}  # noqa: E731
    result.views = cached()
    if len(result.views) < len(spaces):
        # one computation per map at a time: who waited reads the cache
        waiting = "the same map is being computed for another request; waiting for it"
        with single_flight(("map", *(str(paths[s]) for s in spaces)), on_wait=lambda: report(0.05, waiting)):
            result.views = cached()
            _compute_views(model, sample, result, paths, seed, method, report)
    result.views = {s: result.views[s] for s in spaces}  # panel order = requested order
    report(1.0, "done")
    return result


def _compute_views(model, sample: Sample, result: LanguageMap, paths, seed, method, report) -> None:
    """Encode once and project each space of ``paths`` not in ``result.views`` yet (writing its cache file)."""
    if not (todo := [s for s in paths if s not in result.views]):
        return
    # the UMAP child starts now, so its start overlaps the encoding
    with UmapWorker(warm=True) if projection_plan(len(sample.texts), method)[0] == "umap" else nullcontext() as worker:
        report(0.05, f"embedding {len(sample.texts)} sentences with {model.name}")
        embeddings = embed_spaces(model, sample.texts, todo)  # {space: [N, d]}
        probe_problem = sample.probe_problem()
        for i, s in enumerate(todo):
            base = 0.3 + 0.7 * i / len(todo)
            report(base, f"{SPACE_TITLES[s]}: {method.upper()} projection")
            coords, projection = project_2d_explained(embeddings[s], method=method, seed=seed, worker=worker)
            report(base + 0.35 / len(todo), f"{SPACE_TITLES[s]}: language-ID probe and retrieval")
            X, langs, ids = embeddings[s], sample.lang_idx, sample.sentence_ids
            probe = None if probe_problem else language_id_accuracy(X, langs, ids, seed=seed)
            view = SpaceView(s, coords, probe, retrieval_at1(X, langs, ids), projection=projection)
            _save_view(paths[s], view, model.identity)
            result.views[s] = view
