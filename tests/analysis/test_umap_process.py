"""UMAP in a child process: the same coordinates as in this process, umap never imported by the caller, failures told
apart (points UMAP cannot lay out -> None; a child that cannot run -> UmapFailed, and the map still draws)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mlse.analysis import umap_process
from mlse.analysis.projection import project_2d_explained
from mlse.analysis.umap_process import UmapFailed, UmapWorker, fit_umap_2d, umap_2d


def _points(n: int = 40, d: int = 16, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.slow
def test_the_child_gives_the_coordinates_an_in_process_fit_gives():
    X = _points()
    child = umap_2d(X, n_neighbors=10, seed=4)
    assert child is not None and child.shape == (40, 2) and child.dtype == np.float32
    np.testing.assert_allclose(child, fit_umap_2d(X, n_neighbors=10, seed=4), atol=1e-5)


@pytest.mark.slow
def test_a_projection_leaves_umap_and_numba_out_of_the_calling_process():
    code = (
        "import sys, numpy as np; from mlse.analysis.projection import project_2d_explained;"
        "X = np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32);"
        "c, line = project_2d_explained(X, seed=0);"
        "loaded = sorted(m for m in ('umap', 'numba', 'pynndescent') if m in sys.modules);"
        "print(c.shape, line.startswith('UMAP'), loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.stdout.strip() == "(30, 2) True []", out.stderr[-2000:]


def test_points_umap_rejects_come_back_as_none_not_as_a_failure():
    assert umap_2d(_points(12), n_neighbors=1, seed=0) is None  # UMAP refuses n_neighbors < 2: exit status 3


def test_a_child_that_cannot_finish_raises_with_its_reason():
    with pytest.raises(UmapFailed, match="did not finish"):
        umap_2d(_points(), n_neighbors=10, seed=0, timeout_s=0.01)


def test_a_crashed_child_names_its_exit_status_and_last_lines(monkeypatch):
    monkeypatch.setattr(umap_process, "__name__", "mlse.no_such_module")
    with pytest.raises(UmapFailed, match=r"exit status 1.*No module named"):
        umap_2d(_points(), n_neighbors=10, seed=0)


def test_the_map_still_draws_when_the_child_cannot_run(monkeypatch):
    def cannot_run(X, **kw):
        raise UmapFailed("the UMAP process did not finish: no process")

    seen = []
    monkeypatch.setattr(umap_process, "umap_2d", cannot_run)
    monkeypatch.setattr(umap_process, "fit_umap_2d", lambda X, **kw: seen.append(kw) or X[:, :2].copy())
    coords, line = project_2d_explained(_points(30), seed=2)
    assert coords.shape == (30, 2) and line.startswith("UMAP") and seen == [{"n_neighbors": 15, "seed": 2}]


@pytest.mark.slow
def test_one_worker_projects_several_point_sets_as_separate_children_would():
    a, b = _points(40, seed=1), _points(70, seed=2)
    with UmapWorker(warm=True) as worker:
        first, second = worker.project(a, n_neighbors=10, seed=0), worker.project(b, n_neighbors=15, seed=1)
        assert worker.project(a, n_neighbors=1, seed=0) is None  # a rejected job does not end the worker
        np.testing.assert_array_equal(worker.project(a, n_neighbors=10, seed=0), first)
    np.testing.assert_allclose(first, umap_2d(a, n_neighbors=10, seed=0), atol=1e-5)
    np.testing.assert_allclose(second, umap_2d(b, n_neighbors=15, seed=1), atol=1e-5)


def test_a_worker_whose_child_died_gives_way_to_a_new_child():
    X = _points(30)
    with UmapWorker() as worker:
        worker._proc.kill()
        with pytest.raises(UmapFailed, match="exit status"):
            worker.project(X, n_neighbors=10, seed=0)
        coords = umap_process.umap_coords(X, n_neighbors=10, seed=0, worker=worker)
    assert coords is not None and coords.shape == (30, 2)


def test_a_map_projects_all_its_spaces_with_one_worker_started_before_the_encoding(fake_scorer, data_dir, monkeypatch):
    from mlse.analysis import projection

    events = []

    class CountingWorker:
        def __init__(self, *, warm=False):
            events.append(("start", warm))

        def project(self, X, *, n_neighbors, seed):
            events.append(("project", len(X)))
            return X[:, :2].copy()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            events.append(("close",))

    real_embed = projection.embed_spaces
    monkeypatch.setattr(projection, "UmapWorker", CountingWorker)
    monkeypatch.setattr(projection, "embed_spaces", lambda *a, **k: events.append(("encode",)) or real_embed(*a, **k))
    result = projection.language_map(fake_scorer, ["en", "de"], 10, data_dir=data_dir, method="umap")
    assert events == [("start", True), ("encode",), *[("project", 20)] * 3, ("close",)]
    assert len(result.views) == 3
