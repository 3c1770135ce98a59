"""UMAP in a child process: its libraries never enter the caller's memory, and its compiled kernels are kept on disk.

Importing ``umap`` (numba, llvmlite, pynndescent, scikit-learn) and compiling its kernels would stay in a serving
process's memory for good, so projections run in a short-lived ``python -m mlse.analysis.umap_process --serve``
(:class:`UmapWorker`), points and coordinates passing through ``.npy`` files. umap does not cache its own numba
kernels on disk, so the child switches numba's file cache on (:func:`cache_umap_kernels`): compiling is paid once per
machine. Results equal an in-process :func:`fit_umap_2d` with the same arguments. See docs/deploy.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.dirs import cache_root

_TIMEOUT_S = 900
# what fit_umap_2d raises on points it cannot lay out (all alike): "no map of these", not a failed child
LAYOUT_ERRORS = (ValueError, FloatingPointError, np.linalg.LinAlgError)
log = logging.getLogger(__name__)


class UmapFailed(RuntimeError):
    """The child could not run (it crashed, timed out or could not start); the message holds its last lines."""


def fit_umap_2d(X: np.ndarray, *, n_neighbors: int, seed: int) -> np.ndarray:
    """[n, d] unit rows -> [n, 2] float32: UMAP with the cosine metric, ``min_dist`` 0.1, a fixed seed, one thread.

    Raises one of :data:`LAYOUT_ERRORS` on points UMAP cannot lay out (all alike)."""
    import warnings

    import umap

    reducer = umap.UMAP(
        n_components=2,
        metric="cosine",
        n_neighbors=n_neighbors,
        min_dist=0.1,
        random_state=seed,
        n_jobs=1,
        init="spectral" if len(X) > 50 else "random",
    )
    with warnings.catch_warnings():  # n_jobs / random_state notices are expected, not user-facing
        warnings.simplefilter("ignore")
        return np.asarray(reducer.fit_transform(X), dtype=np.float32)


def cache_umap_kernels() -> int:
    """Switch numba's on-disk cache on for umap's jitted functions -> how many were switched on."""
    import umap  # noqa: F401  (loads the submodules whose functions are listed below)
    from numba.core.registry import CPUDispatcher

    switched = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("umap") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == name:
                value.enable_caching()
                switched += 1
    return switched


def kernels_marker() -> Path:
    """The file that says umap's kernels are compiled into numba's file cache for these versions of umap, numba and
    Python (written by :func:`compile_kernels`; ``python -m mlse warm``, so a Docker build, leaves it)."""
    from importlib.metadata import version

    tag = f"umap-{version('umap-learn')}-numba-{version('numba')}-py{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_root() / "umap-kernels" / f"{tag}.done"


def compile_kernels(points: int = 120, seed: int = 0) -> Path:
    """Compile (or load) umap's kernels in a child with a projection of random points, then write
    :func:`kernels_marker` -> the marker. Raises :class:`UmapFailed` when the child fails (nothing is marked)."""
    X = np.random.default_rng(seed).standard_normal((points, 32)).astype(np.float32)
    with UmapWorker(warm=True) as worker:
        worker.project(X / np.linalg.norm(X, axis=1, keepdims=True), n_neighbors=15, seed=seed)
    marker = kernels_marker()
    atomic_write_text(marker, "umap's kernels are in numba's file cache\n")
    return marker


def umap_coords(X: np.ndarray, *, n_neighbors: int, seed: int, worker: UmapWorker | None = None) -> np.ndarray | None:
    """[n, d] unit rows -> [n, 2] by the first way that works: ``worker``, a new child, this process (a map rather
    than none); None when UMAP cannot lay these points out."""
    if worker is not None:
        try:
            return worker.project(X, n_neighbors=n_neighbors, seed=seed)
        except UmapFailed as exc:
            log.warning("%s; trying a new UMAP process", exc)
    try:
        return umap_2d(X, n_neighbors=n_neighbors, seed=seed)
    except UmapFailed as exc:
        log.warning("%s; projecting in this process", exc)
    try:
        return fit_umap_2d(X, n_neighbors=n_neighbors, seed=seed)
    except LAYOUT_ERRORS as exc:
        log.warning("UMAP failed on %d points (%s)", len(X), exc)
        return None


def umap_2d(X: np.ndarray, *, n_neighbors: int, seed: int, timeout_s: float = _TIMEOUT_S) -> np.ndarray | None:
    """[n, d] -> [n, 2] float32 from a child process, or None when UMAP could not lay these points out.

    Raises :class:`UmapFailed` when the child itself failed."""
    with UmapWorker(timeout_s=timeout_s) as worker:
        return worker.project(X, n_neighbors=n_neighbors, seed=seed)


class UmapWorker:
    """One child for several projections, started ahead of them (``warm``: it also loads umap's kernels with a tiny
    projection), so its start overlaps the caller's own work. One line on the child's stdin per job, one line back."""

    def __init__(self, *, warm: bool = False, timeout_s: float = _TIMEOUT_S):
        self._tmp = tempfile.TemporaryDirectory(prefix="mlse-umap-")
        self._folder = Path(self._tmp.name)
        self._stderr = open(self._folder / "stderr.txt", "w+")  # noqa: SIM115  (closed in close())
        self._timeout_s, self._jobs, self._start_error = timeout_s, 0, None
        cmd = [sys.executable, "-m", __name__, "--serve", *(["--warm"] if warm else [])]
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1
            )
        except OSError as exc:
            self._proc, self._start_error = None, exc

    def project(self, X: np.ndarray, *, n_neighbors: int, seed: int) -> np.ndarray | None:
        """[n, d] -> [n, 2] float32, or None when UMAP could not lay these points out; UmapFailed when the child
        failed (it is not used again then)."""
        if self._proc is None:
            raise UmapFailed(f"the UMAP process did not start: {self._start_error}")
        if self._proc.stdin.closed:
            raise UmapFailed(f"the UMAP process has ended (exit status {self._proc.returncode})")
        job = self._jobs
        self._jobs += 1
        points, coords = self._folder / f"points-{job}.npy", self._folder / f"coords-{job}.npy"
        np.save(points, np.ascontiguousarray(X, dtype=np.float32))
        try:
            self._proc.stdin.write(f"{points}\t{coords}\t{int(n_neighbors)}\t{int(seed)}\n")
            self._proc.stdin.flush()
        except OSError:  # the child is gone (broken pipe)
            raise self._failed() from None
        try:
            ready, _, _ = select.select([self._proc.stdout], [], [], self._timeout_s)
        except (OSError, ValueError) as exc:  # no select() on pipes here (Windows)
            self._stop()
            raise UmapFailed(f"cannot wait for the UMAP process here: {exc}") from exc
        if not ready:
            self._stop()
            raise UmapFailed(f"the UMAP process did not finish within {self._timeout_s:g} s")
        answer = self._proc.stdout.readline().strip()
        if answer == "ok":
            return np.load(coords)
        if answer == "none":
            return None
        raise self._failed()

    def _failed(self) -> UmapFailed:
        status = self._stop()
        self._stderr.seek(0)
        tail = "\n".join(self._stderr.read().strip().splitlines()[-5:])
        return UmapFailed(f"the UMAP process failed (exit status {status}): {tail}")

    def _stop(self, wait_s: float = 0.5) -> int | None:
        """Let the child end within ``wait_s`` (its stdin closed), else kill it -> its exit status."""
        if self._proc is None:
            return None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            return self._proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()

    def close(self) -> None:
        self._stop(wait_s=10.0)
        if self._proc is not None:
            self._proc.stdout.close()
        self._stderr.close()
        self._tmp.cleanup()

    def __enter__(self) -> UmapWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(warm: bool) -> int:
    """The child: projections for the jobs read from stdin, one answer line each on the original stdout ("ok",
    or "none" when UMAP could not lay the points out); anything a library prints goes to stderr."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    cache_umap_kernels()
    if warm:  # load (or compile) the kernels a real projection needs: spectral initialisation takes > 50 points
        points = np.random.default_rng(0).standard_normal((60, 8)).astype(np.float32)
        fit_umap_2d(points / np.linalg.norm(points, axis=1, keepdims=True), n_neighbors=5, seed=0)
    for line in sys.stdin:
        points, coords, n_neighbors, seed = line.rstrip("\n").split("\t")
        X = np.load(points)
        try:
            out = fit_umap_2d(X, n_neighbors=int(n_neighbors), seed=int(seed))
        except LAYOUT_ERRORS as exc:
            print(f"UMAP could not lay out {len(X)} points: {exc}", file=sys.stderr)
            answers.write("none\n")
            continue
        tmp = Path(coords).with_suffix(".part.npy")
        np.save(tmp, out)
        tmp.replace(coords)
        answers.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(_serve(warm="--warm" in sys.argv[1:]))
